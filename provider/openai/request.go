package openai

import (
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/splice"
)

type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	Tools               []chatTool     `json:"tools,omitempty"`
	MaxTokens           int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// chatMessage is one request message. Its JSON is written by MarshalJSON so
// that reasoning_content appears exactly on assistant messages with tool
// calls (DeepSeek answers 400 "Missing reasoning_content field" otherwise,
// even when it is "") and nowhere else.
type chatMessage struct {
	Role    string
	Content string
	// Parts, when set, replace Content with an array of content parts (a
	// user message carrying images or PDFs).
	Parts      []any
	ToolCalls  []chatToolCall
	ToolCallID string
	Reasoning  string
}

type chatToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function chatCallFunction `json:"function"`
}

type chatCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func (m chatMessage) MarshalJSON() ([]byte, error) {
	switch {
	case m.Role == "tool":
		return json.Marshal(struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			Content    string `json:"content"`
		}{m.Role, m.ToolCallID, m.Content})
	case len(m.ToolCalls) > 0:
		// content is null rather than "" when the turn is only tool calls,
		// as the API documents; reasoning_content is always present.
		var content *string
		if m.Content != "" {
			content = &m.Content
		}
		return json.Marshal(struct {
			Role             string         `json:"role"`
			Content          *string        `json:"content"`
			ReasoningContent string         `json:"reasoning_content"`
			ToolCalls        []chatToolCall `json:"tool_calls"`
		}{m.Role, content, m.Reasoning, m.ToolCalls})
	}
	if m.Parts != nil {
		return json.Marshal(struct {
			Role    string `json:"role"`
			Content []any  `json:"content"`
		}{m.Role, m.Parts})
	}
	return json.Marshal(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{m.Role, m.Content})
}

// emptySchema is sent for a tool without an input schema.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// requestBody builds the chat/completions JSON for req, spelling the
// optional parameters as v says.
func (c *Client) requestBody(req provider.Request, v variant) ([]byte, error) {
	sp := splice.New()
	cr := chatRequest{
		Model:       req.Model,
		Messages:    c.messages(req.Messages, sp),
		Temperature: req.Temperature,
		Stream:      true,
	}
	if v.streamUsage {
		cr.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if req.MaxTokens > 0 {
		if v.tokenParam == TokenParamMaxCompletionTokens {
			cr.MaxCompletionTokens = req.MaxTokens
		} else {
			cr.MaxTokens = req.MaxTokens
		}
	}
	for _, t := range req.Tools {
		params := t.InputSchema
		if len(params) == 0 {
			params = emptySchema
		}
		cr.Tools = append(cr.Tools, chatTool{Type: "function", Function: chatFunction{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	body, err := json.Marshal(cr)
	if err != nil {
		return nil, err
	}
	return sp.Splice(body)
}

// messages converts the conversation:
//   - leading system messages are joined into one system message; a later
//     one, or a compaction summary (Message.Summary) anywhere, is a system
//     message only with MidConversationSystem, else a user message;
//   - a user message with a speaker gets the prefix "[Name (ID)] ", "[Name] "
//     or "[ID] " so the model can tell people in a shared thread apart;
//   - an assistant message with neither text nor tool calls is dropped;
//   - each tool result is its own "tool" message; an error result is
//     prefixed "Error: " unless it already starts so (the agent's own
//     failures do);
//   - every tool call of an assistant message is answered: a call without a
//     result (a run aborted between call and result) gets a synthesized
//     error result, because the API rejects unanswered tool_call ids; a
//     result whose call is not in the preceding assistant message becomes
//     user text, for the same reason.
func (c *Client) messages(in []provider.Message, sp *splice.Splicer) []chatMessage {
	out := make([]chatMessage, 0, len(in)+1)
	leading := true
	// pending are the ids of the last assistant message's calls not yet
	// answered, in order.
	var pending []provider.ToolCall
	flush := func() {
		for _, tc := range pending {
			out = append(out, chatMessage{Role: "tool", ToolCallID: tc.ID, Content: "Error: the tool call was not run (interrupted)."})
		}
		pending = nil
	}
	for _, m := range in {
		if m.Role != provider.RoleTool {
			flush()
		}
		if m.Role != provider.RoleSystem || m.Summary {
			// A compaction summary changes at every compaction: it is
			// conversation, not system prompt, even right after the prompt.
			leading = false
		}
		switch m.Role {
		case provider.RoleSystem:
			if leading && len(out) > 0 {
				// One system message: local templates (Qwen, Llama, Gemma)
				// reject a second one even when it directly follows the
				// first ("System message must be at the beginning.").
				out[0].Content += "\n\n" + m.Content
				continue
			}
			role := "system"
			if !leading && !c.opts.MidConversationSystem {
				role = "user"
			}
			out = append(out, chatMessage{Role: role, Content: m.Content})
		case provider.RoleUser:
			text, parts := userContent(m, sp)
			out = append(out, chatMessage{Role: "user", Content: text, Parts: parts})
		case provider.RoleAssistant:
			if m.Content == "" && len(m.ToolCalls) == 0 {
				// An answer interrupted before any text says nothing, and
				// strict servers reject an assistant message with neither
				// content nor tool calls.
				continue
			}
			cm := chatMessage{Role: "assistant", Content: m.Content}
			if len(m.ToolCalls) > 0 {
				cm.Reasoning = m.ReasoningText()
				for _, tc := range m.ToolCalls {
					args := tc.Arguments
					if strings.TrimSpace(args) == "" {
						args = "{}"
					}
					cm.ToolCalls = append(cm.ToolCalls, chatToolCall{ID: tc.ID, Type: "function", Function: chatCallFunction{Name: tc.Name, Arguments: args}})
				}
				pending = append(pending[:0:0], m.ToolCalls...)
			}
			out = append(out, cm)
		case provider.RoleTool:
			content := m.Content
			// The agent already words its own failures "Error: …": the
			// prefix is for results that do not say so themselves.
			if m.IsError && !strings.HasPrefix(content, "Error:") {
				content = "Error: " + content
			}
			content = withToolParts(content, m.Parts)
			i := indexCall(pending, m.ToolCallID)
			if i < 0 {
				c.log.Warn("openai: tool result without a matching call sent as user text", slog.String("tool_call_id", m.ToolCallID))
				name := m.ToolName
				if name == "" {
					name = "tool"
				}
				out = append(out, chatMessage{Role: "user", Content: "[result of " + name + "] " + content})
				continue
			}
			pending = append(pending[:i], pending[i+1:]...)
			out = append(out, chatMessage{Role: "tool", ToolCallID: m.ToolCallID, Content: content})
		}
	}
	flush()
	return out
}

func indexCall(calls []provider.ToolCall, id string) int {
	for i, tc := range calls {
		if tc.ID == id {
			return i
		}
	}
	return -1
}
