package slackapi

import (
	"cmp"
	"slices"
	"time"
)

// The governor's queues: the calls of this process waiting for one
// budget, served by priority, then arrival. Only the best waiter asks
// Redis; the others sleep until its answer says budget may be due.

// lane is the queue of this process's calls waiting for one budget.
type lane struct {
	key     string
	waiters []*waiter // by priority, then arrival
	holder  *waiter   // the waiter asking Redis now
	next    [2]time.Time
	timer   *time.Timer
}

type waiter struct {
	c    Call
	seq  uint64
	turn chan struct{} // its turn to ask for budget
	done chan error    // merged away
}

func (ln *lane) insert(w *waiter) {
	i, _ := slices.BinarySearchFunc(ln.waiters, w, func(a, b *waiter) int {
		return cmp.Or(cmp.Compare(a.c.Prio, b.c.Prio), cmp.Compare(a.seq, b.seq))
	})
	ln.waiters = slices.Insert(ln.waiters, i, w)
}

func (ln *lane) remove(w *waiter) {
	if i := slices.Index(ln.waiters, w); i >= 0 {
		ln.waiters = slices.Delete(ln.waiters, i, i+1)
	}
	if ln.holder == w {
		ln.holder = nil
	}
}

func (ln *lane) lossy() int {
	n := 0
	for _, w := range ln.waiters {
		if w.c.Prio == Lossy {
			n++
		}
	}
	return n
}

func laneKey(c Call, l RateLimit) string {
	k := c.Team + " " + c.Method
	if l.ChannelPerMinute > 0 && c.Channel != "" {
		k += " " + c.Channel
	}
	return k
}

// leave takes w out of its lane (context ended, deadline passed).
func (g *Governor) leave(ln *lane, w *waiter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln.remove(w)
	g.kickLocked(ln)
	g.gcLocked(ln)
}

// kickLocked gives the lane's best waiter its turn when its budget may be
// due, or sets the lane's timer for then.
func (g *Governor) kickLocked(ln *lane) {
	if ln.holder != nil || len(ln.waiters) == 0 {
		return
	}
	w := ln.waiters[0]
	at := ln.next[w.c.Prio]
	if st := g.known[w.c.Team+" "+w.c.Method]; st != nil && st.paused.After(at) {
		at = st.paused
	}
	if d := time.Until(at); d > 0 {
		if ln.timer == nil {
			ln.timer = time.AfterFunc(d, func() {
				g.mu.Lock()
				defer g.mu.Unlock()
				g.kickLocked(ln)
			})
		} else {
			ln.timer.Reset(d)
		}
		return
	}
	ln.holder = w
	w.turn <- struct{}{}
}

func (g *Governor) laneLocked(key string) *lane {
	ln := g.lanes[key]
	if ln == nil {
		if len(g.lanes) >= maxLanes {
			g.sweepLocked()
		}
		ln = &lane{key: key}
		g.lanes[key] = ln
	}
	return ln
}

// maxLanes bounds the lanes kept between uses (one per workspace, method
// and, for chat.postMessage, channel).
const maxLanes = 4096

// sweepLocked forgets every idle lane (their refusal times only spare a
// round trip).
func (g *Governor) sweepLocked() {
	for k, ln := range g.lanes {
		if ln.holder == nil && len(ln.waiters) == 0 {
			if ln.timer != nil {
				ln.timer.Stop()
			}
			delete(g.lanes, k)
		}
	}
}

// gcLocked forgets an idle lane whose refusals are over.
func (g *Governor) gcLocked(ln *lane) {
	now := time.Now()
	if ln.holder != nil || len(ln.waiters) > 0 || now.Before(ln.next[Must]) || now.Before(ln.next[Lossy]) {
		return
	}
	if ln.timer != nil {
		ln.timer.Stop()
	}
	if g.lanes[ln.key] == ln {
		delete(g.lanes, ln.key)
	}
}
