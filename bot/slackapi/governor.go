package slackapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/bobbinbot/bobbin/bot/internal/pause"
	"github.com/bobbinbot/bobbin/session"
)

// The Slack call governor. Every Web API call the bot makes asks it for
// budget first (Client.Do; the transport catches any call that did not):
// it knows each method's budget (limits.go), spends from the budget all
// replicas share in Redis (session.Spend: one round trip), pauses a method
// for the whole workspace when Slack answers 429 (session.Throttled) and
// orders the calls waiting in this process by priority. Lossy calls never
// queue without bound: they are merged into a newer call for the same
// target, or dropped when budget does not come soon enough.

// Priority orders calls waiting for the same budget.
type Priority int

const (
	// Must: the final text of a reply, approval prompts and their
	// updates, error notices, answers to clicks and commands. Waits its
	// turn until its context ends; never dropped.
	Must Priority = iota
	// Lossy: interim edits of a streaming reply, status lines,
	// reactions on queued messages. Leaves budget for must-deliver calls;
	// merged or dropped rather than queued.
	Lossy
)

func (p Priority) String() string {
	if p == Must {
		return "must"
	}
	return "lossy"
}

// Call describes one Web API call to the governor.
type Call struct {
	// Team is the workspace whose budget and token the call uses ("" or
	// AppScope: the app's own).
	Team string
	// Method is the Web API method (a constant of methods.go).
	Method string
	// Channel selects the per-channel budget (chat.postMessage).
	Channel string
	Prio    Priority
	// Merge: a lossy call still waiting with the same key is replaced by
	// this one (it returns ErrMerged).
	Merge string
	// Wait bounds how long a lossy call waits for budget: 0 tries once,
	// negative waits until ctx ends (the caller bounds it).
	Wait time.Duration
	// Slot makes the call take or keep a live-reply slot (ErrNoSlot when
	// none is free; nothing is spent then).
	Slot *Slot
	// NoRefresh: Client.Do returns a refused token's error as it is, for
	// a caller that decides itself whether a new token can help (the
	// tokens_revoked check).
	NoRefresh bool
}

// Slot names a reply's slot in a workspace pool; cover is the method
// of the reply's final call, whose budget must have room for it.
type Slot struct{ Pool, ID, Cover string }

var (
	ErrDropped = errors.New("bot: Slack call dropped: no budget in time")
	ErrMerged  = errors.New("bot: Slack call merged into a newer one")
	ErrNoSlot  = errors.New("bot: no live-reply slot free")
)

// BudgetError is a try-once lossy call refused for want of budget; wait
// says when budget is due.
type BudgetError struct{ Wait time.Duration }

func (e BudgetError) Error() string { return fmt.Sprintf("%v (next in %v)", ErrDropped, e.Wait) }
func (e BudgetError) Unwrap() error { return ErrDropped }

// Budget is the shared budget (*session.Store has it; without it the
// Governor keeps budgets in this process only).
type Budget interface {
	Spend(ctx context.Context, r session.SpendRequest) (session.SpendResult, error)
	Throttled(ctx context.Context, r session.SpendRequest, retryAfter time.Duration) (float64, time.Duration, error)
	ReleaseSlot(ctx context.Context, team, pool, id string) error
}

// maxLossyWaiters bounds the lossy calls waiting for one budget in this
// process; past it a new one is dropped.
const maxLossyWaiters = 32

// appScope is the budget scope of calls that name no workspace (the
// app-level apps.connections.open, auth.test at start-up).
const AppScope = "app"

// Governor is safe for concurrent use.
type Governor struct {
	store   Budget
	limits  map[string]RateLimit
	m       *Metrics
	log     *slog.Logger
	slotTTL time.Duration

	mu     sync.Mutex
	seq    uint64
	lanes  map[string]*lane
	known  map[string]*methodState // team+" "+method
	slots  map[string]int          // team+" "+pool → holders last seen
	local  map[string]*localBucket // budgets while Redis is away
	warned time.Time
	// ungoverned counts calls that reached Slack without asking the
	// Governor first, by method (export_test.go).
	ungoverned map[string]int
}

// methodState is what this process knows of a method's shared state,
// and the lateness of its calls (governor_lag.go).
type methodState struct {
	factor float64
	paused time.Time
	lag    lagMeter
}

// stateLocked is the state of key (team+" "+method), made when missing.
func (g *Governor) stateLocked(key string) *methodState {
	st := g.known[key]
	if st == nil {
		st = &methodState{}
		g.known[key] = st
	}
	return st
}

func NewGovernor(store Budget, limits map[string]RateLimit, m *Metrics, log *slog.Logger, slotTTL time.Duration) *Governor {
	return &Governor{
		store: store, limits: limits, m: m, log: log, slotTTL: slotTTL,
		lanes: map[string]*lane{}, known: map[string]*methodState{}, slots: map[string]int{},
		local: map[string]*localBucket{}, ungoverned: map[string]int{},
	}
}

// Limit is the budget of method.
func (g *Governor) Limit(method string) RateLimit {
	if l, ok := g.limits[method]; ok {
		return l
	}
	if l, ok := g.limits[defaultLimitKey]; ok {
		return l
	}
	return tier3
}

// grant is the budget for one call; the transport finds it in the
// request's context.
type Grant struct {
	team, method, channel string
	used                  bool // guarded by the transport (one request per grant)
	mu                    sync.Mutex
	// followed: the grant's lateness is measured (governor_lag.go);
	// set before Acquire returns it.
	followed bool
}

// sent reports whether the transport took the grant for a request.
func (g *Grant) sent() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used
}

// take marks the grant used; false if it was already.
func (g *Grant) take(method string) bool {
	if g == nil || g.method != method {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.used {
		return false
	}
	g.used = true
	return true
}

type grantKey struct{}

// Acquire waits for budget for c in priority order and returns the grant.
func (g *Governor) Acquire(ctx context.Context, c Call) (*Grant, error) {
	c.Team = cmp.Or(c.Team, AppScope)
	l := g.Limit(c.Method)
	start := time.Now()
	gr := &Grant{team: c.Team, method: c.Method, channel: c.Channel}
	if c.Slot != nil && g.Limit(c.Slot.Cover).Off {
		c.Slot = nil // no budget to cover: every reply may stream
	}
	if l.Off && c.Slot == nil {
		// No budget, but a 429's pause still holds.
		waited, ok := g.waitPause(ctx, c)
		if !ok {
			traceWait(ctx, c, start, outcomeCanceled)
			return nil, ctx.Err()
		}
		if waited {
			traceWait(ctx, c, start, outcomeGranted)
		}
		return gr, nil
	}
	w := &waiter{c: c, turn: make(chan struct{}, 1), done: make(chan error, 1)}
	g.mu.Lock()
	ln := g.laneLocked(laneKey(c, l))
	if c.Prio == Lossy {
		if c.Merge != "" {
			for _, old := range ln.waiters {
				if old != ln.holder && old.c.Merge == c.Merge {
					ln.remove(old)
					old.done <- ErrMerged
					w.seq = old.seq // the newer call keeps the older one's place
					g.m.SlackDropped.WithLabelValues(c.Method, "merged").Inc()
					break
				}
			}
		}
		busy := ln.holder != nil || len(ln.waiters) > 0 || time.Now().Before(ln.next[Lossy])
		if (c.Wait == 0 && busy) || ln.lossy() >= maxLossyWaiters {
			wait := time.Until(ln.next[Lossy])
			g.mu.Unlock()
			g.m.SlackDropped.WithLabelValues(c.Method, "dropped").Inc()
			traceWait(ctx, c, start, outcomeDropped)
			return nil, BudgetError{Wait: max(wait, 0)}
		}
	}
	if w.seq == 0 {
		g.seq++
		w.seq = g.seq
	}
	ln.insert(w)
	g.kickLocked(ln)
	// A call that is not asking for budget at once waits (traced).
	waited := ln.holder != w
	g.mu.Unlock()

	var deadline <-chan time.Time
	if c.Prio == Lossy && c.Wait > 0 {
		t := time.NewTimer(c.Wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		select {
		case err := <-w.done:
			traceWait(ctx, c, start, outcomeMerged)
			return nil, err
		case <-deadline:
			g.leave(ln, w)
			g.m.SlackDropped.WithLabelValues(c.Method, "dropped").Inc()
			traceWait(ctx, c, start, outcomeDropped)
			return nil, ErrDropped
		case <-ctx.Done():
			g.leave(ln, w)
			if waited {
				traceWait(ctx, c, start, outcomeCanceled)
			}
			return nil, ctx.Err()
		case <-w.turn:
		}
		asked := time.Now()
		res, err := g.spend(ctx, c, l)
		now := time.Now()
		g.mu.Lock()
		ln.holder = nil
		switch {
		case err != nil && ctx.Err() != nil:
			ln.remove(w)
			g.kickLocked(ln)
			g.mu.Unlock()
			if waited {
				traceWait(ctx, c, start, outcomeCanceled)
			}
			return nil, ctx.Err()
		case res.NoSlot:
			ln.remove(w)
			g.kickLocked(ln)
			g.mu.Unlock()
			if waited {
				traceWait(ctx, c, start, outcomeNoSlot)
			}
			return nil, ErrNoSlot
		case res.OK:
			ln.remove(w)
			g.kickLocked(ln)
			g.gcLocked(ln)
			// The call's lateness counts from asking for the token: Redis
			// may have charged it at any moment of the round trip.
			g.stateLocked(c.Team+" "+c.Method).lag.opened(gr, asked)
			gr.followed = true
			g.mu.Unlock()
			g.m.SlackWait.WithLabelValues(c.Method, c.Prio.String()).Observe(now.Sub(start).Seconds())
			if waited {
				traceWait(ctx, c, start, outcomeGranted)
			}
			return gr, nil
		}
		waited = true
		ln.next[c.Prio] = now.Add(max(res.Wait, time.Millisecond))
		if c.Prio == Must && ln.next[Lossy].Before(ln.next[Must]) {
			ln.next[Lossy] = ln.next[Must]
		}
		if c.Prio == Lossy && c.Wait == 0 {
			ln.remove(w)
			g.kickLocked(ln)
			g.mu.Unlock()
			g.m.SlackDropped.WithLabelValues(c.Method, "dropped").Inc()
			traceWait(ctx, c, start, outcomeDropped)
			return nil, BudgetError{Wait: res.Wait}
		}
		g.kickLocked(ln)
		g.mu.Unlock()
	}
}

// waitPause waits out a known 429 pause of c's method: waited says it
// had to, ok false that ctx ended first.
func (g *Governor) waitPause(ctx context.Context, c Call) (waited, ok bool) {
	g.mu.Lock()
	st := g.known[c.Team+" "+c.Method]
	var until time.Time
	if st != nil {
		until = st.paused
	}
	g.mu.Unlock()
	d := time.Until(until)
	if d <= 0 {
		return false, true
	}
	return true, pause.Sleep(ctx, d)
}

// request is c as the shared budget sees it.
func (g *Governor) request(c Call, l RateLimit) session.SpendRequest {
	r := session.SpendRequest{Team: c.Team, Method: c.Method}
	if !l.Off {
		r.PerMinute, r.Burst = l.PerMinute, l.safeBurst()
		if l.ChannelPerMinute > 0 && c.Channel != "" {
			r.Channel, r.ChannelPerMinute, r.ChannelBurst = c.Channel, l.ChannelPerMinute, l.safeChannelBurst()
		}
	}
	if c.Prio == Lossy {
		r.Reserve = 1
	}
	return r
}

// spend asks the shared budget once (one Redis round trip).
func (g *Governor) spend(ctx context.Context, c Call, l RateLimit) (session.SpendResult, error) {
	r := g.request(c, l)
	g.mu.Lock()
	r.Lag = g.stateLocked(c.Team + " " + c.Method).lag.lag(time.Now())
	g.mu.Unlock()
	if c.Prio == Lossy {
		// Leave a token for each live reply's final call.
		g.mu.Lock()
		for _, p := range LivePools {
			if p.Cover == c.Method {
				r.Reserve = max(r.Reserve, g.slots[c.Team+" "+p.Pool])
			}
		}
		g.mu.Unlock()
	}
	if s := c.Slot; s != nil {
		cl := g.Limit(s.Cover)
		if !cl.Off {
			cb := cl.safeBurst()
			g.mu.Lock()
			if st := g.known[c.Team+" "+s.Cover]; st != nil && st.factor > 0 {
				cb = int(float64(cb) * st.factor)
			}
			g.mu.Unlock()
			r.Slot = &session.SlotRequest{Pool: s.Pool, ID: s.ID, Cap: max(1, cb-1), TTL: g.slotTTL,
				CoverMethod: s.Cover, CoverPerMinute: cl.PerMinute, CoverBurst: cl.safeBurst()}
		}
	}
	g.m.SlackBudgetLag.WithLabelValues(c.Method).Set(r.Lag.Seconds())
	if g.store == nil {
		return g.spendLocal(c, l, r.Reserve, r.Lag), nil
	}
	res, err := g.store.Spend(ctx, r)
	if err != nil {
		if ctx.Err() != nil {
			return res, err
		}
		// Redis away: keep Slack's limits per process rather than stop
		// talking to Slack (a 429 still pauses the method).
		g.warn("bot: shared Slack budget unavailable; budgeting in this process", err)
		return g.spendLocal(c, l, r.Reserve, r.Lag), nil
	}
	g.mu.Lock()
	st := g.stateLocked(c.Team + " " + c.Method)
	st.factor = res.Factor
	if r.Slot != nil {
		g.slots[c.Team+" "+r.Slot.Pool] = res.Slots
	}
	g.mu.Unlock()
	if res.OK {
		g.m.SlackBudgetInUse.WithLabelValues(c.Method).Set(res.InUse)
		g.m.SlackBudgetFactor.WithLabelValues(c.Method).Set(res.Factor)
	}
	return res, nil
}

func (g *Governor) warn(msg string, err error) {
	g.mu.Lock()
	due := time.Since(g.warned) > time.Minute
	if due {
		g.warned = time.Now()
	}
	g.mu.Unlock()
	if due {
		g.log.Warn(msg, "err", err)
	}
}

// throttled records a 429 for method in team: this process and, through
// Redis, every replica pause the method until retryAfter has passed, and
// the method's budget shrinks.
func (g *Governor) throttled(ctx context.Context, team, method, channel string, retryAfter time.Duration) {
	team = cmp.Or(team, AppScope)
	retryAfter = max(retryAfter, time.Second)
	l := g.Limit(method)
	until := time.Now().Add(retryAfter)
	g.mu.Lock()
	st := g.stateLocked(team + " " + method)
	if st.factor <= 0 {
		st.factor = 1
	}
	if until.After(st.paused) {
		st.paused = until
	}
	g.mu.Unlock()
	if g.store != nil {
		r := g.request(Call{Team: team, Method: method, Channel: channel}, l)
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		f, pause, err := g.store.Throttled(tctx, r, retryAfter)
		if err != nil {
			g.warn("bot: recording a Slack 429 in Redis failed; the pause holds in this process only", err)
		} else {
			g.mu.Lock()
			st.factor = f
			if p := time.Now().Add(pause); p.After(st.paused) {
				st.paused = p
			}
			g.mu.Unlock()
			g.m.SlackBudgetFactor.WithLabelValues(method).Set(f)
		}
	}
	g.log.Info("bot: Slack answered 429; pausing the method for the workspace",
		"team", team, "method", method, "retry_after", retryAfter.String())
}

// Factor is the method's AIMD factor as last seen (1 when unknown).
func (g *Governor) Factor(team, method string) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if st := g.known[team+" "+method]; st != nil && st.factor > 0 {
		return st.factor
	}
	return 1
}

// LiveSlots is the number of live replies in team's pool as last seen.
func (g *Governor) LiveSlots(team, pool string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.slots[team+" "+pool]
}

// ReleaseSlot gives a reply's live slot back.
func (g *Governor) ReleaseSlot(ctx context.Context, team string, s *Slot) {
	if s == nil {
		return
	}
	g.mu.Lock()
	if n := g.slots[team+" "+s.Pool]; n > 0 {
		g.slots[team+" "+s.Pool] = n - 1
	}
	g.mu.Unlock()
	if g.store == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if err := g.store.ReleaseSlot(rctx, team, s.Pool, s.ID); err != nil {
		g.log.Debug("bot: releasing a live slot failed (it expires by itself)", "err", err)
	}
}

// Ungoverned returns, by method, the calls that reached Slack without
// asking for budget first (only slack-go's own apps.connections.open and
// auth.test at start-up should).
func (g *Governor) Ungoverned() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.ungoverned)
}

// noteUngoverned counts a call that did not ask for budget first.
func (g *Governor) noteUngoverned(method string) {
	g.mu.Lock()
	g.ungoverned[method]++
	g.mu.Unlock()
}

// localBucket is a GCRA budget of this process alone.
type localBucket struct{ tat time.Time }

// spendLocal budgets in this process: Redis is away (or absent in tests).
// Live slots are then always free. lag is the latency margin's input, as
// in the shared budget (governor_lag.go).
func (g *Governor) spendLocal(c Call, l RateLimit, reserve int, lag time.Duration) session.SpendResult {
	if l.Off {
		return session.SpendResult{OK: true, Factor: 1, HasSlot: c.Slot != nil}
	}
	now := time.Now()
	take := func(key string, perMinute, burst int, commit bool) (time.Duration, bool) {
		b := g.local[key]
		if b == nil {
			b = &localBucket{}
			g.local[key] = b
		}
		t := time.Minute / time.Duration(perMinute)
		base := b.tat
		if base.Before(now) {
			base = now
		}
		tol := max(1, burst-reserve)
		if at := base.Add(t - time.Duration(tol)*t + lagMargin(lag, t, tol)); now.Before(at) {
			return at.Sub(now), false
		}
		if commit {
			b.tat = base.Add(t)
		}
		return 0, true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.local) > 10000 {
		clear(g.local)
	}
	ws := c.Team + " " + c.Method
	wait, ok := take(ws, l.PerMinute, l.safeBurst(), false)
	if ok && l.ChannelPerMinute > 0 && c.Channel != "" {
		wait, ok = take(ws+" "+c.Channel, l.ChannelPerMinute, l.safeChannelBurst(), true)
	}
	if !ok {
		return session.SpendResult{Wait: wait, Factor: 1}
	}
	take(ws, l.PerMinute, l.safeBurst(), true)
	return session.SpendResult{OK: true, Factor: 1, HasSlot: c.Slot != nil}
}

// lagMargin is the room the budget leaves beyond its tolerance of tol
// tokens every t for calls held up to lag (governor_lag.go): the spare
// token covers one interval of it, the rest is taken off the burst, but
// never the last token (a full budget still admits a call at once, and
// the rate is the budget's). The shared budget computes the same in Lua.
func lagMargin(lag, t time.Duration, tol int) time.Duration {
	return min(max(lag-t, 0), time.Duration(tol-1)*t)
}

// answered ends following gr's lateness: Slack answered its request at
// now (Transport). Nil-safe.
func (g *Governor) answered(gr *Grant, now time.Time) {
	if gr == nil || !gr.followed {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if st := g.known[gr.team+" "+gr.method]; st != nil {
		st.lag.answered(gr, now)
	}
}

// release ends following gr when its call is over (Client.Do) and its
// request never reached the transport. A request sent but not answered
// (its context ended in flight, the connection broke) may still reach
// Slack, so it stays followed until the meter forgets it. Nil-safe.
func (g *Governor) release(gr *Grant) {
	if gr == nil || !gr.followed || gr.sent() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if st := g.known[gr.team+" "+gr.method]; st != nil {
		st.lag.unsent(gr)
	}
}
