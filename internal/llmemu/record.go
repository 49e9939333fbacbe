package llmemu

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// Protocol names the wire protocol of a request.
type Protocol string

// The protocols the emulator speaks.
const (
	OpenAI    Protocol = "openai"    // POST /v1/chat/completions
	Anthropic Protocol = "anthropic" // POST /v1/messages
)

// Recorded is one request as the emulator received it, plus a
// protocol-neutral view of its conversation. Treat it as read-only: slices
// and maps are shared between copies.
type Recorded struct {
	// Seq numbers requests from 1 in arrival order.
	Seq      int
	Protocol Protocol
	Method   string
	Path     string
	// Header is the request header with credentials (Authorization,
	// X-Api-Key, Api-Key, Cookie) replaced by "[redacted]".
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// JSON is the decoded body; nil when it is not a JSON object.
	JSON map[string]any
	// Model, Stream and MaxTokens are read from the body (MaxTokens from
	// max_tokens or max_completion_tokens; 0 when absent).
	Model     string
	Stream    bool
	MaxTokens int
	// IncludeUsage reports stream_options.include_usage (OpenAI).
	IncludeUsage bool
	// Messages is the conversation in a protocol-neutral form; an Anthropic
	// top-level system prompt comes first as a "system" message.
	Messages []Message
	// Tools lists the names of the tools offered, in order.
	Tools []string
	// Status is the HTTP status the emulator answered with (200 for a
	// stream, even one that later fails mid-way). Zero while a responder
	// is deciding.
	Status int
}

// Message is one message of a recorded conversation.
type Message struct {
	// Role is "system", "user", "assistant" or "tool". An Anthropic user
	// message holding tool_result blocks becomes one "tool" message per
	// block (and a "user" message for any text blocks, in order).
	Role string
	// Text joins the message's text parts with "\n".
	Text string
	// Reasoning is DeepSeek reasoning_content, or the joined text of
	// Anthropic thinking blocks.
	Reasoning string
	// ToolCalls are the calls of an assistant message; Arguments holds the
	// JSON text (an Anthropic input object re-encoded compactly).
	ToolCalls []ToolCall
	// ToolCallID is the id a "tool" message answers.
	ToolCallID string
	// IsError is an Anthropic tool_result's is_error.
	IsError bool
	// Media are the message's images and documents, decoded: OpenAI
	// image_url and file parts, Anthropic image and document blocks
	// (inside a tool_result too).
	Media []Media
}

// LastUserText returns the text of the last "user" message that has text,
// or "".
func (r Recorded) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" && m.Text != "" {
			return m.Text
		}
	}
	return ""
}

// InputTokens is the emulator's input-token count for the request: body
// bytes / 4, rounded up, at least 1, where each image or document counts
// by the provider's size formula instead of its base64 (see Media). It is
// the default reported input usage, what count_tokens answers and what
// Options.ContextWindow is checked against.
func (r Recorded) InputTokens() int {
	n, media := len(r.Body), 0
	for _, m := range r.Media() {
		n -= m.encoded
		media += m.tokens(r.Protocol)
	}
	return max(1, (max(n, 0)+3)/4+media)
}

// LastMessage returns the last message of the conversation, or the zero
// Message when there is none.
func (r Recorded) LastMessage() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// redactedHeaders are the credential headers whose values are never kept.
var redactedHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "Proxy-Authorization", "Cookie"}

func redact(h http.Header) http.Header {
	out := h.Clone()
	for _, k := range redactedHeaders {
		if vs, ok := out[k]; ok {
			for i := range vs {
				vs[i] = "[redacted]"
			}
		}
	}
	return out
}

// decodeBody fills the body-derived fields of rec. It reports whether the
// body is a JSON object.
func decodeBody(rec *Recorded) bool {
	if err := json.Unmarshal(rec.Body, &rec.JSON); err != nil || rec.JSON == nil {
		rec.JSON = nil
		return false
	}
	switch rec.Protocol {
	case OpenAI:
		decodeOpenAI(rec)
	case Anthropic:
		decodeAnthropic(rec)
	}
	return true
}

type oaRequest struct {
	Model               string `json:"model"`
	Stream              bool   `json:"stream"`
	MaxTokens           int    `json:"max_tokens"`
	MaxCompletionTokens int    `json:"max_completion_tokens"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []struct {
		Role             string          `json:"role"`
		Content          json.RawMessage `json:"content"`
		ReasoningContent string          `json:"reasoning_content"`
		ToolCallID       string          `json:"tool_call_id"`
		ToolCalls        []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

func decodeOpenAI(rec *Recorded) {
	var req oaRequest
	// Fields of unexpected types are left zero; the raw JSON is kept.
	_ = json.Unmarshal(rec.Body, &req)
	rec.Model, rec.Stream = req.Model, req.Stream
	rec.MaxTokens = max(req.MaxTokens, req.MaxCompletionTokens)
	rec.IncludeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	for _, m := range req.Messages {
		msg := Message{Role: m.Role, Text: contentText(m.Content), Reasoning: m.ReasoningContent, ToolCallID: m.ToolCallID, Media: openAIMedia(m.Content)}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		rec.Messages = append(rec.Messages, msg)
	}
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Function.Name)
	}
}

type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Source    *anSource       `json:"source"`
	Title     string          `json:"title"`
}

type anRequest struct {
	Model     string          `json:"model"`
	Stream    bool            `json:"stream"`
	MaxTokens int             `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

func decodeAnthropic(rec *Recorded) {
	var req anRequest
	_ = json.Unmarshal(rec.Body, &req)
	rec.Model, rec.Stream, rec.MaxTokens = req.Model, req.Stream, req.MaxTokens
	if sys := contentText(req.System); sys != "" {
		rec.Messages = append(rec.Messages, Message{Role: "system", Text: sys})
	}
	for _, m := range req.Messages {
		rec.Messages = append(rec.Messages, anthropicMessages(m.Role, m.Content)...)
	}
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Name)
	}
}

// anthropicMessages normalizes one Anthropic message, splitting tool_result
// blocks into "tool" messages.
func anthropicMessages(role string, content json.RawMessage) []Message {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []Message{{Role: role, Text: s}}
	}
	var blocks []anBlock
	_ = json.Unmarshal(content, &blocks)
	var out []Message
	cur := Message{Role: role}
	var texts, thoughts []string
	flush := func() {
		cur.Text, cur.Reasoning = strings.Join(texts, "\n"), strings.Join(thoughts, "\n")
		if cur.Text != "" || cur.Reasoning != "" || len(cur.ToolCalls) > 0 || len(cur.Media) > 0 {
			out = append(out, cur)
		}
		cur, texts, thoughts = Message{Role: role}, nil, nil
	}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "thinking":
			thoughts = append(thoughts, b.Thinking)
		case "image", "document":
			if m, ok := anthropicMedia(b.Type, b.Title, b.Source); ok {
				cur.Media = append(cur.Media, m)
			}
		case "tool_use":
			args := "{}"
			var buf bytes.Buffer
			if json.Compact(&buf, b.Input) == nil && buf.Len() > 0 {
				args = buf.String()
			}
			cur.ToolCalls = append(cur.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		case "tool_result":
			flush()
			out = append(out, Message{Role: "tool", Text: contentText(b.Content), ToolCallID: b.ToolUseID, IsError: b.IsError, Media: anthropicToolMedia(b.Content)})
		}
	}
	flush()
	if len(out) == 0 {
		out = append(out, Message{Role: role})
	}
	return out
}

// contentText reads a content value that is a string, null, or an array of
// parts/blocks with "text" fields, joining texts with "\n".
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" || p.Type == "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}
