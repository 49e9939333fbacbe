package main

import (
	"context"
	"fmt"
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

// profilesEnv is the environment of a whole-program run with profiles.
func profilesEnv(t *testing.T, emu *slackemu.Server, llm *llmemu.Server, profiles string) map[string]string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "profiles.yaml")
	if err := os.WriteFile(path, []byte(profiles), 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"SLACK_BOT_TOKEN":      slackemu.BotToken,
		"SLACK_APP_TOKEN":      slackemu.AppToken,
		"SLACK_API_URL":        emu.APIURL(),
		"REDIS_URL":            "", // the embedded Redis: usage starts at zero in every test
		"LLM_PROVIDER":         "openai",
		"LLM_BASE_URL":         llm.URL() + "/v1",
		"LLM_API_KEY":          "sk-test",
		"LLM_MODEL":            "gpt-4o",
		"HTTP_ADDR":            freeAddr(t),
		"STREAM_EDIT_INTERVAL": "100ms",
		"SHUTDOWN_GRACE":       "4s",
		"PROFILES_CONFIG":      path,
		"SMALL_KEY":            "sk-small",
	}
}

// TestProfilesWholeProgram: a profile bound to a channel gives its turns
// that profile's model, provider, system prompt addition and output cap;
// DMs get theirs; an admin's binding from Slack applies to the next turn;
// a used-up person budget refuses the next turn without a model call, with
// a notice naming the limit; /bobbin usage and /metrics agree.
func TestProfilesWholeProgram(t *testing.T) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	defer emu.Close()
	llm := llmemu.New(llmemu.Options{TokenInterval: time.Millisecond})
	defer llm.Close()
	small := llmemu.New(llmemu.Options{TokenInterval: time.Millisecond, APIKey: "sk-small"})
	defer small.Close()
	env := profilesEnv(t, emu, llm, `
profiles:
  - name: support
    system_prompt: "SUPPORT-PERSONA: help customers."
    model: small-model
    provider: small
    max_tokens: 300
  - name: eng
    system_prompt: "ENG-PERSONA: be terse."
    respond: thread
budgets:
  person: {daily_tokens: 1000000000}
channels:
  `+slackemu.ChannelGen+`: support
dm: eng
prices:
  small-model: {input: 1, output: 2}
providers:
  small:
    kind: openai
    base_url: `+small.URL()+`/v1
    api_key: ${SMALL_KEY}
`)
	_, stop := startRun(t, env)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := emu.WaitFor(ctx, func() bool { return emu.LiveConnections() > 0 }); err != nil {
		t.Fatalf("bot did not connect: %v", err)
	}
	// The App Home says which profiles apply in DMs and by default.
	emu.OpenHome(slackemu.TeamID, slackemu.UserAlice, "home")
	if err := emu.WaitFor(ctx, func() bool {
		v, ok := emu.HomeView(slackemu.TeamID, slackemu.UserAlice)
		return ok && strings.Contains(string(v.Blocks), "Agent profile in DMs with me: the profile `eng`")
	}); err != nil {
		v, _ := emu.HomeView(slackemu.TeamID, slackemu.UserAlice)
		t.Errorf("the App Home does not name the DM profile: %s", v.Blocks)
	}

	system := func(r llmemu.Recorded) string {
		if len(r.Messages) > 0 && r.Messages[0].Role == "system" {
			return r.Messages[0].Text
		}
		return ""
	}

	// #general is bound to support: the small provider, its model, cap and prompt.
	emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "hello support", "")
	reqs, err := small.WaitRequests(ctx, 1)
	if err != nil {
		t.Fatalf("no request on the profile's provider: %v", err)
	}
	r := reqs[0]
	if r.Model != "small-model" || r.MaxTokens != 300 || !strings.Contains(system(r), "SUPPORT-PERSONA") ||
		!strings.Contains(system(r), "You are Bobbin") {
		t.Errorf("support request: model %q max_tokens %d system %q", r.Model, r.MaxTokens, system(r))
	}

	// A DM gets the dm: profile on the environment's provider.
	emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "hello eng", "")
	reqs, err = llm.WaitRequests(ctx, 1)
	if err != nil {
		t.Fatalf("no DM request: %v", err)
	}
	if r := reqs[0]; r.Model != "gpt-4o" || !strings.Contains(system(r), "ENG-PERSONA") || strings.Contains(system(r), "SUPPORT") {
		t.Errorf("DM request: model %q system %q", r.Model, system(r))
	}

	slash := func(user, text string) string {
		t.Helper()
		before := len(emu.Ephemerals(user))
		in := emu.SlashCommand(slackemu.TeamID, slackemu.ChannelGen, user, "/bobbin", text)
		if _, err := in.Wait(ctx); err != nil {
			t.Fatalf("/bobbin %s: %v", text, err)
		}
		var got string
		if err := emu.WaitFor(ctx, func() bool {
			es := emu.Ephemerals(user)[before:]
			if len(es) == 0 {
				return false
			}
			got = es[len(es)-1].Text
			return true
		}); err != nil {
			t.Fatalf("/bobbin %s: no answer", text)
		}
		return got
	}
	if got := slash(slackemu.UserAlice, "profile use eng"); !strings.Contains(got, "Only workspace admins") {
		t.Errorf("non-admin profile use answered %q", got)
	}
	if got := slash(slackemu.UserAdmin, "profile list"); !strings.Contains(got, "support") || !strings.Contains(got, "eng") {
		t.Errorf("profile list answered %q", got)
	}
	if got := slash(slackemu.UserAdmin, "profile use eng #"+slackemu.ChannelGen); !strings.Contains(got, "now uses the profile `eng`") {
		t.Fatalf("profile use answered %q", got)
	}
	n := len(llm.Requests())
	emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserBob, "hello again", "")
	reqs, err = llm.WaitRequests(ctx, n+1)
	if err != nil {
		t.Fatalf("no request after the binding: %v", err)
	}
	if r := reqs[n]; r.Model != "gpt-4o" || !strings.Contains(system(r), "ENG-PERSONA") {
		t.Errorf("after profile use eng: model %q system %q", r.Model, system(r))
	}
	if got := slash(slackemu.UserAdmin, "profile clear"); !strings.Contains(got, "`support`") {
		t.Errorf("profile clear answered %q", got)
	}

	// Usage: the admin's report and anyone's own (once Bob's turn is
	// metered: it is recorded after its model call returns).
	for strings.Contains(slash(slackemu.UserBob, "usage me"), "Today: 0 tokens") {
		if ctx.Err() != nil {
			t.Fatal("Bob's usage was never recorded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := slash(slackemu.UserAdmin, "usage"); !strings.Contains(got, "This month") || !strings.Contains(got, "small-model") {
		t.Errorf("usage answered %q", got)
	}
	if got := slash(slackemu.UserBob, "usage me"); !strings.Contains(got, "Your model usage") || strings.Contains(got, "Today: 0 tokens") {
		t.Errorf("usage me answered %q", got)
	}
	if got := slash(slackemu.UserBob, "usage"); !strings.Contains(got, "Only workspace admins") {
		t.Errorf("non-admin usage answered %q", got)
	}
	resp, err := http.Get("http://" + env["HTTP_ADDR"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`bobbin_model_tokens_total{kind="output",model="small-model"}`, `bobbin_model_cost_total{model="small-model"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestBudgetRefusalWholeProgram: once a person's daily budget is used up,
// their next turn makes no model call and the thread says which limit and
// when it resets.
func TestBudgetRefusalWholeProgram(t *testing.T) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	defer emu.Close()
	llm := llmemu.New(llmemu.Options{TokenInterval: time.Millisecond})
	defer llm.Close()
	env := profilesEnv(t, emu, llm, `
budgets:
  person: {daily_tokens: 1}
`)
	logs, stop := startRun(t, env)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := emu.WaitFor(ctx, func() bool { return emu.LiveConnections() > 0 }); err != nil {
		t.Fatalf("bot did not connect: %v", err)
	}
	// The first turn spends the budget (the check comes before a call).
	emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserOwner, "spend it", "")
	if err := emu.WaitFor(ctx, func() bool { return strings.Contains(logs.String(), "bot: turn done") }); err != nil {
		t.Fatal("the first turn did not finish")
	}
	before := len(llm.Requests())
	p := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserOwner, "again", "")
	var refused string
	if err := emu.WaitFor(ctx, func() bool {
		for _, m := range emu.Thread(slackemu.ChannelGen, p.TS) {
			if m.User == slackemu.BotUserID && strings.Contains(m.Text, "used up") {
				refused = m.Text
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal("the second turn was not refused")
	}
	if n := len(llm.Requests()); n != before {
		t.Errorf("the refused turn made %d model calls", n-before)
	}
	if !strings.Contains(refused, "your daily token budget") || !strings.Contains(refused, "resets at") {
		t.Errorf("refusal %q does not name the limit and the reset", refused)
	}
	if m := metrics(t, env["HTTP_ADDR"]); !strings.Contains(m, `bobbin_budget_refusals_total{scope="person"} 1`) {
		t.Error("/metrics does not count the refusal")
	}
	// Another person is not limited by the owner's budget.
	emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "my turn", "")
	if _, err := llm.WaitRequests(ctx, before+1); err != nil {
		t.Fatal("another person's turn was refused")
	}
}

// TestBudgetWarningWholeProgram: past 80 % of a limit the person is told
// once (ephemeral) and the turn goes on; the next one past 100 % is
// refused.
func TestBudgetWarningWholeProgram(t *testing.T) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	defer emu.Close()
	llm := llmemu.New(llmemu.Options{TokenInterval: time.Millisecond})
	defer llm.Close()
	llm.SetResponder(func(r llmemu.Recorded) llmemu.Reply {
		return llmemu.Reply{Text: "ok", Usage: &llmemu.Usage{InputTokens: 840, OutputTokens: 10}}
	})
	env := profilesEnv(t, emu, llm, `
budgets:
  channel: {daily_tokens: 1000}
`)
	logs, stop := startRun(t, env)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := emu.WaitFor(ctx, func() bool { return emu.LiveConnections() > 0 }); err != nil {
		t.Fatalf("bot did not connect: %v", err)
	}
	turn := func(user, text string) {
		t.Helper()
		n := strings.Count(logs.String(), "bot: turn done")
		emu.Mention(slackemu.TeamID, slackemu.ChannelGen, user, text, "")
		if err := emu.WaitFor(ctx, func() bool { return strings.Count(logs.String(), "bot: turn done") > n }); err != nil {
			t.Fatalf("turn %q did not finish", text)
		}
	}
	warnings := func(user string) (n int) {
		for _, e := range emu.Ephemerals(user) {
			if strings.Contains(e.Text, "this channel's daily token budget is 85 % used") {
				n++
			}
		}
		return n
	}
	turn(slackemu.UserAlice, "one")   // 850 of 1000
	turn(slackemu.UserAlice, "two")   // warned, then 1700
	turn(slackemu.UserAlice, "three") // refused
	if got := warnings(slackemu.UserAlice); got != 1 {
		t.Errorf("%d warnings, want 1", got)
	}
	if got := len(llm.Requests()); got != 2 {
		t.Errorf("%d model calls, want 2 (the third turn refused)", got)
	}
}

// TestProfileRegisteredServersWholeProgram: a profile's registered_servers
// names a server an admin registers from Slack later (no MCP_CONFIG entry,
// yet the start is fine). Before the registration the profiled channel is
// offered no MCP tools at all (the profile narrows to that one server);
// after `/bobbin mcp add` it is offered that server's tools and no other,
// while a channel under another profile is not offered them. `/bobbin
// profile show` says which of the names this workspace has registered.
func TestProfileRegisteredServersWholeProgram(t *testing.T) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	defer emu.Close()
	const other = "C0OTHER"
	emu.AddChannel(slackemu.TeamID, slackemu.Channel{ID: other, Name: "other", BotMember: true})
	llm := llmemu.New(llmemu.Options{TokenInterval: time.Millisecond})
	defer llm.Close()
	wikiURL, _ := countingMCP(t)

	mcpPath := filepath.Join(t.TempDir(), "mcp.yaml")
	if err := os.WriteFile(mcpPath, []byte("servers:\n  - name: alpha\n    builtin: demo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := profilesEnv(t, emu, llm, `
profiles:
  - name: wikidesk
    registered_servers: [wiki, ghost]
  - name: plain
    servers: [alpha]
channels:
  `+slackemu.ChannelGen+`: wikidesk
default: plain
`)
	for k, v := range mcpEnv(t, emu, llm, mcpPath, nil) {
		if _, ok := env[k]; !ok {
			env[k] = v // MCP_CONFIG, SECRET_KEY, MCP_ALLOW_PRIVATE_NETWORKS, …
		}
	}
	ctx, wait, stop := startMCPRun(t, emu, env)
	defer stop()

	seq := 0
	// serversOffered mentions the bot in channel (a new thread) and returns
	// the servers whose tools the model's request for it offered.
	serversOffered := func(channel string) []string {
		t.Helper()
		seq++
		marker := fmt.Sprintf("r%d", seq)
		emu.Mention(slackemu.TeamID, channel, slackemu.UserAlice, marker+" which tools?", "")
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
		var out []string
		for _, n := range tools {
			if s, _, ok := strings.Cut(n, "__"); ok && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		slices.Sort(out)
		return out
	}
	slash := func(text, want string) string {
		t.Helper()
		before := len(emu.Ephemerals(slackemu.UserAdmin))
		in := emu.SlashCommand(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAdmin, "/bobbin", text)
		if _, err := in.Wait(ctx); err != nil {
			t.Fatalf("/bobbin %s: %v", text, err)
		}
		var got []string
		if err := emu.WaitFor(ctx, func() bool {
			got = got[:0]
			for _, e := range emu.Ephemerals(slackemu.UserAdmin)[before:] {
				got = append(got, e.Text)
			}
			return strings.Contains(strings.Join(got, "\n"), want)
		}); err != nil {
			t.Fatalf("/bobbin %s: no answer containing %q; got %q", text, want, got)
		}
		return strings.Join(got, "\n")
	}

	// Before the registration: the profile names no server that exists.
	if got := serversOffered(slackemu.ChannelGen); len(got) != 0 {
		t.Errorf("#general before mcp add offered servers %v, want none", got)
	}
	show := slash("profile show wikidesk", "Servers registered from Slack")
	if !strings.Contains(show, "`wiki` (not registered in this workspace)") || !strings.Contains(show, "`ghost` (not registered in this workspace)") {
		t.Errorf("profile show before mcp add:\n%s", show)
	}

	slash("mcp add wiki "+wikiURL, "Registered `wiki`")
	if got := serversOffered(slackemu.ChannelGen); !slices.Equal(got, []string{"wiki"}) {
		t.Errorf("#general after mcp add offered servers %v, want [wiki] (its profile's registered server only)", got)
	}
	if got := serversOffered(other); !slices.Equal(got, []string{"alpha"}) {
		t.Errorf("#other (profile plain) offered servers %v, want [alpha]", got)
	}
	show = slash("profile show wikidesk", "Servers registered from Slack")
	if !strings.Contains(show, "`wiki` (registered here)") || !strings.Contains(show, "`ghost` (not registered in this workspace)") {
		t.Errorf("profile show after mcp add:\n%s", show)
	}
}
