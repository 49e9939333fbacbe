package provider

import (
	"context"
	"iter"
)

// Provider streams one model response. The iterator yields normalized events
// in order; if the stream fails, the error is the last pair and every event
// yielded before it stays valid (partial text may be shown). Breaking out of
// the loop cancels the request. A stream always ends with an EventDone or an
// error: a body that ends without its protocol's terminal marker yields
// ErrTruncated. Implementations retry only before the first event.
type Provider interface {
	Stream(ctx context.Context, req Request) iter.Seq2[Event, error]
}

// Request is one model call.
type Request struct {
	// Model is the model name sent to the endpoint.
	Model string
	// Messages is the conversation. Leading system messages are the system
	// prompt; a later system message, or one marked Summary (a compaction
	// summary, wherever it stands), is placed by the implementation as its
	// endpoint allows.
	Messages []Message
	// Tools are offered to the model; the caller keeps them sorted by name so
	// the request prefix stays byte-stable across steps.
	Tools []ToolSpec
	// MaxTokens caps the output; zero means the implementation's default.
	MaxTokens int
	// Temperature is sent only when non-nil.
	Temperature *float64
}

// EventType tells which fields of an Event are set.
type EventType int

const (
	// EventTextDelta carries visible answer text in Text.
	EventTextDelta EventType = iota + 1
	// EventReasoningDelta carries reasoning ("thinking") text in Text.
	EventReasoningDelta
	// EventToolCall carries one complete tool call (arguments fully
	// accumulated) in ToolCall.
	EventToolCall
	// EventDone ends the stream: Message, StopReason, RawStopReason and Usage
	// are set.
	EventDone
)

func (t EventType) String() string {
	switch t {
	case EventTextDelta:
		return "text"
	case EventReasoningDelta:
		return "reasoning"
	case EventToolCall:
		return "tool_call"
	case EventDone:
		return "done"
	}
	return "unknown"
}

// Event is one normalized stream event.
type Event struct {
	Type EventType
	// Text is the delta of an EventTextDelta or EventReasoningDelta.
	Text string
	// ToolCall is set on EventToolCall.
	ToolCall ToolCall
	// Message is the complete assistant message on EventDone: text, reasoning
	// blocks (with signatures, for pass-back) and tool calls, in order.
	Message *Message
	// StopReason is set on EventDone.
	StopReason StopReason
	// RawStopReason is the provider's own stop value, for logs and "other".
	RawStopReason string
	// Usage is set on EventDone; Usage.Known is false when the endpoint
	// reported none.
	Usage Usage
}
