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
	// steady: 200 calls answered 150 ms after asking, one a second.
	steady := func(m *lagMeter) time.Time {
		now := t0
		for i := range 200 {
			now = t0.Add(time.Duration(i) * time.Second)
			g := &Grant{}
			m.opened(g, now.Add(-ms(150)))
			m.answered(g, now)
		}
		return now
	}
	t.Run("steady lateness", func(t *testing.T) {
		var m lagMeter
		now := steady(&m)
		if got := m.lag(now); got != ms(150) {
			t.Errorf("calls all 150 ms late: lag %v, want 150ms", got)
		}
		if len(m.open) != 0 {
			t.Errorf("%d grants still followed after their answers", len(m.open))
		}
	})
	t.Run("a late call raises the lag, which halves every half-life", func(t *testing.T) {
		var m lagMeter
		now := steady(&m)
		m.observe(ms(800), now)
		for _, tc := range []struct {
			after time.Duration
			want  time.Duration
		}{
			{0, ms(800)},
			{lagHalfLife, ms(400)},
			{2 * lagHalfLife, ms(200)},
			{20 * lagHalfLife, 0},
		} {
			if got := m.lag(now.Add(tc.after)); !near(got, tc.want) {
				t.Errorf("%v after a call 800 ms late: lag %v, want %v", tc.after, got, tc.want)
			}
		}
		// A lesser lateness meanwhile does not lower it.
		m.observe(ms(300), now.Add(lagHalfLife))
		if got := m.lag(now.Add(lagHalfLife)); !near(got, ms(400)) {
			t.Errorf("after a call 300 ms late: lag %v, want 400ms", got)
		}
	})
	t.Run("a call still out counts before its answer", func(t *testing.T) {
		var m lagMeter
		now := steady(&m)
		g := &Grant{}
		m.opened(g, now)
		if got := m.lag(now.Add(ms(100))); !near(got, ms(150)) {
			t.Errorf("a call out for 100 ms (peak 150): lag %v, want 150ms", got)
		}
		if got := m.lag(now.Add(ms(550))); got != ms(550) {
			t.Errorf("a call out for 550 ms: lag %v, want 550ms", got)
		}
		m.answered(g, now.Add(ms(600)))
		if got := m.lag(now.Add(ms(600))); got != ms(600) {
			t.Errorf("once answered after 600 ms: lag %v, want 600ms (its lateness as the peak)", got)
		}
	})
	t.Run("a request never answered counts until forgotten", func(t *testing.T) {
		var m lagMeter
		g := &Grant{}
		m.opened(g, t0)
		if got := m.lag(t0.Add(openGrantTTL)); got != maxLag {
			t.Errorf("a call out for %v: lag %v, want the cap %v", openGrantTTL, got, maxLag)
		}
		if got := m.lag(t0.Add(openGrantTTL + time.Second)); got != 0 {
			t.Errorf("a call out past %v: lag %v, want 0 (forgotten)", openGrantTTL, got)
		}
		m.answered(g, t0.Add(time.Minute)) // a forgotten grant's answer: no sample
		if got := m.lag(t0.Add(time.Minute)); got != 0 {
			t.Errorf("after the forgotten grant's answer: lag %v, want 0", got)
		}
	})
	t.Run("a request never sent is no sample", func(t *testing.T) {
		var m lagMeter
		g := &Grant{}
		m.opened(g, t0)
		m.unsent(g)
		if got := m.lag(t0.Add(5 * time.Second)); got != 0 {
			t.Errorf("a grant given back unsent: lag %v, want 0", got)
		}
	})
	t.Run("capped", func(t *testing.T) {
		var m lagMeter
		m.observe(time.Minute, t0)
		if got := m.lag(t0); got != maxLag {
			t.Errorf("a call a minute late: lag %v, want the cap %v", got, maxLag)
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
// until Slack answers its request (Transport); a grant whose request
// never left stops counting when the call ends (Client.Do), one sent but
// unanswered keeps counting (it may still reach Slack).
func TestGrantFollowedToSlacksAnswer(t *testing.T) {
	leakCheck(t)
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hold") != "" || r.FormValue("hold") != "" {
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true,"url":"https://x","team":"T","user":"U","team_id":"T1","user_id":"U1"}`))
	}))
	defer srv.Close()
	defer close(hold)
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
	// Sent, and its context ended before the answer.
	cctx, cancel := context.WithCancel(ctx)
	err = c.Do(cctx, Call{Team: team, Method: "auth.test"}, func(ctx context.Context, api *slack.Client) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/auth.test?hold=1", nil)
		if err != nil {
			return err
		}
		time.AfterFunc(50*time.Millisecond, cancel)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	if err == nil {
		t.Fatal("the held call was answered")
	}
	if n := open(); n != 1 {
		t.Errorf("after a call sent and not answered: %d grants followed, want 1 (it may still reach Slack)", n)
	}
}
