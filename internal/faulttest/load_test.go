package faulttest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestAckLatencyUnderLoad (R2): two replicas receive 50 mentions a second
// (default 15 s, full 60 s), each a new thread and a turn. Acks must stay
// fast (p99 ≤ 500 ms, Slack's deadline is 3 s) and no envelope may time
// out on Slack's side; every mention is answered once.
func TestAckLatencyUnderLoad(t *testing.T) {
	const rate = 50
	dur := pick(15*time.Second, 60*time.Second)
	c := newCluster(t, clusterOpts{})
	c.start()
	c.start()

	start := time.Now()
	roots := map[string]string{}
	tick := time.NewTicker(time.Second / rate)
	n := 0
	for time.Since(start) < dur {
		<-tick.C
		n++
		id := fmt.Sprintf("msg-%d", n)
		roots[id] = c.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "please answer "+id, "").TS
	}
	tick.Stop()
	sent := time.Since(start)
	c.waitFor("every envelope acked or given up", 30*time.Second, c.settled)
	c.waitFor("every mention answered", 120*time.Second, func() bool { return c.answered(roots) })

	var lat []time.Duration
	late, failed, retried := 0, 0, 0
	for _, e := range c.emu.Envelopes() {
		if e.Acked {
			lat = append(lat, e.AckLatency)
		}
		if e.Late {
			late++
		}
		if e.Failed {
			failed++
		}
		for _, d := range e.Deliveries {
			if d.RetryReason == "timeout" {
				retried++
			}
		}
	}
	s := summarize(lat)
	o := c.tally(roots, start)
	report(t, "ack-latency", "rate_per_s", rate, "duration", sent.Round(time.Millisecond), "mentions", n,
		"envelopes", len(lat), "ack", s, "slack_timeouts", late+failed+retried,
		"lost", o.lost, "duplicate_replies", o.duplicates)
	if late+failed+retried != 0 {
		t.Errorf("%d late acks, %d failed envelopes, %d timeout redeliveries; want none", late, failed, retried)
	}
	if s.p99 > 500*time.Millisecond {
		t.Errorf("ack p99 %v, want ≤ 500ms", s.p99)
	}
	if o.lost != 0 || o.duplicates != 0 {
		t.Errorf("lost=%d duplicates=%d; want 0 and 0", o.lost, o.duplicates)
	}
}

// TestRollingRestart (R4): three replicas are replaced one by one (start
// the new one, then SIGTERM the old: one of surge) under steady traffic of
// mentions and button clicks. No event or click may be lost or answered
// twice, every old replica exits within its grace period, and the socket
// count stays within the budget (replicas × connections + surge).
func TestRollingRestart(t *testing.T) {
	const replicas, mentionsPerSec, clicksPerSec = 3, 5, 1
	c := newCluster(t, clusterOpts{words: 30, interval: 40 * time.Millisecond})
	old := []*replica{c.start(), c.start(), c.start()}
	budget := replicas*1 + 1

	var (
		mu        sync.Mutex
		roots     = map[string]string{}
		clicks    []*slackemu.Interaction
		maxLive   atomic.Int32
		stop      = make(chan struct{})
		traffic   sync.WaitGroup
		rng       = rand.New(rand.NewPCG(3, 5))
		mentioned int
	)
	traffic.Go(func() {
		tick := time.NewTicker(time.Second / mentionsPerSec)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			mentioned++
			id := fmt.Sprintf("msg-%d", mentioned)
			ts := c.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "please answer "+id, "").TS
			mu.Lock()
			roots[id] = ts
			var target string
			if i%(mentionsPerSec/clicksPerSec) == 0 && len(roots) > 0 {
				// Bob clicks Stop on some answer: he may not stop it, so
				// the bot acks and tells him so; the answer goes on.
				for _, r := range roots {
					if rng.IntN(2) == 0 || target == "" {
						target = r
					}
				}
			}
			mu.Unlock()
			if target != "" {
				in := c.emu.ClickRaw(slackemu.TeamID, slackemu.UserBob, slackemu.ChannelGen, target, map[string]any{
					"type": "button", "action_id": "bobbin_stop", "block_id": "bobbin_controls",
					"value": slackemu.TeamID + ":" + slackemu.ChannelGen + ":" + target,
				})
				mu.Lock()
				clicks = append(clicks, in)
				mu.Unlock()
			}
		}
	})
	traffic.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if n := int32(c.emu.LiveConnections()); n > maxLive.Load() {
				maxLive.Store(n)
			}
		}
	})

	time.Sleep(2 * time.Second)
	var exits []time.Duration
	for _, r := range old {
		c.start()
		term := time.Now()
		r.p.signal(syscall.SIGTERM)
		if !r.p.wait(30 * time.Second) {
			t.Errorf("replica %s did not exit within 30 s of SIGTERM", r.name)
		}
		exits = append(exits, time.Since(term))
		time.Sleep(time.Second)
	}
	time.Sleep(2 * time.Second)
	close(stop)
	traffic.Wait()

	mu.Lock()
	all := roots
	cl := clicks
	mu.Unlock()
	c.waitFor("every envelope acked or given up", 60*time.Second, c.settled)
	c.waitFor("every mention answered", 120*time.Second, func() bool { return c.answered(all) })
	lostClicks := 0
	for _, in := range cl {
		if e, ok := c.emu.Envelope(in.EnvelopeID); !ok || !e.Acked || e.Late {
			lostClicks++
		}
	}
	failedEvents := 0
	for _, f := range c.emu.Failures() {
		if f.Type == slackemu.TypeEventsAPI {
			failedEvents++
		}
	}
	o := c.tally(all, time.Now())
	stats := c.emu.ConnStats()
	exitSum := summarize(exits)
	report(t, "rolling-restart", "replicas", replicas, "mentions", len(all), "clicks", len(cl),
		"lost_events", o.lost+failedEvents, "lost_clicks", lostClicks, "duplicate_replies", o.duplicates,
		"handed_over", o.interrupted, "max_live_sockets", maxLive.Load(), "emu_max_live", stats.MaxLive,
		"socket_budget", budget, "sockets_opened", stats.Opened, "sigterm_exit", exitSum)
	if o.lost != 0 || failedEvents != 0 || o.duplicates != 0 || lostClicks != 0 {
		t.Errorf("lost events=%d (+%d given up), lost clicks=%d, duplicate replies=%d; want all 0", o.lost, failedEvents, lostClicks, o.duplicates)
	}
	if int(maxLive.Load()) > budget || stats.MaxLive > budget {
		t.Errorf("up to %d sockets open (emulator saw %d), budget %d", maxLive.Load(), stats.MaxLive, budget)
	}
}
