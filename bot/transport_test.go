package bot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/slack-go/slack"
	"go.uber.org/goleak"

	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/session"
)

// The Web API path through a Bot: the transport's outcome metrics, 429
// pauses, and calls that skip the governor (moved from governor_test.go
// when the governor moved to slackapi).

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

// leakCheck fails t if a goroutine started during the test outlives it.
func leakCheck(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, opt,
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
	})
}

func TestTransportStatusAndPause(t *testing.T) {
	leakCheck(t)
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	defer emu.Close()
	store := testStore(t)
	b, err := New(Options{BotToken: slackemu.BotToken, AppToken: slackemu.AppToken, APIURL: emu.APIURL(), Store: store, Agent: nopRunner{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	post := func(prio slackapi.Priority) error {
		return b.slack.Do(ctx, slackapi.Call{Team: slackemu.TeamID, Method: slackapi.ChatPostMessage, Channel: slackemu.ChannelGen, Prio: prio},
			func(ctx context.Context, api *slack.Client) error {
				_, _, err := api.PostMessageContext(ctx, slackemu.ChannelGen, slack.MsgOptionText("hi", false))
				return err
			})
	}
	if err := post(slackapi.Must); err != nil {
		t.Fatal(err)
	}
	emu.InjectFault("chat.postMessage", slackemu.Fault{Error: "not_in_channel"})
	if err := post(slackapi.Must); err == nil {
		t.Fatal("want not_in_channel")
	}
	emu.InjectFault("chat.postMessage", slackemu.Fault{Status: http.StatusTooManyRequests, RetryAfter: 1})
	start := time.Now()
	// Must-deliver: waits out the pause and goes through.
	if err := post(slackapi.Must); err != nil {
		t.Fatalf("must-deliver post through a 429: %v", err)
	}
	if since := time.Since(start); since < 900*time.Millisecond {
		t.Errorf("retried %v after a 429 with Retry-After 1s", since)
	}
	// Lossy: the 429 is the caller's to handle (it drops the call).
	emu.InjectFault("reactions.add", slackemu.Fault{Status: http.StatusTooManyRequests, RetryAfter: 1})
	err = b.slack.Do(ctx, slackapi.Call{Team: slackemu.TeamID, Method: slackapi.ReactionsAdd, Prio: slackapi.Lossy}, func(ctx context.Context, api *slack.Client) error {
		return api.AddReactionContext(ctx, "eyes", slack.NewRefToMessage(slackemu.ChannelGen, "1.000001"))
	})
	if !slackapi.IsRateLimited(err) {
		t.Errorf("lossy reaction on a 429: %v, want the rate limit error", err)
	}
	// A call that skipped Client.Do is governed by the transport.
	if _, err := b.api.AuthTestContext(ctx); err != nil {
		t.Fatal(err)
	}
	for status, want := range map[string]float64{"ok": 2, "not_in_channel": 1, "ratelimited": 1} {
		if got := metricValue(b.m.SlackCalls.WithLabelValues("chat.postMessage", status)); got != want {
			t.Errorf("bobbin_slack_calls_total{method=chat.postMessage,status=%s} = %v, want %v", status, got, want)
		}
	}
	if got := metricValue(b.m.RateLimited.WithLabelValues("chat.postMessage")) + metricValue(b.m.RateLimited.WithLabelValues("reactions.add")); got != 2 {
		t.Errorf("429s counted: %v, want 2", got)
	}
	if u := UngovernedCalls(b); u["auth.test"] != 1 || len(u) != 1 {
		t.Errorf("ungoverned calls %v, want auth.test once", u)
	}
}

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
