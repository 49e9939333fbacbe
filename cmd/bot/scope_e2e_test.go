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
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// countingMCP is a loopback MCP server with one read-only echo tool that
// counts its calls.
func countingMCP(t *testing.T) (url string, calls *atomic.Int32) {
	t.Helper()
	calls = &atomic.Int32{}
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "count", Version: "1.0.0"}, nil)
	type echoIn struct {
		Message string `json:"message"`
	}
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "echo", Description: "Echoes a message back",
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in echoIn) (*mcpsdk.CallToolResult, any, error) {
			calls.Add(1)
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "echo: " + in.Message}}}, nil, nil
		})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv },
		&mcpsdk.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp", calls
}

// TestToolScopesEndToEnd runs the whole program against the Slack
// emulator, real Redis and the model emulator, with servers scoped in
// MCP_CONFIG and from Slack, and checks what the model is offered (its
// recorded requests' tool lists) for each place and person.
func TestToolScopesEndToEnd(t *testing.T) {
	emu := slackemu.New(slackemu.Options{})
	defer emu.Close()
	const ops, shared = "C0OPS", "C0SHARED"
	emu.AddChannel(slackemu.TeamID, slackemu.Channel{ID: ops, Name: "ops", BotMember: true})
	emu.AddChannel(slackemu.TeamID, slackemu.Channel{ID: shared, Name: "partners", BotMember: true, SharedTeams: []string{"T999"}})
	group := emu.AddUsergroup(slackemu.Usergroup{Team: slackemu.TeamID, Handle: "oncall", Name: "On call", Users: []string{slackemu.UserAlice}})

	servers := map[string]*atomic.Int32{}
	urls := map[string]string{}
	for _, name := range []string{"oncall", "grp", "nodm", "open", "wide", "reg"} {
		urls[name], servers[name] = countingMCP(t)
	}
	cfgPath := filepath.Join(t.TempDir(), "mcp.yaml")
	cfg := fmt.Sprintf(`servers:
  - name: oncall
    url: %s
    channels: [%s]
  - name: grp
    url: %s
    usergroups: [%s]
  - name: nodm
    url: %s
    dm: false
  - name: open
    url: %s
  - name: wide
    url: %s
    guests: true
`, urls["oncall"], slackemu.ChannelGen, urls["grp"], group, urls["nodm"], urls["open"], urls["wide"])
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	llm := llmemu.New(llmemu.Options{TokenInterval: time.Millisecond})
	defer llm.Close()
	// "call a b" makes the model call tools a and b; after tool results it
	// reports them; anything else gets a plain answer.
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

	wctx, wait, stop := startMCPRun(t, emu, mcpEnv(t, emu, llm, cfgPath, map[string]string{"USERGROUP_CACHE_TTL": "1s"}))
	defer stop()

	seq := 0
	// ask posts text as user in channel (a new thread) and returns the
	// thread and the tools of the model's first request for it.
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
	offered := func(tools []string) []string {
		var out []string
		for _, n := range tools {
			if s, _, ok := strings.Cut(n, "__"); ok {
				out = append(out, s)
			}
		}
		slices.Sort(out)
		return out
	}
	check := func(what string, tools []string, want ...string) {
		t.Helper()
		slices.Sort(want)
		if got := offered(tools); !slices.Equal(got, want) {
			t.Errorf("%s: servers offered %v, want %v", what, got, want)
		}
	}
	reply := func(channel, thread, want string) {
		t.Helper()
		wait("the answer in "+thread, func() bool {
			for _, m := range emu.BotReplies(channel, thread) {
				if strings.Contains(m.Text, want) {
					return true
				}
			}
			return false
		})
	}
	slash := func(user, channel, text string, want int) string {
		t.Helper()
		before := len(emu.Ephemerals(user))
		in := emu.SlashCommand(slackemu.TeamID, channel, user, "/bobbin", text)
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

	// An admin registers a server from Slack (unscoped at first).
	if got := slash(slackemu.UserAdmin, slackemu.ChannelGen, "mcp add reg "+urls["reg"], 2); !strings.Contains(got, "Registered `reg`") {
		t.Fatalf("mcp add answered %q", got)
	}

	// Place: the channel-scoped server only in its channel, never in DMs;
	// dm: false keeps a server out of DMs.
	_, tools := ask(slackemu.ChannelGen, slackemu.UserAlice, "hello")
	check("alice in #general", tools, "oncall", "grp", "nodm", "open", "wide", "reg")
	_, tools = ask(ops, slackemu.UserAlice, "hello")
	check("alice in #ops", tools, "grp", "nodm", "open", "wide", "reg")
	_, tools = ask(slackemu.DMAlice, slackemu.UserAlice, "hello")
	check("alice in a DM", tools, "grp", "open", "wide", "reg")

	// People: a non-member of the user group does not get its server.
	_, tools = ask(slackemu.ChannelGen, slackemu.UserBob, "hello")
	check("bob in #general", tools, "oncall", "nodm", "open", "wide", "reg")

	// Guests and external people: only guests: true, and a plain answer.
	th, tools := ask(slackemu.ChannelGen, slackemu.UserGuest, "hello")
	check("a guest", tools, "wide")
	reply(slackemu.ChannelGen, th, "A plain answer.")
	th, tools = ask(shared, slackemu.UserStranger, "hello")
	check("an external person in a shared channel", tools, "wide")
	reply(shared, th, "A plain answer.")

	// mcp list: each server's scope and whether it is available to the
	// person asking, there.
	list := slash(slackemu.UserBob, slackemu.ChannelGen, "mcp list", 1)
	for _, want := range []string{
		"only in <#" + slackemu.ChannelGen + ">, not in DMs",
		"only members of `" + group + "`",
		"guests and people of other organizations too",
		"not available to you here (you are not among its people or groups)",
		":white_check_mark: available to you here",
	} {
		if !strings.Contains(list, want) {
			t.Errorf("mcp list lacks %q:\n%s", want, list)
		}
	}
	if strings.Contains(list, "<!subteam") {
		t.Errorf("mcp list mentions a user group (that notifies it):\n%s", list)
	}

	// A turn started by someone out of scope: the model names the group's
	// tool anyway and another one that needs approval; an admin allows
	// that one. The group's tool is never offered and never runs.
	th, tools = ask(slackemu.ChannelGen, slackemu.UserBob, "call grp__echo open__echo")
	check("bob asking for tools", tools, "oncall", "nodm", "open", "wide", "reg")
	var prompt slackemu.Message
	wait("the approval prompt", func() bool {
		for _, m := range emu.BotReplies(slackemu.ChannelGen, th) {
			if bytes.Contains(m.Blocks, []byte("bobbin_approval_head")) {
				prompt = m
				return true
			}
		}
		return false
	})
	in, err := emu.Click(slackemu.TeamID, slackemu.UserAdmin, slackemu.ChannelGen, prompt.TS, "bobbin_allow_once", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	reply(slackemu.ChannelGen, th, "Tools said:")
	for _, r := range llm.Requests() {
		if strings.Contains(r.LastUserText(), fmt.Sprintf("q%d ", seq)) && slices.Contains(r.Tools, "grp__echo") {
			t.Errorf("a request of bob's turn offered grp__echo: %v", r.Tools)
		}
	}
	if n := servers["grp"].Load(); n != 0 {
		t.Errorf("the group's server ran %d times for someone out of scope", n)
	}
	if n := servers["open"].Load(); n != 1 {
		t.Errorf("the approved tool ran %d times, want 1", n)
	}
	// An in-scope person's call runs.
	th, _ = ask(slackemu.ChannelGen, slackemu.UserAlice, "call grp__echo")
	wait("alice's approval prompt", func() bool {
		for _, m := range emu.BotReplies(slackemu.ChannelGen, th) {
			if bytes.Contains(m.Blocks, []byte("bobbin_approval_head")) {
				prompt = m
				return true
			}
		}
		return false
	})
	if in, err = emu.Click(slackemu.TeamID, slackemu.UserAlice, slackemu.ChannelGen, prompt.TS, "bobbin_allow_once", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	reply(slackemu.ChannelGen, th, "Tools said: echo: hi")
	if n := servers["grp"].Load(); n != 1 {
		t.Errorf("the group's server ran %d times for its member, want 1", n)
	}

	// /bobbin mcp scope: refused to non-admins; the operator's servers
	// are shown, not changed; a registered server's scope is replaced and
	// lifted, and the changes are audited.
	if got := slash(slackemu.UserBob, slackemu.ChannelGen, "mcp scope reg <@"+slackemu.UserAlice+"|alice>", 1); !strings.Contains(got, "Only workspace admins") {
		t.Errorf("non-admin mcp scope answered %q", got)
	}
	if got := slash(slackemu.UserAdmin, slackemu.ChannelGen, "mcp scope oncall <#"+ops+"|ops>", 1); !strings.Contains(got, "operator's configuration") {
		t.Errorf("mcp scope of a configured server answered %q", got)
	}
	if got := slash(slackemu.UserAdmin, slackemu.ChannelGen, "mcp scope reg <!subteam^SNOSUCH|@nobody>", 1); !strings.Contains(got, "no user group") {
		t.Errorf("mcp scope with an unknown group answered %q", got)
	}
	got := slash(slackemu.UserAdmin, slackemu.ChannelGen, "mcp scope reg <#"+slackemu.ChannelGen+"|general> <@"+slackemu.UserAlice+"|alice> dm:on", 1)
	if !strings.Contains(got, "Scope of `reg`") {
		t.Fatalf("mcp scope answered %q", got)
	}
	_, tools = ask(slackemu.ChannelGen, slackemu.UserBob, "hello")
	check("bob after reg was scoped to alice", tools, "oncall", "nodm", "open", "wide")
	_, tools = ask(slackemu.DMAlice, slackemu.UserAlice, "hello")
	check("alice in a DM after reg was scoped to her with dm:on", tools, "grp", "open", "wide", "reg")
	_, tools = ask(ops, slackemu.UserAlice, "hello")
	check("alice in #ops after reg was scoped to #general", tools, "grp", "nodm", "open", "wide")
	if got := slash(slackemu.UserAdmin, slackemu.ChannelGen, "mcp scope reg clear", 1); !strings.Contains(got, "Lifted the scope") {
		t.Errorf("mcp scope clear answered %q", got)
	}
	_, tools = ask(slackemu.ChannelGen, slackemu.UserBob, "hello")
	check("bob after the scope was lifted", tools, "oncall", "nodm", "open", "wide", "reg")
	audit := slash(slackemu.UserAdmin, slackemu.ChannelGen, "audit", 1)
	for _, want := range []string{"`mcp_scope`", "outcome=unrestricted", "outcome=channels=" + slackemu.ChannelGen + " users=" + slackemu.UserAlice + " dm=true", "`admin_refused`"} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit lacks %q:\n%s", want, audit)
		}
	}

	// A group membership change is seen once the cache time is over.
	if err := emu.SetUsergroupMembers(group, slackemu.UserBob); err != nil {
		t.Fatal(err)
	}
	for {
		_, tools = ask(slackemu.ChannelGen, slackemu.UserBob, "hello")
		if slices.Contains(offered(tools), "grp") {
			break
		}
		if wctx.Err() != nil {
			t.Fatal("bob never got the group's server after joining it")
		}
		time.Sleep(300 * time.Millisecond)
	}
	_, tools = ask(slackemu.ChannelGen, slackemu.UserAlice, "hello")
	check("alice after leaving the group", tools, "oncall", "nodm", "open", "wide", "reg")

	if rl := emu.RateLimited(); len(rl) > 0 {
		t.Errorf("Slack answered 429: %v", rl)
	}
}
