package bot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/provider"
)

// TestE2EDisconnectDuringReply: Slack asks for a refresh while a reply
// streams; the reply completes and an event sent meanwhile is not lost.
func TestE2EDisconnectDuringReply(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	release := h.llm.Hold(3)
	defer release()
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "tell me a story", "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.llm.WaitHeld(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := h.emu.Disconnect("refresh_requested"); n == 0 {
		t.Fatal("no connection got the disconnect")
	}
	q := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserBob, "while reconnecting", "")
	release()
	first := h.waitReply(slackemu.ChannelGen, p.TS)
	second := h.waitReply(slackemu.ChannelGen, q.TS)
	if !strings.Contains(first, "tell me a story") || !strings.Contains(second, "while reconnecting") {
		t.Errorf("replies incomplete:\n%q\n%q", first, second)
	}
	if n := len(h.emu.BotReplies(slackemu.ChannelGen, p.TS)); n != 1 {
		t.Errorf("%d replies to the first mention, want 1", n)
	}
}

// TestE2EStopButton: the requester stops a streaming reply.
func TestE2EStopButton(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	release := h.llm.Hold(3)
	defer release()
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "a very long answer please", "")
	replyTS := h.waitLiveReply(slackemu.ChannelGen, p.TS)
	// Someone else may not stop it.
	if _, err := h.emu.Click(slackemu.TeamID, slackemu.UserBob, slackemu.ChannelGen, replyTS, "bobbin_stop", ""); err != nil {
		t.Fatal(err)
	}
	h.wait("an explanation for bob", func() bool { return len(h.emu.Ephemerals(slackemu.UserBob)) > 0 })
	if _, err := h.emu.Click(slackemu.TeamID, slackemu.UserAlice, slackemu.ChannelGen, replyTS, "bobbin_stop", ""); err != nil {
		t.Fatal(err)
	}
	got := h.waitReply(slackemu.ChannelGen, p.TS)
	if !strings.Contains(got, "Stopped by <@"+slackemu.UserAlice+">") {
		t.Errorf("stopped reply = %q", got)
	}
}

// TestE2EStopWho: Stop follows the approval rule. Guests, strangers and
// bots are refused with an explanation; a workspace admin known only
// from users.info (not in BOT_ADMINS) may stop someone else's answer.
func TestE2EStopWho(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	release := h.llm.Hold(3)
	defer release()
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "a very long answer please", "")
	replyTS := h.waitLiveReply(slackemu.ChannelGen, p.TS)
	for _, tt := range []struct{ name, user, want string }{
		{"guest", slackemu.UserGuest, "guests can't"},
		{"stranger", slackemu.UserStranger, "another workspace"},
		{"bot", slackemu.UserOtherBot, "bots can't"},
		{"member", slackemu.UserBob, "Only the person who asked"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := h.emu.Click(slackemu.TeamID, tt.user, slackemu.ChannelGen, replyTS, "bobbin_stop", ""); err != nil {
				t.Fatal(err)
			}
			var got string
			h.wait("an explanation for the "+tt.name, func() bool {
				eph := h.emu.Ephemerals(tt.user)
				if len(eph) == 0 {
					return false
				}
				got = eph[len(eph)-1].Text
				return true
			})
			if !strings.Contains(got, tt.want) || !strings.Contains(got, "stop this answer") {
				t.Errorf("explanation = %q, want it to contain %q", got, tt.want)
			}
			if text, _, done := h.replyText(slackemu.ChannelGen, p.TS); done || strings.Contains(text, "Stopped by") {
				t.Errorf("the %s stopped the answer: %q", tt.name, text)
			}
		})
	}
	if _, err := h.emu.Click(slackemu.TeamID, slackemu.UserAdmin, slackemu.ChannelGen, replyTS, "bobbin_stop", ""); err != nil {
		t.Fatal(err)
	}
	got := h.waitReply(slackemu.ChannelGen, p.TS)
	if !strings.Contains(got, "Stopped by <@"+slackemu.UserAdmin+">") {
		t.Errorf("reply stopped by the admin = %q", got)
	}
}

// TestE2ENativeStream: native mode streams with chat.startStream and
// appendStream, with recipients, and stops the stream.
func TestE2ENativeStream(t *testing.T) {
	h := newHarness(t, harnessOpts{bot: func(o *bot.Options) { o.StreamMode = bot.StreamNative }})
	h.llm.SetTokenInterval(3 * time.Millisecond)
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "stream it natively", "")
	got := h.waitReply(slackemu.ChannelGen, p.TS)
	if want := h.lastAnswer(); got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}
	r := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
	if len(r) != 1 || r[0].Via != "chat.startStream" || r[0].StreamEnded != "stopped" {
		t.Fatalf("reply not a stopped native stream: %+v", r)
	}
	if r[0].RecipientTeam != slackemu.TeamID || r[0].RecipientUser != slackemu.UserAlice {
		t.Errorf("recipients = %s/%s", r[0].RecipientTeam, r[0].RecipientUser)
	}
}

// TestE2ENativeStreamExpires: a stream that dies mid-answer is finished
// with edits, without losing or repeating text.
func TestE2ENativeStreamExpires(t *testing.T) {
	h := newHarness(t, harnessOpts{bot: func(o *bot.Options) { o.StreamMode = bot.StreamNative }})
	release := h.llm.Hold(5)
	defer release()
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "this stream will expire", "")
	var ts string
	h.wait("a stream", func() bool {
		r := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
		if len(r) == 1 && r[0].Streaming {
			ts = r[0].TS
			return true
		}
		return false
	})
	h.emu.ExpireStream(slackemu.ChannelGen, ts)
	release()
	want := h.lastAnswer()
	h.wait("the whole answer", func() bool {
		got, _, _ := h.replyText(slackemu.ChannelGen, p.TS)
		return got == want
	})
	if n := len(h.emu.BotReplies(slackemu.ChannelGen, p.TS)); n != 1 {
		t.Errorf("%d reply messages, want 1", n)
	}
}

// TestE2EMalformedFrames: junk frames and odd payloads are logged, never
// crash the bot, and real events still get answered.
func TestE2EMalformedFrames(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	frames := [][]byte{
		nil,
		[]byte("not json"),
		[]byte(`{"type":"events_api","envelope_id":"x1","payload":"a string"}`),
		[]byte(`{"type":"events_api","envelope_id":"x2","payload":{"type":"event_callback","event":[1,2]}}`),
		[]byte(`{"type":"interactive","envelope_id":"x3","payload":{"type":"block_actions","actions":"nope"}}`),
		[]byte(`{"type":"slash_commands","envelope_id":"x4","payload":[]}`),
		[]byte(`{"type":"mystery","envelope_id":"x5"}`),
		[]byte(strings.Repeat("[", 10000)),
	}
	for _, f := range frames {
		if err := h.emu.SendRaw("", f, false); err != nil {
			t.Fatal(err)
		}
	}
	_ = h.emu.SendRaw("", []byte{0xff, 0x00, 0x01}, true)
	h.emu.DeliverEvent(slackemu.TeamID, map[string]any{"type": "app_mention", "text": 42, "channel": []int{1}})
	h.emu.DeliverEvent(slackemu.TeamID, map[string]any{"type": "message", "subtype": "message_changed", "channel": slackemu.ChannelGen})
	h.emu.DeliverEnvelope("interactive", slackemu.TeamID, map[string]any{"type": "block_actions", "actions": []any{map[string]any{"action_id": "bobbin_stop", "value": "garbage"}}}, false)
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "still there?", "")
	if got := h.waitReply(slackemu.ChannelGen, p.TS); !strings.Contains(got, "still there?") {
		t.Errorf("reply = %q", got)
	}
}

// TestE2EAssistantThread: the assistant pane gets suggested prompts, and a
// message in the assistant thread is answered with a status meanwhile.
func TestE2EAssistantThread(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	p := h.emu.AssistantThreadStarted(slackemu.TeamID, slackemu.UserAlice, slackemu.DMAlice, slackemu.ChannelGen)
	h.wait("suggested prompts", func() bool {
		for _, s := range h.emu.AssistantStatuses() {
			if s.Method == "assistant.threads.setSuggestedPrompts" || strings.Contains(s.Method, "setSuggestedPrompts") {
				return s.ThreadTS == p.TS
			}
		}
		return false
	})
	release := h.llm.Hold(0)
	q := h.emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "what can you do?", p.TS)
	_ = q
	h.wait("a status", func() bool {
		for _, s := range h.emu.AssistantStatuses() {
			if strings.Contains(s.Method, "setStatus") && s.ThreadTS == p.TS && s.Status != "" {
				return true
			}
		}
		return false
	})
	release()
	got := h.waitReply(slackemu.DMAlice, p.TS)
	if !strings.Contains(got, "what can you do?") {
		t.Errorf("reply = %q", got)
	}
}

// TestE2EUserRate: past USER_TURNS_PER_MINUTE a person gets an ephemeral
// note and the message is still answered, later.
func TestE2EUserRate(t *testing.T) {
	const perMinute = 30
	// This test is about people, not Slack's limits: 31 replies in one
	// channel would take half a minute at ~1 post a second.
	h := newHarness(t, harnessOpts{emu: slackemu.Options{NoRateLimits: true}, bot: func(o *bot.Options) {
		o.UserTurnsPerMinute = perMinute
		o.RateLimits = noLimits()
	}})
	var ps []slackemu.Posted
	for i := range perMinute + 1 {
		ps = append(ps, h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserBob, fmt.Sprintf("rate %d", i), ""))
	}
	h.wait("a rate note", func() bool {
		for _, e := range h.emu.Ephemerals(slackemu.UserBob) {
			if strings.Contains(e.Text, "more than 30 requests a minute") {
				return true
			}
		}
		return false
	})
	for _, p := range ps {
		h.waitReply(slackemu.ChannelGen, p.TS)
	}
}

// TestE2EModelFailure: when the model fails, the thread gets a short safe
// message (never the error's details) and the next message works.
func TestE2EModelFailure(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.llm.FailNext(10, llmemu.ErrorReply{Status: 400, Message: "secret upstream detail xyz"})
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "this will fail", "")
	got := h.waitReply(slackemu.ChannelGen, p.TS)
	if !strings.Contains(got, "something went wrong") || strings.Contains(got, "xyz") {
		t.Errorf("failure reply = %q", got)
	}
	h.llm.FailNext(0, llmemu.ErrorReply{})
	q := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "and now?", "")
	if got := h.waitReply(slackemu.ChannelGen, q.TS); !strings.Contains(got, "and now?") {
		t.Errorf("reply after a failure = %q", got)
	}
}

// TestE2ENativeStoppedByUser: Slack's own stop on a native stream ends the
// turn like the Stop button.
func TestE2ENativeStoppedByUser(t *testing.T) {
	h := newHarness(t, harnessOpts{bot: func(o *bot.Options) { o.StreamMode = bot.StreamNative }})
	h.llm.SetTokenInterval(10 * time.Millisecond)
	long := strings.Repeat("and on and on ", 200)
	h.llm.SetResponder(func(llmemu.Recorded) llmemu.Reply { return llmemu.Reply{Text: long} })
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "never stop", "")
	h.wait("a stream", func() bool {
		r := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
		return len(r) == 1 && r[0].Streaming
	})
	h.emu.InjectFault("chat.appendStream", slackemu.Fault{Error: "stopped_by_user"})
	h.wait("the stop notice", func() bool {
		got, _, _ := h.replyText(slackemu.ChannelGen, p.TS)
		return strings.Contains(got, "Stopped by <@"+slackemu.UserAlice+">")
	})
	got, _, _ := h.replyText(slackemu.ChannelGen, p.TS)
	if len(got) >= len(long) {
		t.Errorf("the turn ran to the end (%d bytes) despite the stop", len(got))
	}
}

// TestE2ESlowModelShowsStatus: a model slow to start gets a status message
// with the Stop button, which then becomes the answer.
func TestE2ESlowModelShowsStatus(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.llm.SetResponder(func(r llmemu.Recorded) llmemu.Reply {
		return llmemu.Reply{Text: llmemu.AnswerFor(r.LastUserText()), Delay: 1500 * time.Millisecond}
	})
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "think hard", "")
	h.wait("a status message", func() bool {
		r := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
		return len(r) == 1 && strings.Contains(string(r[0].Blocks), "Thinking")
	})
	got := h.waitReply(slackemu.ChannelGen, p.TS)
	if want := h.lastAnswer(); got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}
	r := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
	if len(r) != 1 || strings.Contains(string(r[0].Blocks), "Thinking") {
		t.Errorf("status message not replaced by the answer: %d messages, %s", len(r), r[0].Blocks)
	}
}

// echoTool is a tool configuration allows without asking.
type echoTool struct{}

func (echoTool) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "echo", Description: "Echoes.", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (echoTool) Call(context.Context, json.RawMessage) (string, error) { return "echoed", nil }
func (echoTool) Hints() agent.Hints                                    { return agent.Hints{Tool: "echo", Allowed: true} }

type oneTool struct{ t agent.Tool }

func (o oneTool) Tools(context.Context, access.Access) ([]agent.Tool, error) {
	return []agent.Tool{o.t}, nil
}

// TestE2ENativeToolProgress: in a native stream, a running tool shows as a
// task update, then the answer streams.
func TestE2ENativeToolProgress(t *testing.T) {
	h := newHarness(t, harnessOpts{bot: func(o *bot.Options) {
		o.StreamMode = bot.StreamNative
		o.Tools = oneTool{echoTool{}}
	}})
	h.llm.Enqueue(llmemu.Reply{ToolCalls: []llmemu.ToolCall{{Name: "echo", Arguments: "{}"}}}, llmemu.Reply{Text: "The tool said echoed."})
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "use the tool", "")
	h.wait("the answer", func() bool {
		got, _, _ := h.replyText(slackemu.ChannelGen, p.TS)
		return got == "The tool said echoed."
	})
	r := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
	var chunks []string
	for _, c := range r[0].Chunks {
		chunks = append(chunks, string(c))
	}
	joined := strings.Join(chunks, " ")
	if !strings.Contains(joined, `"in_progress"`) || !strings.Contains(joined, `"complete"`) {
		t.Errorf("no task updates for the tool: %s", joined)
	}
}
