package bot_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/internal/testlog"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// fakeTool is a tool that counts its calls.
type fakeTool struct {
	name  string
	hints agent.Hints
	calls atomic.Int32
	// onCall, when set, is called at the start of each call.
	onCall func()
}

func (f *fakeTool) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: f.name, Description: "writes a file",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}
}
func (f *fakeTool) Hints() agent.Hints { return f.hints }
func (f *fakeTool) Call(_ context.Context, in json.RawMessage) (string, error) {
	f.calls.Add(1)
	if f.onCall != nil {
		f.onCall()
	}
	return "wrote " + string(in), nil
}

type staticTools []agent.Tool

func (s staticTools) Tools(context.Context, access.Access) ([]agent.Tool, error) { return s, nil }

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = testlog.Buffer

// approvalEnv is the harness with a fake tool, a model that calls it once
// per user message and then reports the tool's answer, and a store of our
// own (known prefix, a secret key).
type approvalEnv struct {
	*harness
	tool   *fakeTool
	store  *session.Store
	prefix string
	logs   *syncBuffer
}

const toolName = "files__write"

func newApprovalEnv(t testing.TB, tweak func(*bot.Options)) *approvalEnv {
	t.Helper()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	prefix := "ap" + hex.EncodeToString(rnd[:])
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	store, err := session.Open(context.Background(), session.Options{URL: os.Getenv("REDIS_URL"), Prefix: prefix, LeaseTTL: 3 * time.Second, SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	env := &approvalEnv{tool: &fakeTool{name: toolName, hints: agent.Hints{Server: "files", Tool: "write", Destructive: true}},
		store: store, prefix: prefix, logs: &syncBuffer{}}
	env.harness = newHarness(t, harnessOpts{
		emu: slackemu.Options{NoRateLimits: true},
		bot: func(o *bot.Options) {
			o.Store = store
			o.Tools = staticTools{env.tool}
			o.Logger = slog.New(slog.NewJSONHandler(env.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			if tweak != nil {
				tweak(o)
			}
		},
	})
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("BOT_TEST_LOGS") != "" {
			t.Logf("bot logs:\n%s", env.logs.String())
		}
	})
	env.llm.SetResponder(func(r llmemu.Recorded) llmemu.Reply {
		if last := r.LastMessage(); last.Role == "tool" {
			return llmemu.Reply{Text: "Tool said: " + last.Text}
		}
		return llmemu.Reply{ToolCalls: []llmemu.ToolCall{{Name: toolName, Arguments: `{"path":"/tmp/<!channel>.txt"}`}}}
	})
	return env
}

// prompts are the approval messages in a thread, oldest first.
func (e *approvalEnv) prompts(channel, thread string) []slackemu.Message {
	var out []slackemu.Message
	for _, m := range e.emu.BotReplies(channel, thread) {
		if bytes.Contains(m.Blocks, []byte("bobbin_approval_head")) {
			out = append(out, m)
		}
	}
	return out
}

// waitPrompt waits for the n-th (1-based) prompt of the thread.
func (e *approvalEnv) waitPrompt(channel, thread string, n int) slackemu.Message {
	e.t.Helper()
	var m slackemu.Message
	e.wait("approval prompt", func() bool {
		ps := e.prompts(channel, thread)
		if len(ps) < n {
			return false
		}
		m = ps[n-1]
		return true
	})
	return m
}

// click presses a button of a message and waits for the ack.
func (e *approvalEnv) click(user, channel, ts, action string) {
	e.t.Helper()
	in, err := e.emu.Click(slackemu.TeamID, user, channel, ts, action, "")
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := in.Wait(ctx); err != nil {
		e.t.Fatalf("click %s: %v", action, err)
	}
}

// waitFinal waits for the n-th complete "Tool said:" answer in the thread.
func (e *approvalEnv) waitFinal(channel, thread string, n int) string {
	e.t.Helper()
	var text string
	e.wait("final answer", func() bool {
		var done bool
		text, _, done = e.replyText(channel, thread)
		return done && strings.Count(text, "Tool said:") >= n
	})
	return text
}

// toolResults are the tool messages the model received, in order.
func (e *approvalEnv) toolResults() []string {
	var out []string
	for _, r := range e.llm.Requests() {
		if last := r.LastMessage(); last.Role == "tool" {
			out = append(out, last.Text)
		}
	}
	return out
}

func (e *approvalEnv) message(channel, ts string) slackemu.Message {
	m, _ := e.emu.MessageAt(channel, ts)
	return m
}

// blocksText is a message's blocks as text, with JSON's HTML escapes undone.
func blocksText(m slackemu.Message) string {
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(m.Blocks))
}

func hasButton(m slackemu.Message, action string) bool {
	return bytes.Contains(m.Blocks, []byte(`"`+action+`"`))
}

func TestE2EApprovalAllowOnce(t *testing.T) {
	e := newApprovalEnv(t, nil)
	p := e.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "write the file", "")
	pr := e.waitPrompt(slackemu.ChannelGen, p.TS, 1)
	for _, s := range []string{"Allow once", "Always allow in this thread", "Deny", "destructive", "unverified server", "&lt;!channel&gt;"} {
		if !strings.Contains(blocksText(pr), s) {
			t.Errorf("prompt lacks %q: %s", s, pr.Blocks)
		}
	}
	if e.tool.calls.Load() != 0 {
		t.Fatal("the tool ran before anyone approved")
	}
	e.click(slackemu.UserAlice, slackemu.ChannelGen, pr.TS, "bobbin_allow_once")
	e.waitFinal(slackemu.ChannelGen, p.TS, 1)
	if n := e.tool.calls.Load(); n != 1 {
		t.Errorf("tool ran %d times, want 1", n)
	}
	if res := e.toolResults(); len(res) != 1 || !strings.Contains(res[0], "wrote") {
		t.Errorf("model saw tool results %q, want the tool's output", res)
	}
	m := e.message(slackemu.ChannelGen, pr.TS)
	if !strings.Contains(blocksText(m), "Allowed once by <@"+slackemu.UserAlice+">") || hasButton(m, "bobbin_allow_once") || hasButton(m, "bobbin_deny") {
		t.Errorf("prompt after the decision: %s", m.Blocks)
	}
	// Audited: the decision and the call.
	entries, err := e.store.RecentAudit(context.Background(), slackemu.TeamID, 10)
	if err != nil {
		t.Fatal(err)
	}
	events := map[string]bool{}
	for _, en := range entries {
		events[en.Fields["event"]] = true
		if en.Fields["event"] == "tool_call" && (en.Fields["tool"] != toolName || en.Fields["outcome"] != "ok" || en.Fields["args_digest"] == "" || en.Fields["duration_ms"] == "") {
			t.Errorf("tool_call audit entry = %v", en.Fields)
		}
	}
	for _, ev := range []string{"approval_requested", "approval_decided", "tool_call"} {
		if !events[ev] {
			t.Errorf("no %s audit entry in %v", ev, entries)
		}
	}
	if !strings.Contains(e.logs.String(), `"event":"tool_call"`) {
		t.Error("no audit log line for the tool call")
	}
}

// TestE2EApprovalAnswerContinuesBelowPrompt: what the model says before a
// tool call stays in the message above the approval prompt; what it says
// after the tool ran is posted below the prompt, so the thread reads in
// order.
func TestE2EApprovalAnswerContinuesBelowPrompt(t *testing.T) {
	e := newApprovalEnv(t, nil)
	e.llm.SetResponder(func(r llmemu.Recorded) llmemu.Reply {
		if last := r.LastMessage(); last.Role == "tool" {
			return llmemu.Reply{Text: "Tool said: " + last.Text}
		}
		return llmemu.Reply{Text: "Let me write that file.", ToolCalls: []llmemu.ToolCall{{Name: toolName, Arguments: `{"path":"/tmp/x.txt"}`}}}
	})
	p := e.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "write the file", "")
	pr := e.waitPrompt(slackemu.ChannelGen, p.TS, 1)
	e.click(slackemu.UserAlice, slackemu.ChannelGen, pr.TS, "bobbin_allow_once")
	e.waitFinal(slackemu.ChannelGen, p.TS, 1)
	var order []string
	for _, m := range e.emu.BotReplies(slackemu.ChannelGen, p.TS) {
		text, _ := messageText(m)
		switch {
		case m.TS == pr.TS:
			order = append(order, "prompt")
		case strings.Contains(text, "Let me write") && strings.Contains(text, "Tool said"):
			order = append(order, "both")
		case strings.Contains(text, "Let me write"):
			order = append(order, "before")
		case strings.Contains(text, "Tool said"):
			order = append(order, "after")
		}
	}
	if strings.Join(order, ",") != "before,prompt,after" {
		t.Errorf("thread order = %v, want [before prompt after]", order)
	}
}

func TestE2EApprovalDeny(t *testing.T) {
	e := newApprovalEnv(t, nil)
	p := e.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "write the file", "")
	pr := e.waitPrompt(slackemu.ChannelGen, p.TS, 1)
	e.click(slackemu.UserAlice, slackemu.ChannelGen, pr.TS, "bobbin_deny")
	e.waitFinal(slackemu.ChannelGen, p.TS, 1)
	if n := e.tool.calls.Load(); n != 0 {
		t.Errorf("denied tool ran %d times", n)
	}
	if res := e.toolResults(); len(res) != 1 || !strings.Contains(res[0], "declined") {
		t.Errorf("model saw %q, want the refusal", res)
	}
	if m := e.message(slackemu.ChannelGen, pr.TS); !strings.Contains(blocksText(m), "Denied by") || hasButton(m, "bobbin_allow_once") {
		t.Errorf("prompt after deny: %s", m.Blocks)
	}
}

func TestE2EApprovalAlwaysThenRevoke(t *testing.T) {
	e := newApprovalEnv(t, nil)
	ch := slackemu.ChannelGen
	p := e.emu.Mention(slackemu.TeamID, ch, slackemu.UserAlice, "write the file", "")
	pr := e.waitPrompt(ch, p.TS, 1)
	e.click(slackemu.UserAlice, ch, pr.TS, "bobbin_allow_thread")
	e.waitFinal(ch, p.TS, 1)

	// The next call in the thread runs without asking.
	e.emu.Message(slackemu.TeamID, ch, slackemu.UserAlice, "and again", p.TS)
	e.waitFinal(ch, p.TS, 2)
	if n := len(e.prompts(ch, p.TS)); n != 1 {
		t.Errorf("%d prompts after an always-allow, want 1", n)
	}
	if n := e.tool.calls.Load(); n != 2 {
		t.Errorf("tool ran %d times, want 2", n)
	}

	// Bob may not revoke; Alice may.
	m := e.message(ch, pr.TS)
	if !hasButton(m, "bobbin_revoke") || !strings.Contains(blocksText(m), "Revoke") {
		t.Fatalf("no Revoke button after always-allow: %s", m.Blocks)
	}
	e.click(slackemu.UserBob, ch, pr.TS, "bobbin_revoke")
	if !hasButton(e.message(ch, pr.TS), "bobbin_revoke") {
		t.Error("a non-requester revoked the grant")
	}
	e.click(slackemu.UserAlice, ch, pr.TS, "bobbin_revoke")
	if m := e.message(ch, pr.TS); hasButton(m, "bobbin_revoke") || !strings.Contains(blocksText(m), "Revoked by") {
		t.Errorf("prompt after revoke: %s", m.Blocks)
	}

	// After the revoke it asks again.
	e.emu.Message(slackemu.TeamID, ch, slackemu.UserAlice, "once more", p.TS)
	pr3 := e.waitPrompt(ch, p.TS, 2)
	e.click(slackemu.UserAlice, ch, pr3.TS, "bobbin_deny")
	e.waitFinal(ch, p.TS, 3)
	if n := e.tool.calls.Load(); n != 2 {
		t.Errorf("tool ran %d times after revoke and deny, want 2", n)
	}
}

func TestE2EApprovalOthersCannotDecide(t *testing.T) {
	e := newApprovalEnv(t, nil)
	ch := slackemu.ChannelGen
	p := e.emu.Mention(slackemu.TeamID, ch, slackemu.UserAlice, "write the file", "")
	pr := e.waitPrompt(ch, p.TS, 1)
	for _, u := range []string{slackemu.UserBob, slackemu.UserGuest, slackemu.UserStranger, slackemu.UserOtherBot, slackemu.UserDeleted} {
		e.click(u, ch, pr.TS, "bobbin_allow_once")
		var eph []slackemu.Ephemeral
		e.wait("explanation for "+u, func() bool { eph = e.emu.Ephemerals(u); return len(eph) > 0 })
		if !strings.Contains(eph[len(eph)-1].Text, "Only the person who asked") {
			t.Errorf("%s was told %q", u, eph[len(eph)-1].Text)
		}
	}
	if n := e.tool.calls.Load(); n != 0 {
		t.Fatalf("tool ran %d times after clicks by others", n)
	}
	if !hasButton(e.message(ch, pr.TS), "bobbin_allow_once") {
		t.Fatal("the prompt closed after clicks by others")
	}
	// An admin may.
	e.click(slackemu.UserAdmin, ch, pr.TS, "bobbin_allow_once")
	e.waitFinal(ch, p.TS, 1)
	if n := e.tool.calls.Load(); n != 1 {
		t.Errorf("tool ran %d times after the admin's click, want 1", n)
	}
	if m := e.message(ch, pr.TS); !strings.Contains(blocksText(m), "by <@"+slackemu.UserAdmin+">") {
		t.Errorf("prompt does not say the admin decided: %s", m.Blocks)
	}
}

// Clicks spread over two replicas (two bots on one Redis) decide once and
// run the tool once.
func TestE2EApprovalDoubleClickTwoReplicas(t *testing.T) {
	e := newApprovalEnv(t, nil)
	e.startReplica(t)

	ch := slackemu.ChannelGen
	p := e.emu.Mention(slackemu.TeamID, ch, slackemu.UserAlice, "write the file", "")
	pr := e.waitPrompt(ch, p.TS, 1)
	var ins []*slackemu.Interaction
	for _, c := range []struct{ user, action string }{
		{slackemu.UserAlice, "bobbin_allow_once"}, {slackemu.UserAlice, "bobbin_allow_once"},
		{slackemu.UserAdmin, "bobbin_allow_once"}, {slackemu.UserAlice, "bobbin_allow_thread"},
	} {
		in, err := e.emu.Click(slackemu.TeamID, c.user, ch, pr.TS, c.action, "")
		if err != nil {
			t.Fatal(err)
		}
		ins = append(ins, in)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	for _, in := range ins {
		if _, err := in.Wait(wctx); err != nil {
			t.Fatal(err)
		}
	}
	e.waitFinal(ch, p.TS, 1)
	if n := e.tool.calls.Load(); n != 1 {
		t.Errorf("tool ran %d times after four clicks, want 1", n)
	}
	if n := len(e.toolResults()); n != 1 {
		t.Errorf("model got %d tool results, want 1", n)
	}
}

func TestE2EApprovalTimeout(t *testing.T) {
	e := newApprovalEnv(t, func(o *bot.Options) { o.ApprovalTimeout = 1500 * time.Millisecond })
	ch := slackemu.ChannelGen
	p := e.emu.Mention(slackemu.TeamID, ch, slackemu.UserAlice, "write the file", "")
	pr := e.waitPrompt(ch, p.TS, 1)
	e.waitFinal(ch, p.TS, 1)
	if n := e.tool.calls.Load(); n != 0 {
		t.Errorf("tool ran %d times without an answer", n)
	}
	if res := e.toolResults(); len(res) != 1 || !strings.Contains(res[0], "in time") {
		t.Errorf("model saw %q, want a timeout refusal", res)
	}
	if m := e.message(ch, pr.TS); !strings.Contains(blocksText(m), "Nobody answered in time") || hasButton(m, "bobbin_allow_once") {
		t.Errorf("prompt after the timeout: %s", m.Blocks)
	}
	// A late (replayed) click changes nothing and is told so.
	_, rest, _ := strings.Cut(string(pr.Blocks), `"value":"`)
	id, _, _ := strings.Cut(rest, `"`)
	in := e.emu.ClickRaw(slackemu.TeamID, slackemu.UserAlice, ch, pr.TS, map[string]any{"type": "button", "block_id": "bobbin_approval_actions", "action_id": "bobbin_allow_once", "value": id})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := in.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	e.wait("late-click explanation", func() bool { return len(e.emu.Ephemerals(slackemu.UserAlice)) > 0 })
	if got := e.emu.Ephemerals(slackemu.UserAlice)[0].Text; !strings.Contains(got, "already answered") || !strings.Contains(got, "Nobody answered in time") {
		t.Errorf("late click told %q", got)
	}
	if n := e.tool.calls.Load(); n != 0 {
		t.Errorf("a late click ran the tool")
	}
}

// fakeMCP is an admin.MCP with one probe-able server; it records what it
// was given.
type fakeMCP struct {
	mu      sync.Mutex
	headers map[string]string
	probed  int
	regs    map[string]servers.Registration // team/name → what the bot registered
}

func (f *fakeMCP) Status(context.Context, string) []servers.Status { return nil }
func (f *fakeMCP) ServerTools(context.Context, string, string) ([]servers.ToolInfo, error) {
	return nil, servers.ErrUnknownServer
}
func (f *fakeMCP) Probe(_ context.Context, name, url string, headers map[string]string) ([]servers.ToolInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probed++
	f.headers = headers
	return []servers.ToolInfo{{Name: "search", Description: "Searches <!here> things", Hints: agent.Hints{ReadOnly: true}}}, nil
}
func (f *fakeMCP) Approve(context.Context, string, string) ([]servers.ToolInfo, error) {
	return nil, nil
}
func (f *fakeMCP) Invalidate(string)            {}
func (f *fakeMCP) ValidateURL(raw string) error { return nil }
func (f *fakeMCP) Register(_ context.Context, team string, r servers.Registration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.regs[team+"/"+r.Name]; ok {
		return session.ErrExists
	}
	if f.regs == nil {
		f.regs = map[string]servers.Registration{}
	}
	f.regs[team+"/"+r.Name] = r
	return nil
}
func (f *fakeMCP) registration(team, name string) (servers.Registration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.regs[team+"/"+name]
	return r, ok
}
func (f *fakeMCP) Registered(_ context.Context, team, name string) error {
	if _, ok := f.registration(team, name); !ok {
		return session.ErrNotFound
	}
	return nil
}
func (f *fakeMCP) SetScope(_ context.Context, team, name string, s *access.Scope) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.regs[team+"/"+name]
	if !ok {
		return session.ErrNotFound
	}
	r.Scope = access.Scope{}
	if s != nil {
		r.Scope = *s
	}
	f.regs[team+"/"+name] = r
	return nil
}
func (f *fakeMCP) Unregister(_ context.Context, team, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.regs[team+"/"+name]; !ok {
		return session.ErrNotFound
	}
	delete(f.regs, team+"/"+name)
	return nil
}

// slash runs /bobbin and returns everything the person was shown after it.
func (e *approvalEnv) slash(user, text string, wantAfter int) []slackemu.Ephemeral {
	e.t.Helper()
	before := len(e.emu.Ephemerals(user))
	in := e.emu.SlashCommand(slackemu.TeamID, slackemu.ChannelGen, user, "/bobbin", text)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := in.Wait(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(res.Envelope.AckPayload) >= 20<<10 {
		e.t.Errorf("ack of %d bytes", len(res.Envelope.AckPayload))
	}
	var out []slackemu.Ephemeral
	e.wait("answer to /bobbin "+text, func() bool {
		out = e.emu.Ephemerals(user)[before:]
		return len(out) >= wantAfter
	})
	return out
}

func joinEph(es []slackemu.Ephemeral) string {
	var s []string
	for _, x := range es {
		s = append(s, x.Text)
	}
	return strings.Join(s, "\n")
}

func TestE2ESlashAddRefusalsAndSecrets(t *testing.T) {
	mcp := &fakeMCP{}
	e := newApprovalEnv(t, func(o *bot.Options) { o.MCP = mcp })
	const secret = "sk-live-VERYSECRET-4242"

	if got := joinEph(e.slash(slackemu.UserAlice, "mcp add docs https://mcp.example.com/mcp", 1)); !strings.Contains(got, "Only workspace admins") {
		t.Errorf("non-admin add: %q", got)
	}
	if got := joinEph(e.slash(slackemu.UserGuest, "audit", 1)); !strings.Contains(got, "Only workspace admins") {
		t.Errorf("guest audit: %q", got)
	}
	if got := joinEph(e.slash(slackemu.UserAdmin, "mcp add docs npx -y @evil/server", 1)); !strings.Contains(got, "Only HTTPS URLs") {
		t.Errorf("command-like add: %q", got)
	}
	if mcp.probed != 0 {
		t.Fatalf("refused commands probed %d times", mcp.probed)
	}
	got := joinEph(e.slash(slackemu.UserAdmin, "mcp add docs https://mcp.example.com/mcp Authorization: Bearer "+secret, 2))
	if !strings.Contains(got, "Registered `docs`") || !strings.Contains(got, "search") || !strings.Contains(got, "&lt;!here&gt;") {
		t.Errorf("admin add answered %q", got)
	}
	if mcp.headers["Authorization"] != "Bearer "+secret {
		t.Errorf("probe got headers %v", mcp.headers)
	}
	// The MCP manager stores the registration (mcp's record; its tests
	// cover the bytes and the sealed secrets): the bot hands it over.
	reg, ok := mcp.registration(slackemu.TeamID, "docs")
	if !ok || reg.URL != "https://mcp.example.com/mcp" || reg.Headers["Authorization"] != "Bearer "+secret || reg.CreatedBy != slackemu.UserAdmin ||
		!slices.Equal(reg.Tools, []string{"search"}) {
		t.Errorf("registered %+v, %v", reg, ok)
	}
	if _, ok := mcp.registration(slackemu.TeamID2, "docs"); ok {
		t.Error("the registration is visible in another workspace")
	}
	if got := joinEph(e.slash(slackemu.UserAdmin, "audit", 1)); !strings.Contains(got, "mcp_add") {
		t.Errorf("audit shows %q", got)
	}

	// The secret is nowhere in clear: Slack calls, logs, Redis.
	for _, c := range e.emu.Journal() {
		if raw, _ := json.Marshal(c.Params); bytes.Contains(raw, []byte("VERYSECRET")) {
			t.Errorf("Slack call %s carries the secret", c.Method)
		}
	}
	for _, u := range []string{slackemu.UserAdmin, slackemu.UserAlice} {
		if strings.Contains(joinEph(e.emu.Ephemerals(u)), "VERYSECRET") {
			t.Errorf("an answer to %s shows the secret", u)
		}
	}
	if strings.Contains(e.logs.String(), "VERYSECRET") {
		t.Error("the secret is in the logs")
	}
	if os.Getenv("REDIS_URL") == "" {
		return // the embedded Redis of the store is not reachable from here
	}
	ro, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(ro)
	defer rdb.Close()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, e.prefix+"*").Result()
	if err != nil {
		t.Skipf("cannot scan Redis: %v", err)
	}
	if len(keys) == 0 {
		t.Fatal("no keys under the test prefix")
	}
	for _, k := range keys {
		dump, err := rdb.Dump(ctx, k).Result()
		if err == nil && strings.Contains(dump, "VERYSECRET") {
			t.Errorf("Redis key %s holds the secret in clear", k)
		}
	}
}

func TestE2ESlashAddModal(t *testing.T) {
	mcp := &fakeMCP{}
	e := newApprovalEnv(t, func(o *bot.Options) { o.MCP = mcp })
	in := e.emu.SlashCommand(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAdmin, "/bobbin", "mcp add")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := in.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	views := e.emu.Views(slackemu.TeamID, slackemu.UserAdmin)
	if len(views) != 1 {
		t.Fatalf("%d views open, want the form", len(views))
	}
	v := views[0]
	submit := func(vals map[string]map[string]string) slackemu.AckResult {
		t.Helper()
		si, err := e.emu.SubmitView(slackemu.TeamID, slackemu.UserAdmin, v.ID, vals)
		if err != nil {
			t.Fatal(err)
		}
		res, err := si.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := submit(map[string]map[string]string{
		"mcp_name": {"name": "bad name!"}, "mcp_url": {"url": "/usr/bin/server --stdio"}, "mcp_headers": {"headers": "Host: x"},
	})
	if res.ResponseAction != "errors" || res.Errors["mcp_name"] == "" || res.Errors["mcp_url"] == "" || res.Errors["mcp_headers"] == "" {
		t.Fatalf("bad form: action %q errors %v", res.ResponseAction, res.Errors)
	}
	res = submit(map[string]map[string]string{
		"mcp_name": {"name": "wiki"}, "mcp_url": {"url": "https://wiki.example.com/mcp"}, "mcp_headers": {"headers": "X-Api-Key: MODALSECRET99"},
	})
	if res.ResponseAction != "" {
		t.Fatalf("good form: action %q errors %v", res.ResponseAction, res.Errors)
	}
	var got []slackemu.Ephemeral
	e.wait("result of the form", func() bool { got = e.emu.Ephemerals(slackemu.UserAdmin); return len(got) > 0 })
	if s := joinEph(got); !strings.Contains(s, "Registered `wiki`") || strings.Contains(s, "MODALSECRET") {
		t.Errorf("form result %q", s)
	}
	for _, c := range e.emu.Journal() {
		if raw, _ := json.Marshal(c.Params); bytes.Contains(raw, []byte("MODALSECRET")) {
			t.Errorf("Slack call %s carries the secret", c.Method)
		}
	}
	if reg, ok := mcp.registration(slackemu.TeamID, "wiki"); !ok || reg.Headers["X-Api-Key"] != "MODALSECRET99" {
		t.Errorf("not registered: %+v", reg)
	}
}

// startReplica runs a second bot on the same Slack and Redis.
func (e *approvalEnv) startReplica(t *testing.T) {
	t.Helper()
	second, err := bot.New(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- second.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.wait("second replica connected", func() bool { return second.Ready(context.Background()) == nil })
}

// Stop while a prompt waits: the approval is withdrawn, the prompt says so,
// the tool never runs, whichever replica the click reaches.
func TestE2EApprovalWithdrawnOnStop(t *testing.T) {
	for _, replicas := range []int{1, 2} {
		t.Run(fmt.Sprint(replicas, " replicas"), func(t *testing.T) { testWithdrawnOnStop(t, replicas) })
	}
}

func testWithdrawnOnStop(t *testing.T, replicas int) {
	e := newApprovalEnv(t, nil)
	if replicas > 1 {
		e.startReplica(t)
	}
	ch := slackemu.ChannelGen
	p := e.emu.Mention(slackemu.TeamID, ch, slackemu.UserAlice, "write the file", "")
	pr := e.waitPrompt(ch, p.TS, 1)
	var stopTS string
	e.wait("a Stop button", func() bool {
		for _, m := range e.emu.BotReplies(ch, p.TS) {
			if hasButton(m, "bobbin_stop") {
				stopTS = m.TS
				return true
			}
		}
		return false
	})
	e.click(slackemu.UserAlice, ch, stopTS, "bobbin_stop")
	e.wait("withdrawn prompt", func() bool {
		return strings.Contains(blocksText(e.message(ch, pr.TS)), "Withdrawn")
	})
	m := e.message(ch, pr.TS)
	if hasButton(m, "bobbin_allow_once") || !strings.Contains(blocksText(m), "stopped by <@"+slackemu.UserAlice+">") {
		t.Errorf("prompt after Stop: %s", m.Blocks)
	}
	pending, err := e.store.PendingApprovals(context.Background(), session.ThreadKey{Team: slackemu.TeamID, Channel: ch, ThreadTS: p.TS})
	if err != nil || len(pending) != 0 {
		t.Errorf("pending approvals after Stop: %v, %v", pending, err)
	}
	if n := e.tool.calls.Load(); n != 0 {
		t.Errorf("tool ran %d times after Stop", n)
	}
}

// Long arguments: the prompt shows them cut, the modal shows them whole.
func TestE2EApprovalViewFullArguments(t *testing.T) {
	e := newApprovalEnv(t, nil)
	long := strings.Repeat("0123456789", 300) + "END<@U999>"
	args, _ := json.Marshal(map[string]string{"path": "/tmp/x", "content": long})
	e.llm.SetResponder(func(r llmemu.Recorded) llmemu.Reply {
		if last := r.LastMessage(); last.Role == "tool" {
			return llmemu.Reply{Text: "Tool said: no."} // short: the arguments are long
		}
		return llmemu.Reply{ToolCalls: []llmemu.ToolCall{{Name: toolName, Arguments: string(args)}}}
	})
	ch := slackemu.ChannelGen
	p := e.emu.Mention(slackemu.TeamID, ch, slackemu.UserAlice, "write a long file", "")
	pr := e.waitPrompt(ch, p.TS, 1)
	if strings.Contains(blocksText(pr), "END") || !hasButton(pr, "bobbin_view_args") || !strings.Contains(blocksText(pr), "View full arguments") {
		t.Fatalf("prompt with long arguments: %s", pr.Blocks)
	}
	// Anyone of the workspace may look.
	e.click(slackemu.UserBob, ch, pr.TS, "bobbin_view_args")
	var views []slackemu.View
	e.wait("arguments modal", func() bool { views = e.emu.Views(slackemu.TeamID, slackemu.UserBob); return len(views) > 0 })
	s := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(views[0].Blocks))
	if !strings.Contains(s, "END&lt;@U999&gt;") || strings.Contains(s, "<@U999>") {
		t.Errorf("modal does not show the whole, escaped arguments: …%s", s[max(0, len(s)-300):])
	}
	if !hasButton(e.message(ch, pr.TS), "bobbin_allow_once") {
		t.Error("viewing the arguments closed the prompt")
	}
	e.click(slackemu.UserAlice, ch, pr.TS, "bobbin_deny")
	e.waitFinal(ch, p.TS, 1)
}

// A bot shutting down while a prompt waits closes it: the agent records the
// call as interrupted, so a later click must not look like it ran the tool.
func TestE2EApprovalWithdrawnOnShutdown(t *testing.T) {
	e := newApprovalEnv(t, func(o *bot.Options) { o.ShutdownGrace = time.Second })
	ch := slackemu.ChannelGen
	p := e.emu.Mention(slackemu.TeamID, ch, slackemu.UserAlice, "write the file", "")
	pr := e.waitPrompt(ch, p.TS, 1)
	e.stop()
	m := e.message(ch, pr.TS)
	if hasButton(m, "bobbin_allow_once") || !strings.Contains(blocksText(m), "the bot restarted") {
		t.Errorf("prompt after shutdown: %s", m.Blocks)
	}
	pending, err := e.store.PendingApprovals(context.Background(), session.ThreadKey{Team: slackemu.TeamID, Channel: ch, ThreadTS: p.TS})
	if err != nil || len(pending) != 0 {
		t.Errorf("pending approvals after shutdown: %v, %v", pending, err)
	}
	if n := e.tool.calls.Load(); n != 0 {
		t.Errorf("tool ran %d times", n)
	}
}

// BenchmarkApprovalClickToRun measures, on the emulator and Redis, the time
// from an "Allow once" click to the tool starting on the waiting turn (ack,
// role check, compare-and-set, wake-up through Redis). The click comes as
// soon as the prompt shows, so it often beats the approval record and pays
// the short retry for that race.
func BenchmarkApprovalClickToRun(b *testing.B) {
	e := newApprovalEnv(b, func(o *bot.Options) { o.UserTurnsPerMinute = 1 << 20 })
	started := make(chan time.Time, 1)
	e.tool.onCall = func() { started <- time.Now() }
	ch := slackemu.ChannelGen
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		p := e.emu.Mention(slackemu.TeamID, ch, slackemu.UserAlice, "write the file", "")
		pr := e.waitPrompt(ch, p.TS, 1)
		t0 := time.Now()
		in, err := e.emu.Click(slackemu.TeamID, slackemu.UserAlice, ch, pr.TS, "bobbin_allow_once", "")
		if err != nil {
			b.Fatal(err)
		}
		total += (<-started).Sub(t0)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := in.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		e.waitFinal(ch, p.TS, 1)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/click-to-run")
}
