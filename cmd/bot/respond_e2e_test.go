package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestProfileServersAndRespond runs the whole program: a profile's servers
// narrow the tools offered (a server it names that the access policy
// keeps out of the channel stays out); respond: mention keeps thread
// replies as context; respond: all answers a plain channel message.
func TestProfileServersAndRespond(t *testing.T) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	defer emu.Close()
	llm := llmemu.New(llmemu.Options{TokenInterval: time.Millisecond})
	defer llm.Close()
	env := profilesEnv(t, emu, llm, `
profiles:
  - name: narrow
    servers: [alpha, gamma]
    respond: mention
  - name: chatty
    respond: all
channels:
  `+slackemu.ChannelGen+`: narrow
  `+slackemu.ChannelT2+`: chatty
`)
	mcpPath := filepath.Join(t.TempDir(), "mcp.yaml")
	if err := os.WriteFile(mcpPath, []byte(`servers:
  - name: alpha
    builtin: demo
  - name: beta
    builtin: demo
  - name: gamma
    builtin: demo
    channels: [`+slackemu.ChannelRandom+`]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env["MCP_CONFIG"] = mcpPath
	logs, stop := startRun(t, env)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := emu.WaitFor(ctx, func() bool { return emu.LiveConnections() > 0 }); err != nil {
		t.Fatalf("bot did not connect: %v", err)
	}
	ask := func(team, channel, text, thread string, mention bool) llmemu.Recorded {
		t.Helper()
		n := len(llm.Requests())
		if mention {
			emu.Mention(team, channel, slackemu.UserAlice, text, thread)
		} else {
			emu.Message(team, channel, slackemu.UserT2, text, thread)
		}
		reqs, err := llm.WaitRequests(ctx, n+1)
		if err != nil {
			t.Fatalf("no model request for %q: %v", text, err)
		}
		return reqs[n]
	}

	// Tools: alpha only (beta not named, gamma out of the policy here).
	var r llmemu.Recorded
	for {
		r = ask(slackemu.TeamID, slackemu.ChannelGen, "which tools?", "", true)
		if len(r.Tools) > 0 || ctx.Err() != nil {
			break
		}
	}
	if !slices.Contains(r.Tools, "alpha__list_notes") || slices.ContainsFunc(r.Tools, func(s string) bool {
		return strings.HasPrefix(s, "beta__") || strings.HasPrefix(s, "gamma__")
	}) {
		t.Errorf("tools offered in #general = %v, want alpha's only", r.Tools)
	}

	// mcp list says which profile applies here.
	in := emu.SlashCommand(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "/bobbin", "mcp list")
	if _, err := in.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := emu.WaitFor(ctx, func() bool {
		for _, e := range emu.Ephemerals(slackemu.UserAlice) {
			if strings.Contains(e.Text, "Agent profile here: the profile `narrow`") {
				return true
			}
		}
		return false
	}); err != nil {
		t.Error("mcp list does not say which profile applies here")
	}

	// respond: mention: a reply in the bot's thread starts no turn; it is
	// context for the next mention there.
	// (Wait for this thread's own turn: an earlier turn may still finish.)
	thread := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "start a thread", "")
	if err := emu.WaitFor(ctx, func() bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "bot: turn done") && strings.Contains(l, `"thread":"`+thread.TS+`"`) {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal("the thread's first turn did not finish")
	}
	n := len(llm.Requests())
	emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserBob, "REPLY-AS-CONTEXT", thread.TS)
	// Recorded as context (the metric counts it) before the next mention,
	// so the two cannot race each other through admission.
	for !strings.Contains(metrics(t, env["HTTP_ADDR"]), "bobbin_thread_context_replies_total 1") {
		if ctx.Err() != nil {
			t.Fatal("the reply was never recorded as context")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r = ask(slackemu.TeamID, slackemu.ChannelGen, "and now?", thread.TS, true)
	if got := len(llm.Requests()); got != n+1 {
		t.Errorf("%d model requests after a reply and a mention, want 1 (the reply starts no turn)", got-n)
	}
	if !slices.ContainsFunc(r.Messages, func(m llmemu.Message) bool { return strings.Contains(m.Text, "REPLY-AS-CONTEXT") }) {
		t.Errorf("the reply is not context of the next mention: %+v", r.Messages)
	}

	// respond: all: a plain top-level message in the channel starts a turn.
	r = ask(slackemu.TeamID2, slackemu.ChannelT2, "PLAIN-CHANNEL-MESSAGE", "", false)
	if !slices.ContainsFunc(r.Messages, func(m llmemu.Message) bool { return strings.Contains(m.Text, "PLAIN-CHANNEL-MESSAGE") }) {
		t.Errorf("the plain message's turn asked %+v", r.Messages)
	}
}

// metrics is the text of /metrics at addr.
func metrics(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
