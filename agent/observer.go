package agent

import (
	"time"

	"github.com/bobbinbot/bobbin/provider"
)

// Observer receives a turn's progress in order. Observe is called from the
// goroutine running the turn (tool events may come from tool goroutines, one
// at a time) and must not block: a renderer should coalesce or drop deltas.
type Observer interface {
	Observe(Event)
}

// EventKind tells which fields of an Event are set.
type EventKind int

const (
	// EventStep: a model call starts; Step is its number (1-based).
	EventStep EventKind = iota + 1
	// EventText: Text is a delta of visible answer text.
	EventText
	// EventReasoning: the model is reasoning; Text is the status "thinking".
	// Reasoning content is never passed on. Sent once per step.
	EventReasoning
	// EventApprovalNeeded: the Approver is about to be asked about Call.
	EventApprovalNeeded
	// EventToolStarted: Call starts running.
	EventToolStarted
	// EventToolFinished: Call is done. Decision is how it was allowed or
	// denied, IsError whether the result is an error, Duration how long it
	// ran, Text a short reason ("allowed by configuration", "declined",
	// "unknown tool", "invalid arguments", "timed out", ...). Calls that
	// never ran (denied, unknown, invalid) get only this event.
	EventToolFinished
	// EventCompacted: the history was summarized; Text says how many
	// messages were replaced.
	EventCompacted
	// EventNotice: the turn ends early; Text is the notice for the person
	// (loop guard, step limit, max tokens, stopped).
	EventNotice
	// EventDone: the turn is over. Usage is the turn's total, Err the error
	// Run returns (nil on success).
	EventDone
)

func (k EventKind) String() string {
	switch k {
	case EventStep:
		return "step"
	case EventText:
		return "text"
	case EventReasoning:
		return "reasoning"
	case EventApprovalNeeded:
		return "approval_needed"
	case EventToolStarted:
		return "tool_started"
	case EventToolFinished:
		return "tool_finished"
	case EventCompacted:
		return "compacted"
	case EventNotice:
		return "notice"
	case EventDone:
		return "done"
	}
	return "unknown"
}

// Event is one progress report.
type Event struct {
	Kind     EventKind
	Text     string
	Call     provider.ToolCall
	Hints    Hints
	Decision Decision
	IsError  bool
	Duration time.Duration
	Step     int
	Usage    provider.Usage
	Err      error
	// Result is an EventToolFinished's result text, as the tool returned
	// it (before the per-result cap): the renderer shows its links as
	// the task card's sources. Empty for calls that did not run. A
	// TurnOnly result is here in full: an observer may show it, never
	// keep it.
	Result string
}

type discard struct{}

func (discard) Observe(Event) {}
