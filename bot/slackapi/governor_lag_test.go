package slackapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slack-go/slack"
)

// The latency-aware margin's unit tests (issue 23): the meter on a fake
// clock, the margin's bounds, the local budget with a lag, and the
// wiring that follows each grant from Acquire to Slack's answer.

func TestLagMeter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// steady: 200 calls answered 150 ms after asking, one a second.
	steady := func(m *lagMeter) time.Time {
		now := t0
		for i := range 200 {
			now = at(time.Duration(i) * time.Second)
			m.observe(ms(150), now)
		}
		return now
	}
	t.Run("steady lateness is no lag", func(t *testing.T) {
		var m lagMeter
		now := steady(&m)
		if got := m.lag(now); got != 0 {
			t.Errorf("calls all 150 ms late: lag %v, want 0", got)
		}
	})
	t.Run("a late call raises the lag, which halves every half-life", func(t *testing.T) {
		var m lagMeter
		now := steady(&m)
		// 600 ms later than usual; the floor moves a 32nd of that up, to
		// 168.75 ms.
		m.observe(ms(750), now)
		for _, tc := range []struct {
			after time.Duration
			want  time.Duration
		}{
			{0, 581250 * time.Microsecond},
			{lagHalfLife, 290625 * time.Microsecond},
			{2 * lagHalfLife, 145312 * time.Microsecond},
			{20 * lagHalfLife, 0},
		} {
			if got := m.lag(now.Add(tc.after)); !near(got, tc.want) {
				t.Errorf("%v after a call 600 ms later than usual: lag %v, want %v", tc.after, got, tc.want)
			}
		}
	})
	t.Run("a call still out counts before its answer", func(t *testing.T) {
		var m lagMeter
		now := steady(&m)
		g := &Grant{}
		m.opened(g, now)
		if got := m.lag(now.Add(ms(100))); got != 0 {
			t.Errorf("a call out for 100 ms (usual 150): lag %v, want 0", got)
		}
		if got := m.lag(now.Add(ms(550))); got != ms(400) {
			t.Errorf("a call out for 550 ms (usual 150): lag %v, want 400ms", got)
		}
		m.closed(g, true, now.Add(ms(600)))
		// its lateness is the peak; the floor moved a 32nd of 450 ms up.
		if got, want := m.lag(now.Add(ms(600))), 435938*time.Microsecond; !near(got, want) {
			t.Errorf("once answered after 600 ms: lag %v, want %v", got, want)
		}
		if len(m.open) != 0 {
			t.Errorf("%d grants still followed after the answer", len(m.open))
		}
	})
	t.Run("a call never answered stops counting", func(t *testing.T) {
		var m lagMeter
		now := steady(&m)
		g := &Grant{}
		m.opened(g, now)
		if got := m.lag(now.Add(openGrantTTL)); got != maxLag {
			t.Errorf("a call out for %v: lag %v, want the cap %v", openGrantTTL, got, maxLag)
		}
		if got := m.lag(now.Add(openGrantTTL + time.Second)); got != 0 {
			t.Errorf("a call out past %v: lag %v, want 0 (forgotten)", openGrantTTL, got)
		}
		m.closed(g, true, now.Add(time.Minute)) // a late answer of a forgotten grant: no sample
		if got := m.lag(now.Add(time.Minute)); got != 0 {
			t.Errorf("after the forgotten grant's answer: lag %v, want 0", got)
		}
	})
	t.Run("a call over without an answer is no sample", func(t *testing.T) {
		var m lagMeter
		now := steady(&m)
		g := &Grant{}
		m.opened(g, now)
		m.closed(g, false, now.Add(5*time.Second))
		if got := m.lag(now.Add(5 * time.Second)); got != 0 {
			t.Errorf("a grant given back unanswered: lag %v, want 0", got)
		}
	})
	t.Run("capped", func(t *testing.T) {
		var m lagMeter
		now := steady(&m)
		m.observe(time.Minute, now)
		if got := m.lag(now); got != maxLag {
			t.Errorf("a call a minute late: lag %v, want the cap %v", got, maxLag)
		}
	})
	t.Run("the floor follows a lasting change", func(t *testing.T) {
		var m lagMeter
		now := steady(&m)
		for range 400 { // the round trip grows to 400 ms and stays
			now = now.Add(time.Second)
			m.observe(ms(400), now)
		}
		now = now.Add(10 * lagHalfLife)
		if got := m.lag(now); got > ms(5) {
			t.Errorf("calls steadily 400 ms late: lag %v, want about 0", got)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		var m lagMeter
		for range maxOpenGrants + 10 {
			m.opened(&Grant{}, t0)
		}
		if len(m.open) != maxOpenGrants {
			t.Errorf("%d grants followed, want at most %d", len(m.open), maxOpenGrants)
		}
	})
}

// near: within a millisecond (float rounding in the decay).
func near(got, want time.Duration) bool { return (got - want).Abs() < time.Millisecond }

func TestLagMargin(t *testing.T) {
	const T = time.Second
	for _, tc := range []struct {
		lag  time.Duration
		tol  int
		want time.Duration
	}{
		{0, 4, 0},
		{T, 4, 0}, // the spare token covers one interval
		{2500 * time.Millisecond, 4, 1500 * time.Millisecond},
		{time.Hour, 4, 3 * T}, // all but one token
		{time.Hour, 1, 0},     // a burst of 1 keeps its token
	} {
		if got := lagMargin(tc.lag, T, tc.tol); got != tc.want {
			t.Errorf("lagMargin(%v, %v, %d) = %v, want %v", tc.lag, T, tc.tol, got, tc.want)
		}
	}
}

// TestSpendLocalLag: with Redis away the process's own budget leaves the
// same margin.
func TestSpendLocalLag(t *testing.T) {
	for _, tc := range []struct {
		lag  time.Duration
		want int
	}{{0, 4}, {2500 * time.Millisecond, 2}, {time.Hour, 1}} {
		// 60/min (T = 1 s), burst 5: the spare token leaves 4.
		g := testGovernor(t, nil, map[string]RateLimit{"test.Method": {PerMinute: 60, Burst: 5}})
		l := g.Limit("test.Method")
		got := 0
		for range 6 {
			if g.spendLocal(Call{Team: "T1", Method: "test.Method"}, l, 0, tc.lag).OK {
				got++
			}
		}
		if got != tc.want {
			t.Errorf("lag %v: %d calls admitted at once, want %d", tc.lag, got, tc.want)
		}
	}
}

// TestGrantFollowedToSlacksAnswer: every grant Acquire gives is followed
// until Slack answers its request (Transport) or the call ends without
// one (Client.Do); none stays behind.
func TestGrantFollowedToSlacksAnswer(t *testing.T) {
	leakCheck(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true,"url":"https://x","team":"T","user":"U","team_id":"T1","user_id":"U1"}`))
	}))
	defer srv.Close()
	g := testGovernor(t, testStore(t), map[string]RateLimit{"auth.test": {PerMinute: 600, Burst: 10}})
	team := testTeam()
	hc := &http.Client{Transport: NewTransport(http.DefaultTransport, g, NewMetrics())}
	api := slack.New("xoxb-test", slack.OptionHTTPClient(hc), slack.OptionAPIURL(srv.URL+"/api/"))
	c := New(g, Static{API: api}, slog.New(slog.DiscardHandler))
	open := func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		if st := g.known[team+" auth.test"]; st != nil {
			return len(st.lag.open)
		}
		return 0
	}
	ctx := context.Background()
	// Sent and answered.
	err := c.Do(ctx, Call{Team: team, Method: "auth.test"}, func(ctx context.Context, api *slack.Client) error {
		_, err := api.AuthTestContext(ctx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := open(); n != 0 {
		t.Errorf("after an answered call: %d grants followed, want 0", n)
	}
	g.mu.Lock()
	seen := g.known[team+" auth.test"].lag.seen
	g.mu.Unlock()
	if !seen {
		t.Error("the answered call's lateness was not measured")
	}
	// Never sent.
	errNo := errors.New("changed my mind")
	err = c.Do(ctx, Call{Team: team, Method: "auth.test"}, func(ctx context.Context, api *slack.Client) error {
		if n := open(); n != 1 {
			t.Errorf("during the call: %d grants followed, want 1", n)
		}
		return errNo
	})
	if !errors.Is(err, errNo) {
		t.Fatal(err)
	}
	if n := open(); n != 0 {
		t.Errorf("after a call never sent: %d grants followed, want 0", n)
	}
}
