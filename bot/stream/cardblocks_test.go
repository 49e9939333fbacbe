package stream

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/provider"
)

// shownBlocks is what a message's blocks show: its task cards (task id →
// status, with the output and sources of each), its context lines, the
// value of its Stop button ("" without one) and whether it has the
// feedback block (the rig's divider).
type shownBlocks struct {
	cards    map[string]string
	outputs  map[string]string
	sources  map[string]int
	contexts []string
	stop     string
	feedback bool
}

func blocksOf(t *testing.T, m slackemu.Message) shownBlocks {
	t.Helper()
	var blocks []struct {
		Type    string `json:"type"`
		TaskID  string `json:"task_id"`
		Status  string `json:"status"`
		Sources []any  `json:"sources"`
		Output  *struct {
			Elements []struct {
				Elements []struct {
					Text string `json:"text"`
				} `json:"elements"`
			} `json:"elements"`
		} `json:"output"`
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			Text     any    `json:"text"`
		} `json:"elements"`
	}
	if len(m.Blocks) > 0 {
		if err := json.Unmarshal(m.Blocks, &blocks); err != nil {
			t.Fatalf("blocks %s: %v", m.Blocks, err)
		}
	}
	s := shownBlocks{cards: map[string]string{}, outputs: map[string]string{}, sources: map[string]int{}}
	for _, b := range blocks {
		switch b.Type {
		case "task_card":
			s.cards[b.TaskID] = b.Status
			s.sources[b.TaskID] = len(b.Sources)
			if b.Output != nil {
				for _, e := range b.Output.Elements {
					for _, x := range e.Elements {
						s.outputs[b.TaskID] += x.Text
					}
				}
			}
		case "context":
			for _, e := range b.Elements {
				if txt, ok := e.Text.(string); ok {
					s.contexts = append(s.contexts, txt)
				}
			}
		case "actions":
			for _, e := range b.Elements {
				if e.ActionID == ActionStop {
					s.stop = e.Value
				}
			}
		case "divider":
			s.feedback = true
		}
	}
	return s
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rollingReply is a native reply whose stream closes for its age almost
// at once (no append before it), running until the returned func ends it.
func rollingReply(t *testing.T, g *rig) (*Reply, func(final string)) {
	o := g.options()
	o.Mode = Native
	o.StreamLifetime = 300 * time.Millisecond
	r := New(o)
	var wg sync.WaitGroup
	run, stop := contextWithTimeout(t, 30*time.Second)
	wg.Go(func() { r.Run(run) })
	return r, func(final string) {
		r.Close()
		wg.Wait()
		stop()
		r.Finish(ctx(t), final, "")
	}
}

// TestNativeRolloverKeepsStop: after the stream is closed for its age the
// reply goes on by chat.update on the same message, which carries our
// Stop button (same action id, the thread key as value) until the final
// edit; the final message has the feedback block and no Stop.
func TestNativeRolloverKeepsStop(t *testing.T) {
	g := newRig(t)
	r, end := rollingReply(t, g)
	r.Observe(agent.Event{Kind: agent.EventStep, Step: 1})
	r.Observe(agent.Event{Kind: agent.EventText, Text: "first"})
	waitFor(t, "the rollover", func() bool { return len(g.emu.Calls("chat.stopStream")) == 1 })
	r.Observe(agent.Event{Kind: agent.EventText, Text: " and more"})
	var live slackemu.Message
	waitFor(t, "the continued message with Stop", func() bool {
		msgs := g.replies()
		if len(msgs) != 1 || msgs[0].Streaming {
			return false
		}
		live = msgs[0]
		return blocksOf(t, live).stop != "" && strings.Contains(shownText(live), "and more")
	})
	if got := blocksOf(t, live).stop; got != g.k.String() {
		t.Errorf("Stop button value %q, want the thread key %q", got, g.k.String())
	}
	end("")

	if errs := streamErrors(g.emu); len(errs) > 0 {
		t.Errorf("stream calls refused: %v", errs)
	}
	msgs := g.replies()
	if len(msgs) != 1 || msgs[0].TS != live.TS || msgs[0].Via != "chat.startStream" {
		t.Fatalf("replies %+v, want the stream's message edited", msgs)
	}
	if got := shownText(msgs[0]); got != "first and more" {
		t.Errorf("final text %q, want the whole answer", got)
	}
	if s := blocksOf(t, msgs[0]); s.stop != "" || !s.feedback {
		t.Errorf("final message %s: want the feedback block and no Stop", msgs[0].Blocks)
	}
	stops := g.emu.Calls("chat.stopStream")
	if len(stops) != 1 || stops[0].Params["session_status"] != slack.AgentSessionStatusProcessing {
		t.Errorf("stopStream calls %+v, want one leaving the session processing", stops)
	}
}

// TestNativeRolloverFinishesTaskCards: a tool call in progress when the
// stream is closed for its age (its streamed card stuck at in_progress)
// and one started after it end visibly complete and error in the
// continued message: task_card blocks with the true status, a live one
// while it runs, the sources and the error kept in the final edit.
func TestNativeRolloverFinishesTaskCards(t *testing.T) {
	g := newRig(t)
	r, end := rollingReply(t, g)
	search := provider.ToolCall{ID: "c1", Name: "search", Arguments: `{"q":"a<b"}`}
	fetch := provider.ToolCall{ID: "c2", Name: "fetch"}
	r.Observe(agent.Event{Kind: agent.EventStep, Step: 1})
	r.Observe(agent.Event{Kind: agent.EventText, Text: "Looking."})
	r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: search})
	waitFor(t, "the rollover", func() bool { return len(g.emu.Calls("chat.stopStream")) == 1 })
	ts := g.replies()[0].TS
	if cards := g.emu.TaskCards(g.k.Channel, ts); len(cards) != 1 || cards[0].Status != "in_progress" {
		t.Fatalf("stream's cards at the rollover %+v, want search in progress", cards)
	}
	waitFor(t, "the continued message's running card", func() bool {
		s := blocksOf(t, g.replies()[0])
		return s.cards["c1"] == "in_progress" && s.stop != ""
	})
	r.Observe(agent.Event{Kind: agent.EventToolFinished, Call: search, Result: `[{"title":"Go","url":"https://go.dev/"}]`})
	r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: fetch})
	r.Observe(agent.Event{Kind: agent.EventToolFinished, Call: fetch, IsError: true, Text: "boom"})
	r.Observe(agent.Event{Kind: agent.EventStep, Step: 2})
	r.Observe(agent.Event{Kind: agent.EventText, Text: "Found it."})
	end("")

	msgs := g.replies()
	if len(msgs) != 1 || msgs[0].TS != ts {
		t.Fatalf("replies %+v, want the stream's message edited", msgs)
	}
	s := blocksOf(t, msgs[0])
	if s.cards["c1"] != "complete" || s.sources["c1"] != 1 || s.cards["c2"] != "error" || s.outputs["c2"] != "boom" {
		t.Errorf("final cards %v (sources %v, outputs %v), want search complete with its source, fetch error with its output; blocks %s",
			s.cards, s.sources, s.outputs, msgs[0].Blocks)
	}
	if s.stop != "" || !s.feedback || len(s.contexts) != 0 {
		t.Errorf("final message %s: want feedback, no Stop, no status or progress line", msgs[0].Blocks)
	}
	if got := shownText(msgs[0]); got != "Looking.\n\nFound it." {
		t.Errorf("final text %q", got)
	}
	if errs := streamErrors(g.emu); len(errs) > 0 {
		t.Errorf("stream calls refused: %v", errs)
	}
}

// TestNativeRolloverBeforeAnyText: a stream that showed only a running
// tool call when it was closed for its age (a long call before any text)
// stays live: the card, the status and our Stop; then the text comes and
// the final edit has the card complete.
func TestNativeRolloverBeforeAnyText(t *testing.T) {
	g := newRig(t)
	r, end := rollingReply(t, g)
	slow := provider.ToolCall{ID: "s1", Name: "slow_report"}
	r.Observe(agent.Event{Kind: agent.EventStep, Step: 1})
	r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: slow})
	waitFor(t, "the rollover", func() bool { return len(g.emu.Calls("chat.stopStream")) == 1 })
	if msgs := g.replies(); len(msgs) != 1 || shownText(msgs[0]) != "" {
		t.Fatalf("replies %+v, want the stream's message without text", msgs)
	}
	waitFor(t, "the live message with the running card and Stop", func() bool {
		s := blocksOf(t, g.replies()[0])
		return s.cards["s1"] == "in_progress" && s.stop != "" && len(s.contexts) == 1 && strings.Contains(s.contexts[0], "Running slow_report")
	})
	r.Observe(agent.Event{Kind: agent.EventToolFinished, Call: slow})
	r.Observe(agent.Event{Kind: agent.EventStep, Step: 2})
	r.Observe(agent.Event{Kind: agent.EventText, Text: "The report is ready."})
	end("")
	msgs := g.replies()
	if len(msgs) != 1 {
		t.Fatalf("%d replies, want 1", len(msgs))
	}
	if s := blocksOf(t, msgs[0]); s.cards["s1"] != "complete" || s.stop != "" || !s.feedback || shownText(msgs[0]) != "The report is ready." {
		t.Errorf("final message %s: want the text, the card complete, the feedback, no Stop", msgs[0].Blocks)
	}
}

// TestNativeApprovalCardCompletes: the card of a call that waits for
// approval is pending in the stream closed before the wait; after the
// call runs, the stream's message shows it complete, and the text after
// the prompt goes below it (without that card, with the feedback).
func TestNativeApprovalCardCompletes(t *testing.T) {
	g := newRig(t)
	o := g.options()
	o.Mode = Native
	r := New(o)
	var wg sync.WaitGroup
	run, stop := contextWithTimeout(t, 30*time.Second)
	defer stop()
	wg.Go(func() { r.Run(run) })
	write := provider.ToolCall{ID: "w1", Name: "write", Arguments: `{"path":"/tmp/x"}`}
	r.Observe(agent.Event{Kind: agent.EventStep, Step: 1})
	r.Observe(agent.Event{Kind: agent.EventText, Text: "I will write it."})
	waitFor(t, "the stream", func() bool { return len(g.emu.Calls("chat.startStream")) == 1 })
	r.Observe(agent.Event{Kind: agent.EventApprovalNeeded, Call: write})
	waitFor(t, "the stop before the wait", func() bool { return len(g.emu.Calls("chat.stopStream")) == 1 })
	ts := g.replies()[0].TS
	if cards := g.emu.TaskCards(g.k.Channel, ts); len(cards) != 1 || cards[0].Status != "pending" {
		t.Fatalf("stream's cards at the stop %+v, want write pending", cards)
	}
	r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: write})
	r.Observe(agent.Event{Kind: agent.EventToolFinished, Call: write})
	r.Observe(agent.Event{Kind: agent.EventStep, Step: 2})
	r.Observe(agent.Event{Kind: agent.EventText, Text: "Written."})
	r.Close()
	wg.Wait()
	r.Finish(ctx(t), "", "")

	msgs := g.replies()
	if len(msgs) != 2 || msgs[0].TS != ts {
		t.Fatalf("%d replies, want the stream's message and one below the prompt", len(msgs))
	}
	top, below := blocksOf(t, msgs[0]), blocksOf(t, msgs[1])
	if top.cards["w1"] != "complete" || top.stop != "" || top.feedback {
		t.Errorf("stream's message %s: want write complete, no Stop, no feedback", msgs[0].Blocks)
	}
	if len(below.cards) != 0 || below.stop != "" || !below.feedback || shownText(msgs[1]) != "Written." {
		t.Errorf("message below the prompt %s: want the text and the feedback only", msgs[1].Blocks)
	}
}

// TestNativeRolloverCardsRefused: where Slack refuses task_card blocks in
// chat.update, the continued message shows the calls as a line instead,
// in the final edit too, and the answer is whole; the workspace is not
// sent the blocks again.
func TestNativeRolloverCardsRefused(t *testing.T) {
	g := newRig(t)
	g.emu.InjectFault("chat.update", slackemu.Fault{Error: "invalid_blocks"})
	r, end := rollingReply(t, g)
	search := provider.ToolCall{ID: "c1", Name: "search"}
	r.Observe(agent.Event{Kind: agent.EventText, Text: "Looking."})
	r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: search})
	waitFor(t, "the rollover", func() bool { return len(g.emu.Calls("chat.stopStream")) == 1 })
	r.Observe(agent.Event{Kind: agent.EventToolFinished, Call: search})
	r.Observe(agent.Event{Kind: agent.EventText, Text: " Found it."})
	end("")

	msgs := g.replies()
	if len(msgs) != 1 {
		t.Fatalf("%d replies, want 1", len(msgs))
	}
	s := blocksOf(t, msgs[0])
	if len(s.cards) != 0 || len(s.contexts) != 1 || s.contexts[0] != "✓ search" || !s.feedback {
		t.Errorf("final message %s: want the calls as a line, no task_card, the feedback", msgs[0].Blocks)
	}
	if got := shownText(msgs[0]); got != "Looking. Found it." {
		t.Errorf("final text %q", got)
	}
	updates := g.emu.Calls("chat.update")
	if len(updates) < 2 || updates[0].OK || !strings.Contains(updates[0].Error, "invalid_blocks") {
		t.Fatalf("chat.update calls %+v, want the refused one first", updates)
	}
	for _, c := range updates[1:] {
		if b, _ := json.Marshal(c.Params["blocks"]); strings.Contains(string(b), "task_card") {
			t.Errorf("task_card blocks sent again after the refusal: %s", b)
		}
	}
}
