package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// annotatedMCP is a loopback MCP server whose tools carry annotations: a
// read-only closed-world find, a destructive wipe, a drop_table the
// operator denies; it counts the calls of each tool.
func annotatedMCP(t *testing.T) (url string, calls func(tool string) int) {
	t.Helper()
	var mu sync.Mutex
	n := map[string]int{}
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "crm", Version: "1.0.0"}, nil)
	yes, no := true, false
	type in struct {
		Message string `json:"message"`
	}
	for _, tl := range []*mcpsdk.Tool{
		{Name: "find", Description: "Finds a record", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no}},
		{Name: "wipe", Description: "Deletes a record", Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &no}},
		{Name: "drop_table", Description: "Drops a table", Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: &yes}},
	} {
		name := tl.Name
		mcpsdk.AddTool(srv, tl, func(_ context.Context, _ *mcpsdk.CallToolRequest, x in) (*mcpsdk.CallToolResult, any, error) {
			mu.Lock()
			n[name]++
			mu.Unlock()
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: name + ": " + x.Message}}}, nil, nil
		})
	}
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv },
		&mcpsdk.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp", func(tool string) int {
		mu.Lock()
		defer mu.Unlock()
		return n[tool]
	}
}

// TestToolPolicyEndToEnd runs the whole program against the Slack
// emulator, real Redis, the model emulator and annotated MCP servers: a
// trusted server's read-only tool runs in a DM without a prompt (and is
// audited) but asks in a channel; a destructive tool never offers Always
// allow; a denied tool is never offered; an untrusted server's read-only
// hint changes nothing; /bobbin mcp policy sets admin (the asker's click
// is refused, an admin's runs the tool) and auto, and mcp list shows it.
func TestToolPolicyEndToEnd(t *testing.T) {
	emu := slackemu.New(slackemu.Options{})
	defer emu.Close()
	crmURL, crmCalls := annotatedMCP(t)
	looseURL, looseCalls := annotatedMCP(t)
	// Whole-program tests share Redis and the workspace T111: the server
	// names are this run's own, so no policy or pin of another run applies.
	crm, loose := fmt.Sprintf("crm%d", time.Now().UnixNano()%1e9), fmt.Sprintf("loose%d", time.Now().UnixNano()%1e9)
	cfgPath := filepath.Join(t.TempDir(), "mcp.yaml")
	cfg := fmt.Sprintf(`servers:
  - name: %s
    url: %s
    trusted: true
    policy:
      "drop_*": deny
  - name: %s
    url: %s
`, crm, crmURL, loose, looseURL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	llm := llmemu.New(llmemu.Options{TokenInterval: time.Millisecond})
	defer llm.Close()
	llm.SetResponder(func(r llmemu.Recorded) llmemu.Reply {
		if last := r.LastMessage(); last.Role == "tool" {
			return llmemu.Reply{Text: "Tools said: " + last.Text}
		}
		text := r.LastUserText()
		if i := strings.Index(text, "call "); i >= 0 {
			var calls []llmemu.ToolCall
			for _, name := range strings.Fields(text[i+len("call "):]) {
				calls = append(calls, llmemu.ToolCall{Name: name, Arguments: `{"message":"hi"}`})
			}
			return llmemu.Reply{ToolCalls: calls}
		}
		return llmemu.Reply{Text: "A plain answer."}
	})

	wctx, wait, stop := startMCPRun(t, emu, mcpEnv(t, emu, llm, cfgPath, nil))
	defer stop()

	seq := 0
	ask := func(channel, user, text string) (string, []string) {
		t.Helper()
		seq++
		marker := fmt.Sprintf("q%d", seq)
		p, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: channel, User: user,
			Text: marker + " " + text, Mention: !strings.HasPrefix(channel, "D")})
		if err != nil {
			t.Fatal(err)
		}
		var tools []string
		wait("the model request of "+marker, func() bool {
			for _, r := range llm.Requests() {
				if strings.Contains(r.LastUserText(), marker+" ") {
					tools = r.Tools
					return true
				}
			}
			return false
		})
		return p.TS, tools
	}
	reply := func(channel, thread, want string) {
		t.Helper()
		wait("the answer "+want+" in "+thread, func() bool {
			for _, m := range emu.BotReplies(channel, thread) {
				if strings.Contains(m.Text, want) {
					return true
				}
			}
			return false
		})
	}
	prompts := func(channel, thread string) []slackemu.Message {
		var out []slackemu.Message
		for _, m := range emu.BotReplies(channel, thread) {
			if bytes.Contains(m.Blocks, []byte("bobbin_approval_head")) {
				out = append(out, m)
			}
		}
		return out
	}
	promptOf := func(channel, thread string) slackemu.Message {
		t.Helper()
		var p slackemu.Message
		wait("the approval prompt in "+thread, func() bool {
			ps := prompts(channel, thread)
			if len(ps) > 0 {
				p = ps[0]
			}
			return len(ps) > 0
		})
		return p
	}
	click := func(user, channel string, prompt slackemu.Message, action string) {
		t.Helper()
		in, err := emu.Click(slackemu.TeamID, user, channel, prompt.TS, action, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.Wait(wctx); err != nil {
			t.Fatal(err)
		}
	}
	slash := func(user, text string, want int) string {
		t.Helper()
		before := len(emu.Ephemerals(user))
		in := emu.SlashCommand(slackemu.TeamID, slackemu.ChannelGen, user, "/bobbin", text)
		if _, err := in.Wait(wctx); err != nil {
			t.Fatalf("/bobbin %s: %v", text, err)
		}
		var got []string
		wait("answer to /bobbin "+text, func() bool {
			got = got[:0]
			for _, e := range emu.Ephemerals(user)[before:] {
				got = append(got, e.Text)
			}
			return len(got) >= want
		})
		return strings.Join(got, "\n")
	}

	// A trusted server's read-only, closed-world tool in a DM: no prompt.
	th, tools := ask(slackemu.DMAlice, slackemu.UserAlice, "call "+crm+"__find")
	reply(slackemu.DMAlice, th, "Tools said: find: hi")
	if ps := prompts(slackemu.DMAlice, th); len(ps) != 0 {
		t.Errorf("crm__find in a DM posted %d approval prompts, want none", len(ps))
	}
	// deny: never offered to the model.
	if slices.Contains(tools, crm+"__drop_table") || !slices.Contains(tools, crm+"__wipe") {
		t.Errorf("tools offered: %v; want crm__wipe and no crm__drop_table", tools)
	}
	for _, r := range llm.Requests() {
		if slices.Contains(r.Tools, crm+"__drop_table") {
			t.Errorf("a model request offered crm__drop_table: %v", r.Tools)
		}
	}
	// The call that ran without a prompt is audited with its policy.
	if got := slash(slackemu.UserAdmin, "audit", 1); !strings.Contains(got, "`tool_call`") || !strings.Contains(got, "policy=auto") {
		t.Errorf("audit lacks the auto call:\n%s", got)
	}

	// The same tool in a channel asks.
	th, _ = ask(slackemu.ChannelGen, slackemu.UserAlice, "call "+crm+"__find")
	p := promptOf(slackemu.ChannelGen, th)
	click(slackemu.UserAlice, slackemu.ChannelGen, p, "bobbin_allow_once")
	reply(slackemu.ChannelGen, th, "Tools said: find: hi")

	// An untrusted server's read-only hint changes nothing, even in a DM.
	th, _ = ask(slackemu.DMAlice, slackemu.UserAlice, "call "+loose+"__find")
	p = promptOf(slackemu.DMAlice, th)
	click(slackemu.UserAlice, slackemu.DMAlice, p, "bobbin_deny")
	reply(slackemu.DMAlice, th, "Tools said:")
	if n := looseCalls("find"); n != 0 {
		t.Errorf("loose find ran %d times after a Deny", n)
	}

	// A destructive tool of a trusted server: no Always allow.
	th, _ = ask(slackemu.ChannelGen, slackemu.UserAlice, "call "+crm+"__wipe")
	p = promptOf(slackemu.ChannelGen, th)
	if bytes.Contains(p.Blocks, []byte("bobbin_allow_thread")) || !bytes.Contains(p.Blocks, []byte("bobbin_allow_once")) {
		t.Errorf("the destructive tool's prompt: %s; want Allow once and no Always allow", p.Blocks)
	}
	click(slackemu.UserAlice, slackemu.ChannelGen, p, "bobbin_allow_once")
	reply(slackemu.ChannelGen, th, "Tools said: wipe: hi")

	// /bobbin mcp policy: admins only; grammar mistakes are explained.
	if got := slash(slackemu.UserBob, "mcp policy "+crm+" wipe admin", 1); !strings.Contains(got, "Only workspace admins") {
		t.Errorf("non-admin mcp policy answered %q", got)
	}
	if got := slash(slackemu.UserAdmin, "mcp policy "+crm+" wipe sometimes", 1); !strings.Contains(got, "is not a mode") {
		t.Errorf("a bad mode answered %q", got)
	}
	if got := slash(slackemu.UserAdmin, "mcp policy nosuch auto", 1); !strings.Contains(got, "no MCP server named `nosuch`") {
		t.Errorf("an unknown server answered %q", got)
	}
	got := slash(slackemu.UserAdmin, "mcp policy "+crm+" wipe admin", 1)
	if !strings.Contains(got, "Tool policy of `"+crm+"`") || !strings.Contains(got, "`wipe` is now admin") {
		t.Fatalf("mcp policy answered %q", got)
	}

	// admin: the asker's click is refused; an admin's runs the tool.
	th, _ = ask(slackemu.ChannelGen, slackemu.UserAlice, "call "+crm+"__wipe")
	p = promptOf(slackemu.ChannelGen, th)
	if !bytes.Contains(p.Blocks, []byte("Only a workspace admin can decide")) {
		t.Errorf("the admin prompt does not say who decides: %s", p.Blocks)
	}
	before := crmCalls("wipe")
	click(slackemu.UserAlice, slackemu.ChannelGen, p, "bobbin_allow_once")
	wait("the refusal to alice", func() bool {
		for _, e := range emu.Ephemerals(slackemu.UserAlice) {
			if strings.Contains(e.Text, "Only a workspace admin can approve this tool") {
				return true
			}
		}
		return false
	})
	if n := crmCalls("wipe"); n != before {
		t.Errorf("wipe ran after the asker's click on an admin-only prompt")
	}
	click(slackemu.UserAdmin, slackemu.ChannelGen, p, "bobbin_allow_once")
	reply(slackemu.ChannelGen, th, "Tools said: wipe: hi")
	if n := crmCalls("wipe"); n != before+1 {
		t.Errorf("wipe ran %d times after the admin's click, want %d", n, before+1)
	}

	// auto set from Slack applies to the next turn: no prompt in a channel.
	if got := slash(slackemu.UserAdmin, "mcp policy "+crm+" find auto", 1); !strings.Contains(got, "`find` is now auto") {
		t.Fatalf("mcp policy answered %q", got)
	}
	th, _ = ask(slackemu.ChannelGen, slackemu.UserBob, "call "+crm+"__find")
	reply(slackemu.ChannelGen, th, "Tools said: find: hi")
	if ps := prompts(slackemu.ChannelGen, th); len(ps) != 0 {
		t.Errorf("crm__find with policy auto posted %d prompts in a channel", len(ps))
	}

	// mcp list and the policy alone show it.
	list := slash(slackemu.UserBob, "mcp list", 1)
	for _, want := range []string{"rules (operator's configuration): `drop_*` deny", "rules (set by admins):", "`find` auto", "admin (an admin must approve): `wipe` (every time)", "deny (never offered): `drop_table`"} {
		if !strings.Contains(list, want) {
			t.Errorf("mcp list lacks %q:\n%s", want, list)
		}
	}
	if got := slash(slackemu.UserAdmin, "mcp policy "+crm, 1); !strings.Contains(got, "auto (runs without asking): `find`") {
		t.Errorf("mcp policy "+crm+" answered %q", got)
	}
	if n := crmCalls("drop_table"); n != 0 {
		t.Errorf("the denied tool ran %d times", n)
	}

	// private: in a channel the result goes to the asker only, and the
	// model waits for the choice.
	if got := slash(slackemu.UserAdmin, "mcp policy "+crm+" find private", 1); !strings.Contains(got, "`find` is now private") {
		t.Fatalf("mcp policy private answered %q", got)
	}
	privateOf := func(thread string) slackemu.Ephemeral {
		t.Helper()
		var e slackemu.Ephemeral
		wait("the private result in "+thread, func() bool {
			for _, x := range emu.Ephemerals(slackemu.UserAlice) {
				if x.ThreadTS == thread && bytes.Contains(x.Blocks, []byte("bobbin_private_share")) {
					e = x
					return true
				}
			}
			return false
		})
		return e
	}
	sawResult := func(thread string) bool {
		for _, m := range emu.BotReplies(slackemu.ChannelGen, thread) {
			if strings.Contains(m.Text, "find: hi") || bytes.Contains(m.Blocks, []byte("find: hi")) {
				return true
			}
		}
		return false
	}
	modelSaw := func(marker string) bool {
		for _, r := range llm.Requests() {
			if strings.Contains(r.LastUserText(), marker+" ") && strings.Contains(r.LastMessage().Text, "find: hi") {
				return true
			}
		}
		return false
	}
	th, _ = ask(slackemu.ChannelGen, slackemu.UserAlice, "call "+crm+"__find")
	keepMarker := fmt.Sprintf("q%d", seq)
	e := privateOf(th)
	if !bytes.Contains(e.Blocks, []byte("find: hi")) || !bytes.Contains(e.Blocks, []byte("bobbin_private_keep")) {
		t.Errorf("the private result shown to the asker: %s", e.Blocks)
	}
	if sawResult(th) || modelSaw(keepMarker) {
		t.Error("the result reached the channel or the model before the asker chose")
	}
	if in, err := emu.Click(slackemu.TeamID, slackemu.UserAlice, slackemu.ChannelGen, e.TS, "bobbin_private_keep", ""); err != nil {
		t.Fatal(err)
	} else if _, err := in.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	reply(slackemu.ChannelGen, th, "Tools said: The result of this call was shown privately")
	if sawResult(th) || modelSaw(keepMarker) {
		t.Error("Keep private: the result reached the channel or the model")
	}

	th, _ = ask(slackemu.ChannelGen, slackemu.UserAlice, "call "+crm+"__find")
	shareMarker := fmt.Sprintf("q%d", seq)
	e = privateOf(th)
	if in, err := emu.Click(slackemu.TeamID, slackemu.UserAlice, slackemu.ChannelGen, e.TS, "bobbin_private_share", ""); err != nil {
		t.Fatal(err)
	} else if _, err := in.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	reply(slackemu.ChannelGen, th, "shared the result of `"+crm+"/find`")
	reply(slackemu.ChannelGen, th, "Tools said: find: hi")
	if !modelSaw(shareMarker) {
		t.Error("Share: the model did not get the result")
	}

	// A private tool that asks: onlookers see no arguments.
	if got := slash(slackemu.UserAdmin, "mcp policy "+crm+" find ask", 1); !strings.Contains(got, "`find` is now ask") {
		t.Fatalf("mcp policy answered %q", got)
	}
	th, _ = ask(slackemu.ChannelGen, slackemu.UserAlice, "call "+crm+"__find")
	p = promptOf(slackemu.ChannelGen, th)
	if bytes.Contains(p.Blocks, []byte(`message`)) || !bytes.Contains(p.Blocks, []byte("Arguments hidden")) {
		t.Errorf("the prompt of a private tool shows its arguments: %s", p.Blocks)
	}
	// End the turn: one left waiting would be resumed by the next test's
	// bot (they share Redis and the workspace).
	click(slackemu.UserAlice, slackemu.ChannelGen, p, "bobbin_deny")
	reply(slackemu.ChannelGen, th, "Tools said:")
}
