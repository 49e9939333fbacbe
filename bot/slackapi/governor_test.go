package slackapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/bobbinbot/bobbin/session"
)

// Unit tests of the governor against the real store (REDIS_URL, else the
// embedded Redis).

var _ Budget = (*session.Store)(nil)

func testStore(t testing.TB) *session.Store {
	t.Helper()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := session.Open(ctx, session.Options{URL: os.Getenv("REDIS_URL"), Prefix: "gov" + hex.EncodeToString(rnd[:])})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func testTeam() string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return "T" + strings.ToUpper(hex.EncodeToString(rnd[:]))
}

// leakCheck fails t if a goroutine started during the test outlives it:
// nothing the governor starts may stay behind, queued or not.
func leakCheck(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, opt,
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
	})
}

func testGovernor(t *testing.T, store Budget, limits map[string]RateLimit) *Governor {
	return NewGovernor(store, limits, NewMetrics(), slog.New(slog.DiscardHandler), time.Minute)
}

func TestGovernorMustBeforeLossy(t *testing.T) {
	leakCheck(t)
	// One token every 150 ms, no burst: every waiting call is served in
	// turn.
	g := testGovernor(t, testStore(t), map[string]RateLimit{"test.Method": {PerMinute: 400, Burst: 1}})
	team := testTeam()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := g.Acquire(ctx, Call{Team: team, Method: "test.Method"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	start := func(name string, c Call) {
		wg.Go(func() {
			if _, err := g.Acquire(ctx, c); err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
		})
	}
	// Lossy calls queue first, must-deliver ones arrive later and still
	// go first.
	for i, n := range []string{"lossy1", "lossy2", "lossy3"} {
		start(n, Call{Team: team, Method: "test.Method", Prio: Lossy, Wait: -1})
		waitQueued(t, g, team+" test.Method", i+1) // in arrival order
	}
	for i, n := range []string{"must1", "must2", "must3"} {
		start(n, Call{Team: team, Method: "test.Method"})
		waitQueued(t, g, team+" test.Method", 4+i)
	}
	wg.Wait()
	want := "must1 must2 must3 lossy1 lossy2 lossy3"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("grant order %q, want %q", got, want)
	}
}

// waitQueued waits until n calls wait in the lane (or hold its turn).
func waitQueued(t *testing.T, g *Governor, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		g.mu.Lock()
		ln := g.lanes[key]
		got := 0
		if ln != nil {
			got = len(ln.waiters)
		}
		g.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("lane %s: fewer than %d waiters", key, n)
}

func TestGovernorLossyDroppedMergedBounded(t *testing.T) {
	leakCheck(t)
	// Slack's burst 3: the governor spends 2 of it (one kept spare).
	g := testGovernor(t, testStore(t), map[string]RateLimit{"test.Method": {PerMinute: 1, Burst: 3}})
	team := testTeam()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := Call{Team: team, Method: "test.Method"}
	if _, err := g.Acquire(ctx, call); err != nil {
		t.Fatal(err)
	}
	// A lossy call leaves the last token for must-deliver calls: tried
	// once, it is dropped with the time budget is due.
	lossy := call
	lossy.Prio = Lossy
	_, err := g.Acquire(ctx, lossy)
	var be BudgetError
	if !errors.As(err, &be) || be.Wait <= 0 {
		t.Fatalf("lossy try with one token left: %v, want a budgetError with a wait", err)
	}
	if _, err := g.Acquire(ctx, call); err != nil {
		t.Fatalf("must-deliver call takes the reserved token: %v", err)
	}
	// Now nothing is left for a minute. A must-deliver call waits (until
	// its context ends); lossy calls behind it merge or are dropped.
	mctx, mcancel := context.WithCancel(ctx)
	mustDone := make(chan error, 1)
	go func() { _, err := g.Acquire(mctx, call); mustDone <- err }()
	waitQueued(t, g, team+" test.Method", 1)

	merged := make(chan error, 1)
	first := lossy
	first.Wait, first.Merge = -1, "C1:1.000"
	go func() { _, err := g.Acquire(ctx, first); merged <- err }()
	waitQueued(t, g, team+" test.Method", 2)
	second := first
	second.Wait = 50 * time.Millisecond
	if _, err := g.Acquire(ctx, second); !errors.Is(err, ErrDropped) {
		t.Errorf("lossy call past its wait: %v, want dropped", err)
	}
	if err := <-merged; !errors.Is(err, ErrMerged) {
		t.Errorf("older lossy call for the same message: %v, want merged", err)
	}
	// No unbounded queue: past maxLossyWaiters a lossy call is refused at
	// once, whatever its wait.
	var wg sync.WaitGroup
	lctx, lcancel := context.WithCancel(ctx)
	for range maxLossyWaiters {
		wg.Go(func() {
			c := lossy
			c.Wait = -1
			_, _ = g.Acquire(lctx, c)
		})
	}
	waitQueued(t, g, team+" test.Method", 1+maxLossyWaiters)
	c := lossy
	c.Wait = time.Hour
	if _, err := g.Acquire(ctx, c); !errors.Is(err, ErrDropped) {
		t.Errorf("lossy call with %d lossy calls waiting: %v, want dropped at once", maxLossyWaiters, err)
	}
	lcancel()
	wg.Wait()
	mcancel()
	if err := <-mustDone; !errors.Is(err, context.Canceled) {
		t.Errorf("must-deliver call: %v, want it to wait until its context ended", err)
	}
	if n := metricValue(g.m.SlackDropped.WithLabelValues("test.Method", "merged")); n != 1 {
		t.Errorf("merged counter = %v, want 1", n)
	}
	g.mu.Lock()
	left := len(g.lanes[team+" test.Method"].waiters)
	g.mu.Unlock()
	if left != 0 {
		t.Errorf("%d calls still queued after every caller left", left)
	}
}

// TestGovernorPauseOn429: a 429 that one replica sees pauses the method for
// every replica until Retry-After has passed, and shrinks its budget.
func TestGovernorPauseOn429(t *testing.T) {
	leakCheck(t)
	store := testStore(t)
	limits := map[string]RateLimit{"test.Method": {PerMinute: 6000, Burst: 5}}
	a, b := testGovernor(t, store, limits), testGovernor(t, store, limits)
	team := testTeam()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := Call{Team: team, Method: "test.Method"}
	if _, err := a.Acquire(ctx, call); err != nil {
		t.Fatal(err)
	}
	seen := time.Now()
	a.throttled(ctx, team, "test.Method", "", time.Second)
	for name, g := range map[string]*Governor{"the replica that saw it": a, "another replica": b} {
		if _, err := g.Acquire(ctx, call); err != nil {
			t.Fatal(err)
		}
		if since := time.Since(seen); since < 900*time.Millisecond {
			t.Errorf("%s called again %v after a 429 with Retry-After 1s", name, since)
		}
		if f := g.Factor(team, "test.Method"); f >= 1 {
			t.Errorf("%s: budget factor %v after a 429, want it shrunk", name, f)
		}
	}
	// Lossy calls do not wait out a pause: dropped.
	a.throttled(ctx, team, "test.Method", "", time.Second)
	if _, err := b.Acquire(ctx, Call{Team: team, Method: "test.Method", Prio: Lossy}); !errors.Is(err, ErrDropped) {
		t.Errorf("lossy call during a pause: %v, want dropped", err)
	}
}

// TestTransportStatusAndPause: bobbin_slack_calls_total says ok or Slack's
// error code; a 429 through the real client pauses the method; calls that
// skip Bot.call are still governed and counted.
// metricValue reads a counter or gauge.
func metricValue(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}
