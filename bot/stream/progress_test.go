package stream

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// TestProgressLine: the tool calls in order with their state, names
// escaped and clipped, the oldest counted past the cap.
func TestProgressLine(t *testing.T) {
	r := New(Options{Thread: session.ThreadKey{Team: "T", Channel: "C", ThreadTS: "1"}, Mode: Edit})
	if got := r.progressLine(); got != "" {
		t.Errorf("progress line %q without tool calls", got)
	}
	call := func(id, name string) provider.ToolCall { return provider.ToolCall{ID: id, Name: name} }
	r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: call("a", "search")})
	r.Observe(agent.Event{Kind: agent.EventToolFinished, Call: call("a", "search")})
	r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: call("b", "<fetch>")})
	r.Observe(agent.Event{Kind: agent.EventToolFinished, Call: call("b", "<fetch>"), IsError: true})
	r.Observe(agent.Event{Kind: agent.EventApprovalNeeded, Call: call("c", "write")})
	if got, want := r.progressLine(), "✓ search · ✗ &lt;fetch&gt; · ⏸ write"; got != want {
		t.Errorf("progress line %q, want %q", got, want)
	}
	for _, id := range []string{"d", "e", "f", "g"} {
		r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: call(id, strings.Repeat(id, 60))})
	}
	got := r.progressLine()
	if !strings.HasPrefix(got, "+2 earlier · ⏸ write · ▸ ddd") || strings.Contains(got, strings.Repeat("d", 41)) {
		t.Errorf("progress line %q, want the last 5 calls, names clipped", got)
	}
}

// TestEditProgressLine: an edit-mode reply shows its tool calls as a
// context line under the live text, with the normal edits; the final
// edit has no progress line (nor status).
func TestEditProgressLine(t *testing.T) {
	g := newRig(t)
	r := New(g.options())
	var wg sync.WaitGroup
	run, stop := contextWithTimeout(t, 20*time.Second)
	defer stop()
	wg.Go(func() { r.Run(run) })
	lookup := provider.ToolCall{ID: "c1", Name: "lookup"}
	r.Observe(agent.Event{Kind: agent.EventText, Text: "Looking it up."})
	r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: lookup})
	r.Observe(agent.Event{Kind: agent.EventToolFinished, Call: lookup})
	r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: provider.ToolCall{ID: "c2", Name: "fetch"}})
	deadline := time.Now().Add(10 * time.Second)
	var seen bool
	for time.Now().Before(deadline) && !seen {
		if msgs := g.replies(); len(msgs) == 1 {
			b := string(msgs[0].Blocks)
			seen = strings.Contains(b, `"context"`) && strings.Contains(b, "✓ lookup · ▸ fetch") && strings.Contains(b, ActionStop)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !seen {
		t.Fatalf("no live message with the progress line: %+v", g.replies())
	}
	r.Close()
	wg.Wait()
	r.Finish(ctx(t), "", "")
	msgs := g.replies()
	if len(msgs) != 1 {
		t.Fatalf("%d replies, want the live message edited", len(msgs))
	}
	if b := string(msgs[0].Blocks); strings.Contains(b, "lookup") || strings.Contains(b, `"context"`) || !strings.Contains(b, "Looking it up.") {
		t.Errorf("final blocks %s: want the text without the progress line", b)
	}
}
