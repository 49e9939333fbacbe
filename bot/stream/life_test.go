package stream

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/provider"
)

// shownText is what a reply message shows: its markdown_text (a stream's
// message) or its markdown blocks.
func shownText(m slackemu.Message) string {
	if m.MarkdownText != "" {
		return m.MarkdownText
	}
	var blocks []struct {
		Type string `json:"type"`
		Text any    `json:"text"`
	}
	_ = json.Unmarshal(m.Blocks, &blocks)
	var parts []string
	for _, b := range blocks {
		if s, ok := b.Text.(string); ok && b.Type == "markdown" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n")
}

// streamErrors are the journal's failed stream calls.
func streamErrors(emu *slackemu.Server) []string {
	var out []string
	for _, c := range emu.Journal() {
		if strings.HasPrefix(c.Method, "chat.") && strings.Contains(c.Method, "Stream") && !c.OK {
			out = append(out, c.Method+": "+c.Error)
		}
	}
	return out
}

// TestNativeStreamRollsOverBeforeSlackEndsIt: Slack ends a stream 20 s
// after it starts; the reply closes it at 15 s, before any call is
// refused, with the text not yet appended, and goes on with chat.update on
// the same message; an approval wait in the middle of a ~60 s answer puts
// the rest below the prompt. The answer ends whole: zero
// message_not_in_streaming_state, no text lost, nothing left streaming,
// the session processing → suspended → processing → active.
func TestNativeStreamRollsOverBeforeSlackEndsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of scripted answer")
	}
	g := newRig(t, slackemu.Options{NoRateLimits: true, StreamLifetime: 20 * time.Second})
	o := g.options()
	o.Mode, o.StreamLifetime, o.EditInterval = Native, 15*time.Second, 250*time.Millisecond
	r := New(o)
	var wg sync.WaitGroup
	run, stop := contextWithTimeout(t, 2*time.Minute)
	defer stop()
	wg.Go(func() { r.Run(run) })

	var before, after strings.Builder
	say := func(b *strings.Builder, words int, every time.Duration) {
		for i := range words {
			w := fmt.Sprintf("w%d ", i)
			b.WriteString(w)
			r.Observe(agent.Event{Kind: agent.EventText, Text: w})
			time.Sleep(every)
		}
	}
	start := time.Now()
	r.Observe(agent.Event{Kind: agent.EventStep, Step: 1})
	say(&before, 250, 100*time.Millisecond) // ~25 s: past the rollover
	call := provider.ToolCall{ID: "c1", Name: "write", Arguments: `{"path":"/tmp/x"}`}
	r.Observe(agent.Event{Kind: agent.EventApprovalNeeded, Call: call})
	time.Sleep(10 * time.Second) // the person takes their time
	r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: call})
	r.Observe(agent.Event{Kind: agent.EventToolFinished, Call: call})
	r.Observe(agent.Event{Kind: agent.EventStep, Step: 2})
	say(&after, 250, 100*time.Millisecond) // ~25 s more
	after.WriteString("END")
	r.Observe(agent.Event{Kind: agent.EventText, Text: "END"})
	r.Close()
	wg.Wait()
	r.Finish(ctx(t), "", "")
	t.Logf("answer took %v", time.Since(start).Round(time.Second))

	if errs := streamErrors(g.emu); len(errs) > 0 {
		t.Errorf("stream calls refused: %v", errs)
	}
	msgs := g.replies()
	if len(msgs) != 2 {
		t.Fatalf("%d reply messages, want 2 (the stream's, then the text after the prompt)", len(msgs))
	}
	for _, m := range msgs {
		if m.Streaming {
			t.Errorf("message %s still streaming", m.TS)
		}
	}
	if got, want := strings.TrimSpace(shownText(msgs[0])), strings.TrimSpace(before.String()); got != want {
		t.Errorf("stream's message = %d bytes …%q, want %d bytes …%q", len(got), got[max(0, len(got)-20):], len(want), want[len(want)-20:])
	}
	if got, want := strings.TrimSpace(shownText(msgs[1])), after.String(); got != want {
		t.Errorf("second message = %d bytes …%q, want %d bytes …%q", len(got), got[max(0, len(got)-20):], len(want), want[len(want)-20:])
	}
	if msgs[0].StreamEnded != "stopped" || msgs[0].Via != "chat.startStream" {
		t.Errorf("first message via %s ended %q: want a stream the reply stopped", msgs[0].Via, msgs[0].StreamEnded)
	}
	stops := g.emu.Calls("chat.stopStream")
	if len(stops) != 1 {
		t.Fatalf("%d chat.stopStream calls, want 1", len(stops))
	}
	starts := g.emu.Calls("chat.startStream")
	if age := stops[0].Time.Sub(starts[0].Time); age < 14*time.Second || age >= 20*time.Second {
		t.Errorf("stream stopped %v after its start, want at ~15 s", age)
	}
	if s := stops[0].Params["session_status"]; s != slack.AgentSessionStatusProcessing {
		t.Errorf("rollover stopStream session_status = %v, want processing", s)
	}
	if len(g.emu.Calls("chat.update")) == 0 {
		t.Error("no chat.update after the rollover")
	}
	steps := g.emu.SessionStatuses(g.k.Channel, g.k.ThreadTS)
	want := []string{"processing", "suspended", "processing", "active"}
	var compact []string
	for _, s := range steps {
		if len(compact) == 0 || compact[len(compact)-1] != s {
			compact = append(compact, s)
		}
	}
	if strings.Join(compact, " ") != strings.Join(want, " ") {
		t.Errorf("session statuses %v, want %v", compact, want)
	}
}

// TestNativeStopEndsSession: a native stream that ends the turn leaves
// the session active through chat.stopStream's session_status; no
// agents.sessions.setStatus follows it.
func TestNativeStopEndsSession(t *testing.T) {
	g := newRig(t)
	o := g.options()
	o.Mode = Native
	r := New(o)
	var wg sync.WaitGroup
	run, stop := contextWithTimeout(t, 20*time.Second)
	defer stop()
	wg.Go(func() { r.Run(run) })
	r.Observe(agent.Event{Kind: agent.EventStep, Step: 1})
	r.Observe(agent.Event{Kind: agent.EventText, Text: "the answer"})
	deadline := time.Now().Add(10 * time.Second)
	for len(g.emu.Calls("chat.startStream")) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	r.Close()
	wg.Wait()
	r.Finish(ctx(t), "", "")
	stops := g.emu.Calls("chat.stopStream")
	if len(stops) != 1 || stops[0].Params["session_status"] != slack.AgentSessionStatusActive {
		t.Fatalf("stopStream calls %+v, want one with session_status active", stops)
	}
	for _, c := range g.emu.Calls("agents.sessions.setStatus") {
		if c.Seq > stops[0].Seq {
			t.Errorf("setStatus %v after the stream ended the turn", c.Params["status"])
		}
	}
	if s, _ := g.emu.AgentSession(g.k.Channel, g.k.ThreadTS); s.Status != slackemu.SessionActive {
		t.Errorf("session %q, want active", s.Status)
	}
	if msgs := g.replies(); len(msgs) != 1 || msgs[0].StreamEnded != "stopped" || !strings.Contains(shownText(msgs[0]), "the answer") {
		t.Errorf("replies %+v, want the stream's message, stopped", msgs)
	}
}

// TestNativeRolloverCarriesUnsent: the text not yet appended when the
// stream reaches its lifetime goes out with the stop (session left
// processing); the reply then ends with an edit of the same message.
func TestNativeRolloverCarriesUnsent(t *testing.T) {
	g := newRig(t)
	o := g.options()
	o.Mode = Native
	o.StreamLifetime, o.EditInterval = 300*time.Millisecond, 2*time.Second // no append before the rollover
	r := New(o)
	var wg sync.WaitGroup
	run, stop := contextWithTimeout(t, 20*time.Second)
	defer stop()
	wg.Go(func() { r.Run(run) })
	r.Observe(agent.Event{Kind: agent.EventText, Text: "first"})
	deadline := time.Now().Add(10 * time.Second)
	for len(g.emu.Calls("chat.startStream")) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	r.Observe(agent.Event{Kind: agent.EventText, Text: " second"})
	for len(g.emu.Calls("chat.stopStream")) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	r.Observe(agent.Event{Kind: agent.EventText, Text: " more"})
	r.Close()
	wg.Wait()
	r.Finish(ctx(t), "", "")
	stops := g.emu.Calls("chat.stopStream")
	if len(stops) != 1 || stops[0].Params["markdown_text"] != " second" || stops[0].Params["session_status"] != slack.AgentSessionStatusProcessing {
		t.Fatalf("stopStream calls %+v, want one with the unsent text and session_status processing", stops)
	}
	if errs := streamErrors(g.emu); len(errs) > 0 {
		t.Errorf("stream calls refused: %v", errs)
	}
	msgs := g.replies()
	if len(msgs) != 1 || shownText(msgs[0]) != "first second more" {
		t.Fatalf("replies %+v, want the stream's message edited to the whole answer", msgs)
	}
	if v := msgs[0].Versions(); !slices.Contains(v, "first second") {
		t.Errorf("versions %q: want the stop's \"first second\"", v)
	}
}

// TestNativeStopWithoutAPIURL: without Options.APIURL the stop sends no
// session_status (slack-go cannot) and the session still ends active.
func TestNativeStopWithoutAPIURL(t *testing.T) {
	g := newRig(t)
	o := g.options()
	o.Mode, o.APIURL = Native, ""
	r := New(o)
	var wg sync.WaitGroup
	run, stop := contextWithTimeout(t, 20*time.Second)
	defer stop()
	wg.Go(func() { r.Run(run) })
	r.Observe(agent.Event{Kind: agent.EventText, Text: "the answer"})
	deadline := time.Now().Add(10 * time.Second)
	for len(g.emu.Calls("chat.startStream")) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	r.Close()
	wg.Wait()
	r.Finish(ctx(t), "", "")
	stops := g.emu.Calls("chat.stopStream")
	if len(stops) != 1 || stops[0].Params["session_status"] != nil {
		t.Fatalf("stopStream calls %+v, want one without session_status", stops)
	}
	if s, _ := g.emu.AgentSession(g.k.Channel, g.k.ThreadTS); s.Status != slackemu.SessionActive {
		t.Errorf("session %q, want active", s.Status)
	}
}

// TestOnWorkingOnceSessionShown: OnWorking is called once, when Slack
// accepted the session's "processing" (a sign of life: bot/sign.go), and
// never in a workspace that refuses agent sessions.
func TestOnWorkingOnceSessionShown(t *testing.T) {
	for _, refused := range []bool{false, true} {
		g := newRig(t)
		if refused {
			g.emu.SetAgentSessionsRefused(g.k.Team, "not_allowed")
		}
		o := g.options()
		o.Mode = Edit
		o.Sessions = &Sessions{}
		var calls int
		var mu sync.Mutex
		o.OnWorking = func() { mu.Lock(); calls++; mu.Unlock() }
		r := New(o)
		var wg sync.WaitGroup
		run, stop := contextWithTimeout(t, 20*time.Second)
		wg.Go(func() { r.Run(run) })
		r.Observe(agent.Event{Kind: agent.EventStep, Step: 1})
		deadline := time.Now().Add(10 * time.Second)
		for len(g.emu.Calls("agents.sessions.setStatus")) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		r.Observe(agent.Event{Kind: agent.EventText, Text: "the answer"})
		time.Sleep(200 * time.Millisecond) // more ticks: still one call
		r.Close()
		wg.Wait()
		r.Finish(ctx(t), "the answer", "")
		stop()
		mu.Lock()
		got := calls
		mu.Unlock()
		want := 1
		if refused {
			want = 0
		}
		if got != want {
			t.Errorf("refused=%v: OnWorking called %d times, want %d (session statuses %v)", refused, got, want, g.emu.SessionStatuses(g.k.Channel, g.k.ThreadTS))
		}
	}
}
