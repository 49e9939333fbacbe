package anthropic

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/splice"
)

// wireRequest is the body of POST /v1/messages.
type wireRequest struct {
	Model       string        `json:"model"`
	MaxTokens   int           `json:"max_tokens"`
	System      []textBlock   `json:"system,omitempty"`
	Messages    []wireMessage `json:"messages"`
	Tools       []wireTool    `json:"tools,omitempty"`
	Temperature *float64      `json:"temperature,omitempty"`
	Stream      bool          `json:"stream"`

	// media holds the image and PDF bytes spliced in by encode.
	media *splice.Splicer
}

// encode marshals w with its media spliced in.
func (w *wireRequest) encode() ([]byte, error) {
	b, err := json.Marshal(w)
	if err != nil {
		return nil, err
	}
	return w.media.Splice(b)
}

type wireMessage struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

type cacheControl struct {
	Type string `json:"type"`
}

// ephemeral is the only cache_control type the Messages API knows.
var ephemeral = &cacheControl{Type: "ephemeral"}

type textBlock struct {
	Type         string        `json:"type"` // "text"
	Text         string        `json:"text"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type thinkingBlock struct {
	Type      string `json:"type"` // "thinking"
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type redactedThinkingBlock struct {
	Type string `json:"type"` // "redacted_thinking"
	Data string `json:"data"`
}

type toolUseBlock struct {
	Type  string          `json:"type"` // "tool_use"
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type toolResultBlock struct {
	Type      string `json:"type"` // "tool_result"
	ToolUseID string `json:"tool_use_id"`
	// Content holds textBlock and imageBlock values.
	Content      []any         `json:"content,omitempty"`
	IsError      bool          `json:"is_error,omitempty"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type wireTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

// abortedToolResult answers a tool_use whose result never arrived (the run
// was stopped between the call and its result); the API rejects a tool_use
// without a tool_result right after it.
const abortedToolResult = "The tool call was not completed (the run was interrupted before it returned)."

// continuedText opens a conversation whose first kept message is not from
// the user: the Messages API requires the first message to be a user turn.
const continuedText = "(continuing the conversation)"

var emptyObject = json.RawMessage(`{}`)

// shaper builds the messages list of the wire body.
type shaper struct {
	log   *slog.Logger
	msgs  []wireMessage
	media *splice.Splicer
}

// buildRequest converts a normalized request into the Messages wire body.
func buildRequest(req provider.Request, maxTokens int, caching bool, log *slog.Logger) *wireRequest {
	if req.MaxTokens > 0 {
		maxTokens = req.MaxTokens
	}
	w := &wireRequest{
		Model:       req.Model,
		MaxTokens:   maxTokens,
		Temperature: req.Temperature,
		Stream:      true,
	}
	msgs := req.Messages
	// Leading system messages are the system prompt. A compaction summary
	// is not: it changes at every compaction, and as user text it keeps the
	// cached system prefix byte-stable.
	for len(msgs) > 0 && msgs[0].Role == provider.RoleSystem && !msgs[0].Summary {
		if msgs[0].Content != "" {
			w.System = append(w.System, textBlock{Type: "text", Text: msgs[0].Content})
		}
		msgs = msgs[1:]
	}
	if caching && len(w.System) > 0 {
		w.System[len(w.System)-1].CacheControl = ephemeral
	}
	for _, t := range req.Tools {
		schema := t.InputSchema
		if len(bytes.TrimSpace(schema)) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		w.Tools = append(w.Tools, wireTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	if caching && len(w.Tools) > 0 {
		w.Tools[len(w.Tools)-1].CacheControl = ephemeral
	}
	s := &shaper{log: log, media: splice.New()}
	s.messages(msgs)
	w.Messages, w.media = s.msgs, s.media
	if w.Messages == nil {
		w.Messages = []wireMessage{}
	}
	if caching {
		cacheConversation(w.Messages)
	}
	return w
}

// cacheConversation puts a breakpoint on the last block of the closing user
// message. A cache hit needs a breakpoint at or past the cached prefix, so
// with breakpoints on the system prompt and tools alone the history, which
// is most of a long thread's input and only ever appended to, would be
// billed in full at every step; with this one each request reads the
// previous request's prefix from the cache. Thinking blocks cannot carry
// cache_control; a user message never holds them.
func cacheConversation(msgs []wireMessage) {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "user" {
		return
	}
	content := msgs[len(msgs)-1].Content
	switch b := content[len(content)-1].(type) {
	case textBlock:
		b.CacheControl = ephemeral
		content[len(content)-1] = b
	case toolResultBlock:
		b.CacheControl = ephemeral
		content[len(content)-1] = b
	case imageBlock:
		b.CacheControl = ephemeral
		content[len(content)-1] = b
	case documentBlock:
		b.CacheControl = ephemeral
		content[len(content)-1] = b
	}
}

// add appends block to the last message if it has role, else opens a new
// message: consecutive same-role messages are merged.
func (s *shaper) add(role string, block any) {
	if n := len(s.msgs); n > 0 && s.msgs[n-1].Role == role {
		s.msgs[n-1].Content = append(s.msgs[n-1].Content, block)
		return
	}
	if len(s.msgs) == 0 && role != "user" {
		s.msgs = append(s.msgs, wireMessage{Role: "user", Content: []any{textBlock{Type: "text", Text: continuedText}}})
	}
	s.msgs = append(s.msgs, wireMessage{Role: role, Content: []any{block}})
}

func (s *shaper) addText(role, text string) {
	// The API rejects empty text blocks.
	if text == "" {
		return
	}
	s.add(role, textBlock{Type: "text", Text: text})
}

func (s *shaper) messages(msgs []provider.Message) {
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch m.Role {
		case provider.RoleSystem:
			// A later system message (a compaction summary) becomes user text:
			// the Messages API has no mid-conversation system role.
			s.addText("user", m.Content)
		case provider.RoleUser:
			s.user(m)
		case provider.RoleAssistant:
			s.assistant(m)
			if len(m.ToolCalls) == 0 {
				continue
			}
			// The tool messages that follow are this step's results.
			j := i + 1
			for j < len(msgs) && msgs[j].Role == provider.RoleTool {
				j++
			}
			s.toolResults(m.ToolCalls, msgs[i+1:j])
			i = j - 1
		case provider.RoleTool:
			// A result with no assistant tool_use right before it cannot be
			// sent as a tool_result.
			s.log.Warn("anthropic: dropping tool result without a preceding tool call", "tool_call_id", m.ToolCallID, "tool", m.ToolName)
		default:
			s.log.Warn("anthropic: dropping message with unknown role", "role", string(m.Role))
		}
	}
}

func (s *shaper) assistant(m provider.Message) {
	// Thinking blocks go first, unmodified and in order; reasoning without a
	// signature (another provider's) cannot be verified and is dropped.
	for _, r := range m.Reasoning {
		switch {
		case r.Redacted != "":
			s.add("assistant", redactedThinkingBlock{Type: "redacted_thinking", Data: r.Redacted})
		case r.Signature != "":
			s.add("assistant", thinkingBlock{Type: "thinking", Thinking: r.Text, Signature: r.Signature})
		}
	}
	s.addText("assistant", m.Content)
	seen := make(map[string]bool, len(m.ToolCalls))
	for _, tc := range m.ToolCalls {
		if seen[tc.ID] {
			continue
		}
		seen[tc.ID] = true
		s.add("assistant", toolUseBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: s.toolInput(tc)})
	}
}

// toolInput returns the call's arguments as a JSON object: the API accepts
// only an object for tool_use.input.
func (s *shaper) toolInput(tc provider.ToolCall) json.RawMessage {
	args := strings.TrimSpace(tc.Arguments)
	if args == "" {
		return emptyObject
	}
	if args[0] != '{' || !json.Valid([]byte(args)) {
		s.log.Warn("anthropic: tool call arguments are not a JSON object; sending {}", "tool_call_id", tc.ID, "tool", tc.Name, "bytes", len(tc.Arguments))
		return emptyObject
	}
	return json.RawMessage(args)
}

// toolResults puts every result of one step into the user message right
// after the assistant's tool_use blocks, in call order, synthesizing an error
// result for a call that has none.
func (s *shaper) toolResults(calls []provider.ToolCall, results []provider.Message) {
	byID := make(map[string]provider.Message, len(results))
	for _, r := range results {
		if _, dup := byID[r.ToolCallID]; !dup {
			byID[r.ToolCallID] = r
		}
	}
	done := make(map[string]bool, len(calls))
	for _, tc := range calls {
		if done[tc.ID] {
			continue
		}
		done[tc.ID] = true
		r, ok := byID[tc.ID]
		b := toolResultBlock{Type: "tool_result", ToolUseID: tc.ID}
		switch {
		case !ok:
			b.IsError = true
			b.Content = []any{textBlock{Type: "text", Text: abortedToolResult}}
		default:
			b.IsError = r.IsError
			if r.Content != "" {
				b.Content = []any{textBlock{Type: "text", Text: r.Content}}
			}
			b.Content = append(b.Content, s.toolResultParts(r.Parts)...)
		}
		s.add("user", b)
	}
	for _, r := range results {
		if !done[r.ToolCallID] {
			s.log.Warn("anthropic: dropping tool result for an unknown call", "tool_call_id", r.ToolCallID, "tool", r.ToolName)
		}
	}
}
