package bot_test

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestE2EStreamOutlivesLifetimeWithApproval: with Slack's stream lifetime
// cut to a second, a native answer that streams text, waits on an
// approval longer than the lifetime and goes on streaming for longer than
// the lifetime again ends complete: the text before the prompt in the
// stream's message, the rest below it, no message left streaming.
func TestE2EStreamOutlivesLifetimeWithApproval(t *testing.T) {
	tool := &fakeTool{name: toolName, hints: agent.Hints{Server: "files", Tool: "write", Destructive: true}}
	h := newHarness(t, harnessOpts{
		emu: slackemu.Options{NoRateLimits: true, StreamLifetime: time.Second},
		bot: func(o *bot.Options) {
			o.StreamMode = bot.StreamNative
			o.Tools = staticTools{tool}
		},
	})
	before := "I will write the file now, " + strings.Repeat("carefully ", 20)
	after := "Done: " + strings.Repeat("the file is written ", 40) + "END"
	h.llm.SetResponder(func(r llmemu.Recorded) llmemu.Reply {
		if r.LastMessage().Role == "tool" {
			return llmemu.Reply{Text: after}
		}
		return llmemu.Reply{Text: before, ToolCalls: []llmemu.ToolCall{{Name: toolName, Arguments: `{"path":"/tmp/x"}`}}}
	})
	h.llm.SetTokenInterval(5 * time.Millisecond)
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "write it", "")
	e := &approvalEnv{harness: h, tool: tool}
	pr := e.waitPrompt(slackemu.ChannelGen, p.TS, 1)
	// Wait on the person for longer than a stream lives.
	prompted := time.Now()
	h.wait("the stream's lifetime to pass", func() bool { return time.Since(prompted) > 2*time.Second })
	// Streaming "after" takes about 40 × 3 tokens × 5 ms: longer than a
	// stream lives.
	e.click(slackemu.UserAlice, slackemu.ChannelGen, pr.TS, "bobbin_allow_once")
	h.wait("the whole answer", func() bool {
		got, _, done := h.replyText(slackemu.ChannelGen, p.TS)
		return done && strings.HasSuffix(got, "END")
	})
	var texts []string
	for _, m := range h.emu.BotReplies(slackemu.ChannelGen, p.TS) {
		if m.Streaming {
			t.Errorf("message %s still streaming", m.TS)
		}
		if s, _ := messageText(m); !strings.Contains(string(m.Blocks), "bobbin_approval_head") {
			texts = append(texts, s)
		}
	}
	if len(texts) != 2 || strings.TrimSpace(texts[0]) != strings.TrimSpace(before) || texts[1] != after {
		t.Errorf("reply messages = %q, want the text before the prompt, then the rest", texts)
	}
	h.wait("the session done", func() bool {
		s, _ := h.emu.AgentSession(slackemu.ChannelGen, p.TS)
		return s.Status == slackemu.SessionActive
	})
	steps := sessionSteps(h.emu, slackemu.ChannelGen, p.TS)
	if i := slices.Index(steps, "suspended"); i < 0 || !slices.Contains(steps[i:], "processing") {
		t.Errorf("session statuses = %v, want suspended during the approval wait, then processing", steps)
	}
	if tool.calls.Load() != 1 {
		t.Errorf("tool ran %d times, want 1", tool.calls.Load())
	}
}

// TestE2EStreamOutlivesLifetime: an answer that streams for longer than
// Slack's (shortened) stream lifetime is finished with chat.update on the
// same message, whole.
func TestE2EStreamOutlivesLifetime(t *testing.T) {
	h := newHarness(t, harnessOpts{
		emu: slackemu.Options{NoRateLimits: true, StreamLifetime: 500 * time.Millisecond},
		bot: func(o *bot.Options) { o.StreamMode = bot.StreamNative },
	})
	long := strings.Repeat("on and on ", 150) + "END"
	h.llm.SetResponder(func(llmemu.Recorded) llmemu.Reply { return llmemu.Reply{Text: long} })
	h.llm.SetTokenInterval(3 * time.Millisecond)
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "talk for a while", "")
	var got string
	h.wait("the end of the answer", func() bool {
		got, _, _ = h.replyText(slackemu.ChannelGen, p.TS)
		return strings.HasSuffix(got, "END")
	})
	if got != long {
		t.Errorf("reply = %d bytes %q…, want the whole answer (%d bytes)", len(got), got[:min(len(got), 40)], len(long))
	}
	r := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
	if len(r) != 1 || r[0].StreamEnded == "stopped" {
		t.Fatalf("replies = %d, ended %q: want one message whose stream Slack ended", len(r), r[0].StreamEnded)
	}
	if len(h.emu.Calls("chat.update")) == 0 {
		t.Error("no chat.update after the stream ended")
	}
}

// TestE2EStreamLifetimeOption: with bot.Options.StreamLifetime (the
// operator's STREAM_LIFETIME) at a second and Slack's own lifetime far
// longer, the reply closes the stream itself at that age while a tool
// call runs; the same message goes on by chat.update with our Stop button
// until the answer is done, and its task card, in progress in the closed
// stream, ends complete there; the final message has the feedback
// buttons and no Stop.
func TestE2EStreamLifetimeOption(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	done := func() { once.Do(func() { close(release) }) }
	t.Cleanup(done)
	tool := &fakeTool{name: "kb_lookup", hints: agent.Hints{Server: "kb", Tool: "lookup", Allowed: true},
		onCall: func() { <-release }}
	h := newHarness(t, harnessOpts{
		emu: slackemu.Options{NoRateLimits: true, StreamLifetime: time.Minute},
		bot: func(o *bot.Options) {
			o.StreamMode = bot.StreamNative
			o.StreamLifetime = time.Second
			o.Tools = staticTools{tool}
		},
	})
	h.llm.SetResponder(func(r llmemu.Recorded) llmemu.Reply {
		if r.LastMessage().Role == "tool" {
			return llmemu.Reply{Text: "Found it. END"}
		}
		return llmemu.Reply{Text: "Let me look it up.", ToolCalls: []llmemu.ToolCall{{Name: "kb_lookup", Arguments: `{"path":"faq"}`}}}
	})
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "look it up", "")
	var ts string
	h.wait("the stream closed by the reply, continued with Stop, the card still running", func() bool {
		r := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
		if len(r) != 1 || r[0].Streaming || r[0].StreamEnded != "stopped" {
			return false
		}
		ts = r[0].TS
		cards := h.emu.TaskCards(slackemu.ChannelGen, ts)
		_, live := messageText(r[0])
		return live && len(cards) == 1 && cards[0].Status == "in_progress" &&
			strings.Contains(string(r[0].Blocks), `"task_card"`)
	})
	done()
	h.wait("the whole answer", func() bool {
		got, _, done := h.replyText(slackemu.ChannelGen, p.TS)
		return done && strings.HasSuffix(got, "END")
	})
	r := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
	if len(r) != 1 || r[0].TS != ts {
		t.Fatalf("%d replies, want the stream's message edited", len(r))
	}
	var blocks []struct {
		Type   string `json:"type"`
		TaskID string `json:"task_id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(r[0].Blocks, &blocks); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, b := range blocks {
		kinds = append(kinds, b.Type+":"+b.Status)
	}
	if got := strings.Join(kinds, " "); got != "markdown: task_card:complete context_actions:" {
		t.Errorf("final blocks %s, want the text, the card complete and the feedback buttons (no Stop)", got)
	}
	if got, _ := messageText(r[0]); got != "Let me look it up.\n\nFound it. END" {
		t.Errorf("final text %q", got)
	}
	for _, c := range h.emu.Journal() {
		if strings.HasPrefix(c.Method, "chat.") && strings.Contains(c.Method, "Stream") && !c.OK {
			t.Errorf("%s refused: %s", c.Method, c.Error)
		}
	}
	if stops := h.emu.Calls("chat.stopStream"); len(stops) != 1 || stops[0].Params["session_status"] != "processing" {
		t.Errorf("chat.stopStream calls %+v, want one leaving the session processing", stops)
	}
	if tool.calls.Load() != 1 {
		t.Errorf("tool ran %d times, want 1", tool.calls.Load())
	}
}

// TestStreamLifetimeOptionChecked: bot.New refuses a stream lifetime
// Slack would cut short (5 minutes or more) or a negative one; zero means
// the default.
func TestStreamLifetimeOptionChecked(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, bot.MaxStreamLifetime, time.Hour} {
		_, err := bot.New(bot.Options{StreamLifetime: d})
		if err == nil || !strings.Contains(err.Error(), "StreamLifetime") {
			t.Errorf("StreamLifetime %v: error %v, want one naming StreamLifetime", d, err)
		}
	}
	_, err := bot.New(bot.Options{StreamLifetime: 0})
	if err != nil && strings.Contains(err.Error(), "StreamLifetime") {
		t.Errorf("StreamLifetime 0 refused: %v", err)
	}
}
