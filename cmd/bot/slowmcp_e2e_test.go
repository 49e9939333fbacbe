package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// slowMCPEnv makes this test binary a stdio MCP server that takes that
// many seconds to start (like a cold npx download) before serving echo.
const slowMCPEnv = "BOBBIN_TEST_SLOW_MCP"

func TestMain(m *testing.M) {
	if v := os.Getenv(slowMCPEnv); v != "" {
		secs, _ := strconv.Atoi(v)
		time.Sleep(time.Duration(secs) * time.Second)
		srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "slow", Version: "1.0.0"}, nil)
		mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "echo", Description: "Echo a message"},
			func(_ context.Context, _ *mcpsdk.CallToolRequest, in struct {
				Message string `json:"message"`
			}) (*mcpsdk.CallToolResult, any, error) {
				return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: in.Message}}}, nil, nil
			})
		if err := srv.Run(context.Background(), &mcpsdk.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestNoSilenceWhileAServerStarts: with a stdio server that takes 15 s to
// start, /bobbin mcp list says it is starting, a mention meanwhile is
// answered promptly with the ready tools and a note, and the server's
// tools are offered once it is up.
func TestNoSilenceWhileAServerStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 15 s")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "mcp.yaml")
	yaml := fmt.Sprintf("servers:\n  - name: slow\n    command: [%q, \"-test.run=^$\"]\n    env: {%s: \"15\"}\n    startup_timeout: 1m\n  - name: demo\n    builtin: demo\n", exe, slowMCPEnv)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	emu := slackemu.New(slackemu.Options{})
	defer emu.Close()
	llm := llmemu.New(llmemu.Options{APIKey: "sk-test"})
	defer llm.Close()
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
		"SHUTDOWN_GRACE":       "4s",
	}
	logs, stop := startRun(t, env)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wait := func(what string, cond func() bool) {
		t.Helper()
		if err := emu.WaitFor(ctx, cond); err != nil {
			t.Fatalf("waiting for %s: %v\nlogs:\n%s", what, err, logs.String())
		}
	}
	wait("the bot", func() bool { return emu.LiveConnections() > 0 })

	asked := time.Now()
	p := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "q1 hello", "")
	var answer string
	wait("the answer", func() bool {
		for _, m := range emu.BotReplies(slackemu.ChannelGen, p.TS) {
			if v := m.Visible(); strings.Contains(v, "Answered without") {
				answer = v
				return true
			}
		}
		return false
	})
	took := time.Since(asked)
	t.Logf("answered %s after the mention while slow was starting: %q", took.Round(time.Millisecond), answer)
	if !strings.Contains(answer, "`slow` (still starting)") {
		t.Errorf("the answer does not say which server is not ready: %q", answer)
	}
	// Not a performance bound: the turn must not wait for the 15 s start.
	if took > 10*time.Second {
		t.Errorf("the answer took %s; want it within about 3 s", took)
	}
	first := llm.Requests()[0]
	if slices.ContainsFunc(first.Tools, func(n string) bool { return strings.HasPrefix(n, "slow__") }) ||
		!slices.Contains(first.Tools, "demo__list_notes") {
		t.Errorf("tools offered while slow starts: %v", first.Tools)
	}
	if len(first.Messages) == 0 || first.Messages[0].Role != "system" || !strings.Contains(first.Messages[0].Text, "`slow` (still starting)") {
		t.Errorf("the model was not told which server is not ready: %+v", first.Messages)
	}

	in := emu.SlashCommand(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "/bobbin", "mcp list")
	if _, err := in.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var list string
	wait("mcp list", func() bool {
		for _, e := range emu.Ephemerals(slackemu.UserAlice) {
			if strings.Contains(e.Text, "slow") {
				list = e.Text
				return true
			}
		}
		return false
	})
	if !strings.Contains(list, "starting…") {
		t.Errorf("mcp list while slow starts: %q", list)
	}

	// Once up, its tools are offered.
	var seen bool
	for i := 2; !seen && ctx.Err() == nil; i++ {
		marker := fmt.Sprintf("q%d ", i)
		emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, marker+"again", "")
		wait("the model request of "+marker, func() bool {
			for _, r := range llm.Requests() {
				if strings.Contains(r.LastUserText(), marker) {
					seen = slices.Contains(r.Tools, "slow__echo")
					return true
				}
			}
			return false
		})
		if !seen {
			time.Sleep(2 * time.Second)
		}
	}
	t.Logf("slow's tools offered %s after the first mention", time.Since(asked).Round(time.Millisecond))
}
