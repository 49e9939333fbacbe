package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/provider"
)

// tabPrompts are the tab-level suggested prompts set in a DM (no
// thread_ts), as Slack applied them.
func tabPrompts(emu *slackemu.Server, dm string) int {
	n := 0
	for _, s := range emu.AssistantStatuses() {
		if s.Method == "setSuggestedPrompts" && s.Channel == dm && s.ThreadTS == "" && !s.Ignored {
			n++
		}
	}
	return n
}

// TestE2EAgentViewMessagesTab: under agent view, opening the Messages tab
// sets tab-level suggested prompts once per DM (not on every open); the
// channel app_context_changed reports reaches the model; a message in the
// tab is answered in its thread.
func TestE2EAgentViewMessagesTab(t *testing.T) {
	h := newHarness(t, harnessOpts{emu: slackemu.Options{AgentView: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dm := h.emu.DMWith(slackemu.TeamID, slackemu.UserAlice)
	for range 2 {
		p := h.emu.OpenMessagesTab(slackemu.TeamID, slackemu.UserAlice, slackemu.ChannelContext(slackemu.TeamID, slackemu.ChannelGen))
		if _, err := h.emu.WaitAck(ctx, p.Envelope); err != nil {
			t.Fatal(err)
		}
	}
	h.wait("tab prompts", func() bool { return tabPrompts(h.emu, dm) > 0 })

	p := h.emu.ChangeAppContext(slackemu.TeamID, slackemu.UserAlice, slackemu.ChannelContext(slackemu.TeamID, slackemu.ChannelRandom))
	if _, err := h.emu.WaitAck(ctx, p.Envelope); err != nil {
		t.Fatal(err)
	}
	q := h.emu.Message(slackemu.TeamID, dm, slackemu.UserAlice, "what is going on here?", "")
	reqs, err := h.llm.WaitRequests(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := lastUserText(t, reqs[0].Body); !strings.Contains(got, "viewing the channel #random (C222)") {
		t.Errorf("the model got %s, want the channel app_context_changed named (#random)", got)
	}
	if got := h.waitReply(dm, q.TS); !strings.Contains(got, "what is going on here?") {
		t.Errorf("reply in the tab's thread = %q", got)
	}
	// A third open after the answer: still one set of prompts.
	o := h.emu.OpenMessagesTab(slackemu.TeamID, slackemu.UserAlice)
	if _, err := h.emu.WaitAck(ctx, o.Envelope); err != nil {
		t.Fatal(err)
	}
	if n := tabPrompts(h.emu, dm); n != 1 {
		t.Errorf("suggested prompts set %d times for one DM, want once", n)
	}
}

// sessionSteps are a session's statuses with repeats folded.
func sessionSteps(emu *slackemu.Server, channel, thread string) []string {
	return slices.Compact(emu.SessionStatuses(channel, thread))
}

// TestE2EAgentSessionStatus: a turn with one approval moves its thread's
// agent session processing → suspended → processing → active, and a new
// session is titled after the question.
func TestE2EAgentSessionStatus(t *testing.T) {
	e := newApprovalEnv(t, nil)
	p := e.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "write the file please", "")
	pr := e.waitPrompt(slackemu.ChannelGen, p.TS, 1)
	e.wait("suspended", func() bool {
		s, ok := e.emu.AgentSession(slackemu.ChannelGen, p.TS)
		return ok && s.Status == slackemu.SessionSuspended
	})
	e.click(slackemu.UserAlice, slackemu.ChannelGen, pr.TS, "bobbin_allow_once")
	e.waitFinal(slackemu.ChannelGen, p.TS, 1)
	e.wait("the session done", func() bool {
		s, _ := e.emu.AgentSession(slackemu.ChannelGen, p.TS)
		return s.Status == slackemu.SessionActive
	})
	want := []string{"processing", "suspended", "processing", "active"}
	if got := sessionSteps(e.emu, slackemu.ChannelGen, p.TS); !slices.Equal(got, want) {
		t.Errorf("session statuses = %v, want %v", got, want)
	}
	if s, _ := e.emu.AgentSession(slackemu.ChannelGen, p.TS); s.Title != "write the file please" || len(s.Titles) != 1 {
		t.Errorf("session title = %q (titles %v), want the question, set once", s.Title, s.Titles)
	}
}

// TestE2EAgentSessionTitledByPerson: a person titles a thread's agent
// session in Slack (agent_session_title_changed, decoded from the raw
// event) before asking; the thread's first question, which would title it,
// leaves their title alone. The same event reporting the bot's own rename
// does not count as a person's: that thread is titled after its question.
func TestE2EAgentSessionTitledByPerson(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := func() string {
		t.Helper()
		p := h.emu.AssistantThreadStarted(slackemu.TeamID, slackemu.UserAlice, slackemu.DMAlice, slackemu.ChannelGen)
		if _, err := h.emu.WaitAck(ctx, p.Envelope); err != nil {
			t.Fatal(err)
		}
		return p.TS
	}
	ask := func(thread, text string) {
		t.Helper()
		h.emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, text, thread)
		h.wait("the answer to "+text, func() bool {
			got, _, done := h.replyText(slackemu.DMAlice, thread)
			return done && strings.Contains(got, text)
		})
	}
	titled := start()
	rt := h.emu.RetitleAgentSession(slackemu.TeamID, slackemu.DMAlice, titled, slackemu.UserAlice, "Trip prep")
	if _, err := h.emu.WaitAck(ctx, rt.Envelope); err != nil {
		t.Fatal(err)
	}
	ask(titled, "How do I rotate the keys?")
	// The first turn's title call is done before the next turn starts.
	ask(titled, "And after that?")

	other := start()
	self := h.emu.RetitleAgentSession(slackemu.TeamID, slackemu.DMAlice, other, slackemu.BotUserID, "Set by the app")
	if _, err := h.emu.WaitAck(ctx, self.Envelope); err != nil {
		t.Fatal(err)
	}
	ask(other, "What is new today?")
	ask(other, "Anything else?")

	titles := map[string][]string{}
	for _, s := range h.emu.AssistantStatuses() {
		if s.Method == "setTitle" {
			titles[s.ThreadTS] = append(titles[s.ThreadTS], s.Title)
		}
	}
	if got := titles[titled]; len(got) != 0 {
		t.Errorf("the bot retitled the session a person titled: %q", got)
	}
	if s, _ := h.emu.AgentSession(slackemu.DMAlice, titled); s.Title != "Trip prep" {
		t.Errorf("session title = %q (titles %q), want the person's", s.Title, s.Titles)
	}
	if got := titles[other]; len(got) != 1 || got[0] != "What is new today?" {
		t.Errorf("titles set by the bot in the other thread = %q, want its first question once", got)
	}
}

// TestE2EAgentSessionStoppedOnAnotherReplica: Slack's Stop
// (agent_session_stopped) delivered to a replica that does not run the
// turn stops it on the one that does, like our Stop button; the session
// leaves "processing"; a follow-up is answered.
func TestE2EAgentSessionStoppedOnAnotherReplica(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	release := h.llm.Hold(3)
	defer release()
	emu2, _ := secondReplica(t, h)

	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "a very long answer please", "")
	h.waitLiveReply(slackemu.ChannelGen, p.TS)
	h.wait("processing", func() bool {
		s, ok := h.emu.AgentSession(slackemu.ChannelGen, p.TS)
		return ok && s.Status == slackemu.SessionProcessing
	})
	st := emu2.StopAgentSession(slackemu.TeamID, slackemu.ChannelGen, p.TS, slackemu.UserAlice)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := emu2.WaitAck(ctx, st.Envelope); err != nil {
		t.Fatal(err)
	}
	got := h.waitReply(slackemu.ChannelGen, p.TS)
	if !strings.Contains(got, "Stopped by <@"+slackemu.UserAlice+">") {
		t.Errorf("reply after Slack's Stop on the other replica = %q", got)
	}
	h.wait("the session out of processing", func() bool {
		s, _ := h.emu.AgentSession(slackemu.ChannelGen, p.TS)
		return s.Status != slackemu.SessionProcessing
	})
	release()
	h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "and now a short one", p.TS)
	h.wait("the next answer", func() bool {
		text, _, done := h.replyText(slackemu.ChannelGen, p.TS)
		return done && strings.Contains(text, "and now a short one")
	})
	if text, _, _ := h.replyText(slackemu.ChannelGen, p.TS); strings.Count(text, "Stopped by") != 1 {
		t.Errorf("thread after the next turn = %q", text)
	}
}

// TestE2EAgentSessionStoppedNative: Slack's Stop on a native stream ends
// the turn; the reply says so and keeps what was streamed.
func TestE2EAgentSessionStoppedNative(t *testing.T) {
	h := newHarness(t, harnessOpts{bot: func(o *bot.Options) { o.StreamMode = bot.StreamNative }})
	release := h.llm.Hold(3)
	defer release()
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "stream and be stopped", "")
	h.wait("a stream", func() bool {
		r := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
		return len(r) == 1 && r[0].Streaming
	})
	st := h.emu.StopAgentSession(slackemu.TeamID, slackemu.ChannelGen, p.TS, slackemu.UserAlice)
	if len(st.Streams) != 1 {
		t.Fatalf("Slack stopped %d streams, want 1", len(st.Streams))
	}
	h.wait("the stop notice", func() bool {
		got, _, done := h.replyText(slackemu.ChannelGen, p.TS)
		return done && strings.Contains(got, "Stopped by <@"+slackemu.UserAlice+">")
	})
	h.wait("the session out of processing", func() bool {
		s, _ := h.emu.AgentSession(slackemu.ChannelGen, p.TS)
		return s.Status != slackemu.SessionProcessing
	})
}

// TestE2EAgentSessionsRefused: a workspace where Slack refuses
// agents.sessions.* answers as before; the bot stops asking after the
// first refusal.
func TestE2EAgentSessionsRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.emu.SetAgentSessionsRefused(slackemu.TeamID, "not_allowed")
	for _, q := range []string{"first question", "second question"} {
		p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, q, "")
		if got := h.waitReply(slackemu.ChannelGen, p.TS); !strings.Contains(got, q) {
			t.Errorf("reply = %q", got)
		}
	}
	if n := len(h.emu.Calls("agents.sessions.setStatus")); n != 1 {
		t.Errorf("%d agents.sessions.setStatus calls in a refusing workspace, want 1", n)
	}
}

// secondReplica runs a second bot on the harness's Redis with a Slack of
// its own (same workspace data), so events can be routed to it alone.
func secondReplica(t *testing.T, h *harness) (*slackemu.Server, *bot.Bot) {
	t.Helper()
	emu2 := slackemu.New(slackemu.Options{NoRateLimits: true})
	t.Cleanup(emu2.Close)
	opts := h.opts
	opts.APIURL = emu2.APIURL()
	second, err := bot.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- second.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := emu2.WaitFor(ctx, func() bool { return second.Ready(context.Background()) == nil }); err != nil {
		t.Fatal(err)
	}
	return emu2, second
}

// failTool is an allowed tool that always fails.
type failTool struct{}

func (failTool) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "broken", Description: "Fails.", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (failTool) Call(context.Context, json.RawMessage) (string, error) {
	return "", errors.New("the server is down")
}
func (failTool) Hints() agent.Hints { return agent.Hints{Server: "ops", Tool: "broken", Allowed: true} }

// TestE2ETaskCards: in a native stream a turn's tool calls are task cards
// that reach complete (error for the one that fails), titled with the
// tool and summarizing its arguments, and the steps carry a plan title.
func TestE2ETaskCards(t *testing.T) {
	for _, prov := range []string{"openai", "anthropic"} {
		t.Run(prov, func(t *testing.T) {
			h := newHarness(t, harnessOpts{provider: prov, bot: func(o *bot.Options) {
				o.StreamMode = bot.StreamNative
				o.Tools = staticTools{echoTool{}, failTool{}}
			}})
			h.llm.Enqueue(llmemu.Reply{ToolCalls: []llmemu.ToolCall{
				{Name: "echo", Arguments: `{"say":"<hi> & bye"}`},
				{Name: "broken", Arguments: "{}"},
			}}, llmemu.Reply{Text: "One worked, one did not."})
			p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "use both tools", "")
			h.wait("the answer", func() bool {
				got, _, done := h.replyText(slackemu.ChannelGen, p.TS)
				return done && got == "One worked, one did not."
			})
			r := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
			if len(r) != 1 {
				t.Fatalf("%d reply messages, want 1", len(r))
			}
			cards := h.emu.TaskCards(slackemu.ChannelGen, r[0].TS)
			if len(cards) != 2 {
				t.Fatalf("task cards = %+v, want 2", cards)
			}
			byTitle := map[string]slackemu.TaskCard{}
			for _, c := range cards {
				byTitle[c.Title] = c
			}
			echo, broken := byTitle["echo"], byTitle["ops/broken"]
			if echo.Status != "complete" || !slices.Contains(echo.Statuses, "in_progress") {
				t.Errorf("echo card = %+v, want in_progress then complete", echo)
			}
			if echo.Details != `{"say":"&lt;hi&gt; &amp; bye"}` {
				t.Errorf("echo card details = %q, want the escaped arguments", echo.Details)
			}
			if broken.Status != "error" {
				t.Errorf("broken card = %+v, want error", broken)
			}
			if r[0].PlanTitle == "" {
				t.Error("two steps, but no plan title")
			}
		})
	}
}

// TestE2EAgentSessionStoppedDuringApproval: Slack's Stop, delivered to a
// replica that does not run the turn, while the turn waits on an approval:
// the turn stops, its prompt no longer offers to run the tool, the tool
// never runs.
func TestE2EAgentSessionStoppedDuringApproval(t *testing.T) {
	e := newApprovalEnv(t, nil)
	emu2, _ := secondReplica(t, e.harness)
	p := e.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "write the file", "")
	pr := e.waitPrompt(slackemu.ChannelGen, p.TS, 1)
	st := emu2.StopAgentSession(slackemu.TeamID, slackemu.ChannelGen, p.TS, slackemu.UserAlice)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := emu2.WaitAck(ctx, st.Envelope); err != nil {
		t.Fatal(err)
	}
	e.wait("the stop notice", func() bool {
		got, _, done := e.replyText(slackemu.ChannelGen, p.TS)
		return done && strings.Contains(got, "Stopped by <@"+slackemu.UserAlice+">")
	})
	if got, _, _ := e.replyText(slackemu.ChannelGen, p.TS); strings.Contains(got, "Tool said") {
		t.Errorf("the model answered after Slack's Stop: %q", got)
	}
	e.wait("the prompt withdrawn", func() bool { return !hasButton(e.message(slackemu.ChannelGen, pr.TS), "bobbin_allow_once") })
	if n := e.tool.calls.Load(); n != 0 {
		t.Errorf("the tool ran %d times after Slack's Stop", n)
	}
	e.wait("the session out of processing", func() bool {
		s, _ := e.emu.AgentSession(slackemu.ChannelGen, p.TS)
		return s.Status != slackemu.SessionProcessing && s.Status != slackemu.SessionSuspended
	})
}
