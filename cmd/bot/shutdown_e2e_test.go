package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestShutdownWithApprovalPending: stopping the bot while a turn waits on
// a person's approval (of the built-in demo server's add_note) does not
// wait out SHUTDOWN_GRACE, and the log says what the turn was waiting for.
func TestShutdownWithApprovalPending(t *testing.T) {
	emu := slackemu.New(slackemu.Options{})
	defer emu.Close()
	llm := llmemu.New(llmemu.Options{APIKey: "sk-test"})
	defer llm.Close()
	llm.Enqueue(llmemu.Reply{Text: "Saving that.", ToolCalls: []llmemu.ToolCall{{Name: "demo__add_note", Arguments: `{"text":"hi"}`}}})
	cfg := filepath.Join(t.TempDir(), "mcp.yaml")
	if err := os.WriteFile(cfg, []byte("servers:\n  - name: demo\n    builtin: demo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"SLACK_BOT_TOKEN":      slackemu.BotToken,
		"SLACK_APP_TOKEN":      slackemu.AppToken,
		"SLACK_API_URL":        emu.APIURL(),
		"REDIS_URL":            os.Getenv("REDIS_URL"),
		"LLM_PROVIDER":         "openai",
		"LLM_BASE_URL":         llm.URL() + "/v1",
		"LLM_API_KEY":          "sk-test",
		"LLM_MODEL":            "gpt-4o",
		"HTTP_ADDR":            freeAddr(t),
		"MCP_CONFIG":           cfg,
		"STREAM_EDIT_INTERVAL": "100ms",
		"SHUTDOWN_GRACE":       "25s",
	}
	logs, stop := startRun(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := emu.WaitFor(ctx, func() bool { return emu.LiveConnections() > 0 }); err != nil {
		t.Fatal(err)
	}
	p := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "save hi", "")
	if err := emu.WaitFor(ctx, func() bool {
		for _, m := range emu.BotReplies(slackemu.ChannelGen, p.TS) {
			if strings.Contains(string(m.Blocks), "Allow once") {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no approval prompt: %v\n%s", err, logs.String())
	}
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	took := time.Since(start)
	t.Logf("stopped %s after Ctrl-C with an approval pending", took.Round(time.Millisecond))
	// Not a performance bound: before, the turn held the process for
	// half of SHUTDOWN_GRACE (12.5 s here); about 1 s is the socket drain.
	if took > 6*time.Second {
		t.Errorf("stopping took %s with an approval pending; want about 1 s, not half of SHUTDOWN_GRACE", took.Round(time.Millisecond))
	}
	if l := logs.String(); !strings.Contains(l, "wait on people") || !strings.Contains(l, "approval of demo/add_note") {
		t.Errorf("the log does not say what the turn waited for:\n%s", l)
	}
}
