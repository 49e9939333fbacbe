package agent

import (
	"context"
	"sync/atomic"

	"github.com/bobbinbot/bobbin/provider"
)

// Turn-only results. Some data sources forbid keeping what they return
// (Slack's Real-time Search API: no storing or copying of results). A
// tool calling such a source marks the call's result with TurnOnly. The
// model then gets the result in every request of the turn that made it;
// everything the agent hands out to be kept carries the tool's
// placeholder instead: checkpoints (so the transcript, also when the
// turn waits for an approval, is handed over or is cut short), Result,
// the messages given to the compaction summarizer, and spans that
// capture content. A later turn, or another replica resuming this one,
// sees the placeholder; the model may call the tool again.
//
// The run keeps the results by their index in its history (tool call
// ids may repeat across turns when a provider omits them): the history
// holds the placeholders, and each request puts the results in their
// place.

// defaultTurnOnly is the placeholder of a TurnOnly call that gave none.
const defaultTurnOnly = "[This result was used during the turn that made it and is not kept (the data source's terms); call the tool again if you need it.]"

type turnOnlyKey struct{}

// turnOnlyMark is one tool call's mark: set by TurnOnly from the tool's
// goroutine, read by the agent once the call returned.
type turnOnlyMark struct{ placeholder atomic.Pointer[string] }

// TurnOnly marks the result of the tool call running with ctx (its text,
// images and error text alike) as the model's for the rest of the turn
// only: it is never checkpointed, and transcripts keep placeholder in
// its place. placeholder should say what was there and how to get it
// again ("12 results for …; search again if needed"); "" means a generic
// one. Call it from Call or CallParts before returning; a wrapper around
// the tool passes ctx on, so the mark reaches the agent. It reports
// false when ctx is not a tool call of a running turn (the tool was
// called directly): nothing keeps the result then either.
func TurnOnly(ctx context.Context, placeholder string) bool {
	m, _ := ctx.Value(turnOnlyKey{}).(*turnOnlyMark)
	if m == nil {
		return false
	}
	if placeholder == "" {
		placeholder = defaultTurnOnly
	}
	m.placeholder.Store(&placeholder)
	return true
}

// withTurnOnlyMark returns ctx carrying a fresh mark for one call.
func withTurnOnlyMark(ctx context.Context) (context.Context, *turnOnlyMark) {
	m := &turnOnlyMark{}
	return context.WithValue(ctx, turnOnlyKey{}, m), m
}

// placeholderOf is the call's placeholder, "" when it was not marked.
func (m *turnOnlyMark) placeholderOf() string {
	if p := m.placeholder.Load(); p != nil {
		return *p
	}
	return ""
}

// keptResult is the tool message kept in place of a turn-only result.
func keptResult(full provider.Message, placeholder string) provider.Message {
	return provider.ToolResult{CallID: full.ToolCallID, Name: full.ToolName, Content: placeholder, IsError: full.IsError}.Message()
}

// addTurnOnly records the full form of results about to be appended to
// the history (full is by index in results) and returns results as the
// model sees them, for counting.
func (r *run) addTurnOnly(results []provider.Message, full map[int]provider.Message) []provider.Message {
	if len(full) == 0 {
		return results
	}
	if r.turnOnly == nil {
		r.turnOnly = map[int]provider.Message{}
	}
	sent := make([]provider.Message, len(results))
	copy(sent, results)
	base := len(r.history)
	for i, m := range full {
		sent[i] = m
		r.turnOnly[base+i] = m
	}
	return sent
}

// sentForm returns h (the run's history, or the history after a
// compaction once remapped) with the turn's results in place of their
// placeholders; h itself is left alone.
func (r *run) sentForm(h []provider.Message) []provider.Message {
	if len(r.turnOnly) == 0 {
		return h
	}
	out := make([]provider.Message, len(h))
	copy(out, h)
	for i, m := range r.turnOnly {
		if i < len(out) {
			out[i] = m
		}
	}
	return out
}

// remapTurnOnly follows a compaction that replaced history[:split] with
// one summary message: results summarized away are dropped (the
// summarizer saw their placeholders), the others move.
func (r *run) remapTurnOnly(split int) {
	if len(r.turnOnly) == 0 {
		return
	}
	moved := make(map[int]provider.Message, len(r.turnOnly))
	for i, m := range r.turnOnly {
		if i >= split {
			moved[i-split+1] = m
		}
	}
	r.turnOnly = moved
}

// keptAnchor is the budget anchor as it is persisted: the provider
// counted the turn's results, which the kept transcript no longer holds,
// so their calibrated excess over the placeholders is taken off (else the
// next turn would think the thread bigger than it is, and compact early).
//
// The excess is persisted, so it is counted exactly: the run counts
// exactly from here on, and the reports it had not yet learnt from are
// learnt first, so the ratio is the one counting every report would give.
func (r *run) keptAnchor() Anchor {
	a := r.budget.anchor
	if a.IsZero() || len(r.turnOnly) == 0 {
		return a
	}
	r.budget.countExactly()
	extra := 0
	for i, m := range r.turnOnly {
		if i < a.Messages && i < len(r.history) {
			extra += r.budget.c.CountMessage(m) - r.budget.c.CountMessage(r.history[i])
		}
	}
	a.InputTokens = max(0, a.InputTokens-int(r.budget.ratio*float64(extra)+0.5))
	return a
}

// keptRequest returns a request's messages with the placeholders in
// place of the turn's results (for spans that capture content); msgs
// ends with the run's history.
func (r *run) keptRequest(msgs []provider.Message) []provider.Message {
	off := len(msgs) - len(r.history)
	if len(r.turnOnly) == 0 || off < 0 {
		return msgs
	}
	out := make([]provider.Message, len(msgs))
	copy(out, msgs)
	for i := range r.turnOnly {
		if i < len(r.history) {
			out[off+i] = r.history[i]
		}
	}
	return out
}
