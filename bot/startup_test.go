package bot_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/internal/testlog"
	"github.com/bobbinbot/bobbin/session"
)

// idleRunner is the agent of bots whose tests send no message.
type idleRunner struct{}

func (idleRunner) Run(context.Context, agent.Turn) (agent.Result, error) {
	return agent.Result{}, errors.New("no turns in this test")
}

// socketBot runs a bot against emu and returns it with its JSON log.
func socketBot(t *testing.T, emu *slackemu.Server, opts bot.Options) (*bot.Bot, *testlog.Buffer) {
	t.Helper()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	store, err := session.Open(context.Background(), session.Options{URL: os.Getenv("REDIS_URL"), Prefix: "st" + hex.EncodeToString(rnd[:])})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	logs := &testlog.Buffer{}
	opts.BotToken, opts.AppToken, opts.APIURL = slackemu.BotToken, slackemu.AppToken, emu.APIURL()
	opts.Store, opts.Agent = store, idleRunner{}
	opts.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.ShutdownGrace = 2 * time.Second
	b, err := bot.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitFor(t, emu, "ready", func() bool { return b.Ready(context.Background()) == nil })
	return b, logs
}

func waitFor(t *testing.T, emu *slackemu.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := emu.WaitFor(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// errorLines counts the log's ERROR records containing s.
func errorLines(log, s string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"level":"ERROR"`) && strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// TestAppTokenRevokedWhileRunning: the replica turns unready with the
// reason in Ready (so /readyz shows it), logs it at ERROR once however
// often it retries, and keeps retrying.
func TestAppTokenRevokedWhileRunning(t *testing.T) {
	emu := slackemu.New(slackemu.Options{})
	defer emu.Close()
	b, logs := socketBot(t, emu, bot.Options{})
	opens := len(emu.Calls("apps.connections.open"))

	emu.RevokeToken(slackemu.AppToken)
	emu.Disconnect("refresh_requested")
	const want = "SLACK_APP_TOKEN was rejected by Slack (token_revoked)"
	waitFor(t, emu, "unready with the reason", func() bool {
		err := b.Ready(context.Background())
		return err != nil && strings.Contains(err.Error(), want)
	})
	// Two more refused attempts (1 s, then 2 s of backoff).
	waitFor(t, emu, "retries", func() bool { return len(emu.Calls("apps.connections.open")) >= opens+3 })
	if err := b.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Ready = %v after retries, want %q", err, want)
	}
	if n := errorLines(logs.String(), want); n != 1 {
		t.Errorf("%d ERROR lines about the token, want 1:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), slackemu.AppToken) {
		t.Error("log contains the app token")
	}
}

// TestSocketModeTurnedOff: Slack closing the socket with link_disabled
// makes the replica unready naming Socket Mode and SLACK_APP_TOKEN, logged
// at ERROR once while reconnecting fails; once Slack lets it connect again
// the replica is ready and the reason is gone.
func TestSocketModeTurnedOff(t *testing.T) {
	emu := slackemu.New(slackemu.Options{})
	defer emu.Close()
	b, logs := socketBot(t, emu, bot.Options{})

	emu.InjectFault("apps.connections.open", slackemu.Fault{Times: -1, Status: 503})
	emu.Disconnect("link_disabled")
	waitFor(t, emu, "unready naming Socket Mode", func() bool {
		err := b.Ready(context.Background())
		return err != nil && strings.Contains(err.Error(), "Socket Mode is turned off") && strings.Contains(err.Error(), "SLACK_APP_TOKEN")
	})
	waitFor(t, emu, "refused reconnects", func() bool { return len(emu.Calls("apps.connections.open")) >= 4 })
	if err := b.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "link_disabled") {
		t.Errorf("Ready = %v; a failed reconnect must not hide the cause", err)
	}
	if n := errorLines(logs.String(), "link_disabled"); n != 1 {
		t.Errorf("%d ERROR lines about link_disabled, want 1:\n%s", n, logs.String())
	}
	emu.ClearFaults()
	waitFor(t, emu, "ready again", func() bool { return b.Ready(context.Background()) == nil })
}

// TestAuthenticateRetriesSlackErrors: while Slack answers auth.test with
// errors that mean "later", Authenticate waits (the reason shows in Ready)
// and succeeds once Slack answers.
func TestAuthenticateRetriesSlackErrors(t *testing.T) {
	emu := slackemu.New(slackemu.Options{})
	defer emu.Close()
	emu.InjectFault("auth.test", slackemu.Fault{Times: 2, Status: 503})
	store, err := session.Open(context.Background(), session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	b, err := bot.New(bot.Options{BotToken: slackemu.BotToken, AppToken: slackemu.AppToken, APIURL: emu.APIURL(), Store: store, Agent: idleRunner{}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Authenticate(context.Background()) }()
	waitFor(t, emu, "the reason in Ready", func() bool {
		err := b.Ready(context.Background())
		return err != nil && strings.Contains(err.Error(), "Slack did not answer auth.test")
	})
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Authenticate = %v after Slack recovered", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Authenticate did not return after Slack recovered")
	}
	if n := len(emu.Calls("auth.test")); n != 3 {
		t.Errorf("auth.test called %d times, want 3 (two refused, one answered)", n)
	}
}
