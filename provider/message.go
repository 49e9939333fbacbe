package provider

import "encoding/json"

// Role is who speaks a message.
type Role string

// The four roles of the normalized conversation.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool is one tool result; ToolCallID names the call it answers.
	// Consecutive tool messages after an assistant message are the results of
	// that step.
	RoleTool Role = "tool"
)

// Message is one element of a conversation. It is stored as JSON in the
// session transcript, so field names are part of the stored format: extend,
// never rename.
type Message struct {
	Role Role `json:"role"`
	// Content is the text of a system, user or tool message, or the visible
	// text of an assistant message.
	Content string `json:"content,omitempty"`
	// Parts are what a user message (files shared with it) or a tool
	// message (images a tool returned) carries besides Content, in order.
	Parts []Part `json:"parts,omitempty"`

	// UserID and UserName say who wrote a user message (several people may
	// talk in one Slack thread).
	UserID   string `json:"user_id,omitempty"`
	UserName string `json:"user_name,omitempty"`

	// Reasoning holds an assistant message's reasoning blocks in order, kept
	// so they can be passed back unmodified.
	Reasoning []Reasoning `json:"reasoning,omitempty"`
	// ToolCalls are the calls an assistant message makes, in order.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`

	// ToolCallID, ToolName and IsError describe a tool message.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`

	// Summary marks a system message that replaced older history during
	// compaction.
	Summary bool `json:"summary,omitempty"`
	// Interrupted marks an assistant message whose answer was cut short
	// (Stop button, shutdown, error).
	Interrupted bool `json:"interrupted,omitempty"`

	// Meta is free-form data the caller keeps with the message (for example
	// the Slack ts it came from); providers never send it.
	Meta map[string]string `json:"meta,omitempty"`
}

// Reasoning is one reasoning block of an assistant message.
type Reasoning struct {
	// Text is the reasoning text (Anthropic thinking, DeepSeek
	// reasoning_content, OpenRouter reasoning).
	Text string `json:"text,omitempty"`
	// Signature is Anthropic's thinking signature; a block with a signature
	// must be passed back byte for byte.
	Signature string `json:"signature,omitempty"`
	// Redacted is the opaque data of an Anthropic redacted_thinking block.
	Redacted string `json:"redacted,omitempty"`
}

// ToolSpec describes a tool offered to the model.
type ToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is a JSON Schema object; empty means {"type":"object"}.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// ToolCall is one complete call the model asked for.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text the model produced. It is a string, not a
	// json.RawMessage, because a model may produce invalid JSON and the
	// transcript must still encode.
	Arguments string `json:"arguments"`
}

// ToolResult is the outcome of one tool call, as the model will see it.
type ToolResult struct {
	CallID  string
	Name    string
	Content string
	// Parts are images the tool returned besides its text.
	Parts   []Part
	IsError bool
}

// Message returns the tool message that carries r.
func (r ToolResult) Message() Message {
	return Message{Role: RoleTool, ToolCallID: r.CallID, ToolName: r.Name, Content: r.Content, Parts: r.Parts, IsError: r.IsError}
}

// ReasoningText returns the concatenated reasoning text of m.
func (m Message) ReasoningText() string {
	var n int
	for _, r := range m.Reasoning {
		n += len(r.Text)
	}
	b := make([]byte, 0, n)
	for _, r := range m.Reasoning {
		b = append(b, r.Text...)
	}
	return string(b)
}
