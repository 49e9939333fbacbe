package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/internal/testlog"
)

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = testlog.Buffer

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startRun runs the whole program with env in the background. stop
// cancels it, waits for it and returns what run returned, showing the logs
// when the test failed; defer it.
func startRun(t *testing.T, env map[string]string) (logs *syncBuffer, stop func() error) {
	t.Helper()
	logs = &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, envFunc(env), logs, io.Discard) }()
	return logs, func() error {
		cancel()
		err := <-done
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
		return err
	}
}

// TestRunServes runs the whole program against the Slack emulator and the
// fake model: health, readiness, metrics, a reply, redacted logs, clean
// shutdown.
func TestRunServes(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		// Idle keep-alive connections of the test's own HTTP client are
		// not the program's.
		goleak.VerifyNone(t, opt,
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
	})
	emu := slackemu.New(slackemu.Options{})
	defer emu.Close()
	llm := llmemu.New(llmemu.Options{APIKey: "sk-canary-model-key-123456"})
	defer llm.Close()
	addr := freeAddr(t)
	env := map[string]string{
		"SLACK_BOT_TOKEN":      slackemu.BotToken,
		"SLACK_APP_TOKEN":      slackemu.AppToken,
		"SLACK_API_URL":        emu.APIURL(),
		"REDIS_URL":            os.Getenv("REDIS_URL"),
		"LLM_PROVIDER":         "openai",
		"LLM_BASE_URL":         llm.URL() + "/v1",
		"LLM_API_KEY":          "sk-canary-model-key-123456",
		"LLM_MODEL":            "gpt-4o",
		"HTTP_ADDR":            addr,
		"LOG_LEVEL":            "debug",
		"STREAM_EDIT_INTERVAL": "100ms",
		"SHUTDOWN_GRACE":       "4s",
		"PUBLIC_URL":           "https://bobbin.example.com/",
	}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, envFunc(env), &logs, io.Discard) }()
	defer func() {
		cancel()
		<-done
	}()

	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	if err := emu.WaitFor(wctx, func() bool { code, _ := get("/readyz"); return code == 200 }); err != nil {
		t.Fatalf("never ready: %v\nlogs:\n%s", err, logs.String())
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	// The OAuth callback is served (an unknown state is refused with a page,
	// not a 404) and so is the Client ID Metadata Document.
	if code, body := get("/oauth/callback?state=unknown-state-0123456789&code=x"); code != 400 || !strings.Contains(body, "expired or was already used") {
		t.Errorf("/oauth/callback = %d %s", code, body)
	}
	if code, body := get("/oauth/client-metadata.json"); code != 200 ||
		!strings.Contains(body, `"client_id":"https://bobbin.example.com/oauth/client-metadata.json"`) ||
		!strings.Contains(body, `"https://bobbin.example.com/oauth/callback"`) {
		t.Errorf("/oauth/client-metadata.json = %d %s", code, body)
	}
	p := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "hello from run", "")
	if err := emu.WaitFor(wctx, func() bool {
		r := emu.BotReplies(slackemu.ChannelGen, p.TS)
		return len(r) == 1 && strings.Contains(r[0].Text, "hello from run") && !strings.Contains(string(r[0].Blocks), "bobbin_stop")
	}); err != nil {
		t.Fatalf("no reply: %v", err)
	}
	var metrics string
	_ = emu.WaitFor(wctx, func() bool {
		_, metrics = get("/metrics")
		return strings.Contains(metrics, "bobbin_turns_total")
	})
	for _, want := range []string{`bobbin_turns_total{outcome="end_turn"} 1`, "bobbin_slack_calls_total", "bobbin_first_visible_text_seconds", "bobbin_socket_connections 1", "go_goroutines"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	done <- nil // for the deferred receive
	out := logs.String()
	if testing.Verbose() {
		t.Log(out)
	}
	for _, secret := range []string{slackemu.BotToken, slackemu.AppToken, "sk-canary-model-key-123456", "ticket="} {
		if strings.Contains(out, secret) {
			t.Errorf("logs contain %q", secret)
		}
	}
	if !strings.Contains(out, `"msg":"bot: turn done"`) {
		t.Errorf("logs lack the turn line:\n%s", out)
	}
}
