package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/jsondec"
	"github.com/bobbinbot/bobbin/provider/internal/transport"
)

// chunk is the part of a chat.completion.chunk we read. Unknown fields
// (obfuscation, native_finish_reason, provider, cost, ...) are ignored.
type chunk struct {
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage"`
}

type choice struct {
	// Index is the choice number; we request one choice, so anything but 0
	// is ignored. A missing index means 0.
	Index int   `json:"index"`
	Delta delta `json:"delta"`
	// FinishReason stays "" for null.
	FinishReason string `json:"finish_reason"`
}

type delta struct {
	Content string `json:"content"`
	// Refusal carries OpenAI's refusal text instead of content.
	Refusal string `json:"refusal"`
	// ReasoningContent is DeepSeek's and vLLM's reasoning field; Reasoning
	// is OpenRouter's, Ollama's and newer vLLM's.
	ReasoningContent string          `json:"reasoning_content"`
	Reasoning        string          `json:"reasoning"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	// Index is nil when the server omits it (old Ollama).
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	// PromptCacheHitTokens is DeepSeek's name for cached input.
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
}

func (u *usage) normalize() provider.Usage {
	n := provider.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, Known: true}
	if d := u.PromptTokensDetails; d != nil {
		n.CacheReadTokens = d.CachedTokens
		n.CacheWriteTokens = d.CacheWriteTokens
	}
	if n.CacheReadTokens == 0 {
		n.CacheReadTokens = u.PromptCacheHitTokens
	}
	return n
}

// errorProbe reads the three mid-stream error shapes: a bare
// {"error":{...}} line (OpenAI, vLLM), a chunk whose choice has
// finish_reason "error" next to a top-level error object (OpenRouter), and
// {"object":"error",...} (old vLLM).
type errorProbe struct {
	Object  string          `json:"object"`
	Error   json.RawMessage `json:"error"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// errorBody is the content of an "error" object.
type errorBody struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	// Param names the refused field ("max_tokens"), or is null.
	Param json.RawMessage `json:"param"`
}

// callAcc accumulates one tool call.
type callAcc struct {
	index int // the server's index, or the position when it sent none
	id    string
	name  string
	args  []byte
}

// decoder turns the data of chat.completion.chunk events into normalized
// events. The zero value is ready.
type decoder struct {
	text         strings.Builder
	reasoning    strings.Builder
	calls        []callAcc
	finishReason string
	usage        provider.Usage
	events       []provider.Event
	json         jsondec.Decoder
}

// feed decodes one data payload. The returned slice is valid until the
// next call. A mid-stream error is returned after the events decoded before
// it.
func (d *decoder) feed(data string) ([]provider.Event, error) {
	d.events = d.events[:0]
	if strings.TrimSpace(data) == "" {
		return nil, nil // an empty data line carries nothing
	}
	// Every error shape contains the key or value "error"; ordinary chunks
	// almost never do, so they skip the second decode.
	if strings.Contains(data, `"error"`) {
		if err := probeError([]byte(data)); err != nil {
			return nil, err
		}
	}
	var c chunk
	if err := d.json.UnmarshalString(data, &c); err != nil {
		return nil, fmt.Errorf("decoding chunk: %w", err)
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		dl := &ch.Delta
		// Some servers send the same text in both reasoning fields; take one.
		r := dl.ReasoningContent
		if r == "" {
			r = dl.Reasoning
		}
		if r != "" {
			d.reasoning.WriteString(r)
			d.events = append(d.events, provider.Event{Type: provider.EventReasoningDelta, Text: r})
		}
		for _, t := range [2]string{dl.Content, dl.Refusal} {
			if t != "" {
				d.text.WriteString(t)
				d.events = append(d.events, provider.Event{Type: provider.EventTextDelta, Text: t})
			}
		}
		for pos := range dl.ToolCalls {
			if err := d.addCall(&dl.ToolCalls[pos], pos); err != nil {
				return d.events, err
			}
		}
		// A later chunk with finish_reason null (OpenRouter's usage chunk)
		// must not erase it.
		if ch.FinishReason != "" {
			d.finishReason = ch.FinishReason
		}
	}
	if c.Usage != nil {
		d.usage = c.Usage.normalize()
	}
	return d.events, nil
}

// maxCalls bounds the tool calls of one response, so a hostile stream
// cannot grow the decoder (and addCall's backward search) without limit.
const maxCalls = 1024

// addCall merges one tool-call fragment.
func (d *decoder) addCall(t *toolCallDelta, pos int) error {
	idx := pos
	if t.Index != nil {
		idx = *t.Index
	}
	// The newest call with this index receives the fragment, unless the
	// fragment names a different call: Ollama sends several whole calls all
	// at index 0.
	slot := -1
	for i := len(d.calls) - 1; i >= 0; i-- {
		if d.calls[i].index == idx {
			slot = i
			break
		}
	}
	if slot < 0 || (t.ID != "" && d.calls[slot].id != "" && d.calls[slot].id != t.ID) {
		if len(d.calls) >= maxCalls {
			return fmt.Errorf("more than %d tool calls", maxCalls)
		}
		d.calls = append(d.calls, callAcc{index: idx})
		slot = len(d.calls) - 1
	}
	c := &d.calls[slot]
	if c.id == "" {
		c.id = t.ID
	}
	if c.name == "" {
		c.name = t.Function.Name
	}
	c.args = append(c.args, t.Function.Arguments...)
	return nil
}

// end ends the stream: with sawDone false (EOF without [DONE]) it is
// lenient only when a finish reason arrived. It returns the tool-call events
// (only for a tool-use stop) and the done event.
func (d *decoder) end(sawDone bool) ([]provider.Event, error) {
	if d.finishReason == "" {
		if sawDone {
			// [DONE] without any finish reason: the server ended the stream
			// deliberately but said nothing about why.
			return d.done(provider.StopOther), nil
		}
		return nil, provider.ErrTruncated
	}
	return d.done(stopReason(d.finishReason, len(d.calls) > 0)), nil
}

func (d *decoder) done(stop provider.StopReason) []provider.Event {
	msg := &provider.Message{Role: provider.RoleAssistant, Content: d.text.String()}
	if d.reasoning.Len() > 0 {
		msg.Reasoning = []provider.Reasoning{{Text: d.reasoning.String()}}
	}
	evs := d.events[:0]
	// Tool calls are runnable only after a tool-use stop; after max_tokens
	// their arguments may be cut, so they are recorded nowhere.
	if stop == provider.StopToolUse {
		msg.ToolCalls = make([]provider.ToolCall, len(d.calls))
		for i, c := range d.calls {
			tc := provider.ToolCall{ID: c.id, Name: c.name, Arguments: string(c.args)}
			if tc.ID == "" {
				// Some local servers send no id; the tool message must
				// still name the call.
				tc.ID = "call_" + strconv.Itoa(i)
			}
			if strings.TrimSpace(tc.Arguments) == "" {
				tc.Arguments = "{}"
			}
			msg.ToolCalls[i] = tc
			evs = append(evs, provider.Event{Type: provider.EventToolCall, ToolCall: tc})
		}
	}
	evs = append(evs, provider.Event{
		Type:          provider.EventDone,
		Message:       msg,
		StopReason:    stop,
		RawStopReason: d.finishReason,
		Usage:         d.usage,
	})
	return evs
}

// stopReason maps a finish_reason (providers.md §8).
func stopReason(raw string, hasCalls bool) provider.StopReason {
	switch raw {
	case "tool_calls", "function_call":
		if hasCalls {
			return provider.StopToolUse
		}
		return provider.StopOther
	case "stop":
		// Ollama reports "stop" even when it returns tool calls.
		if hasCalls {
			return provider.StopToolUse
		}
		return provider.StopEndTurn
	case "length", "model_context_window_exceeded":
		return provider.StopMaxTokens
	}
	return provider.StopOther
}

// probeError reports a mid-stream error in b, or nil. "error": null is not
// an error.
func probeError(b []byte) error {
	var p errorProbe
	if json.Unmarshal(b, &p) != nil {
		return nil // the chunk decode reports malformed JSON
	}
	if p.Object == "error" {
		return streamError(errorBody{Message: p.Message, Type: p.Type, Code: p.Code})
	}
	raw := bytes.TrimSpace(p.Error)
	if len(raw) == 0 || raw[0] == 'n' { // absent or null
		return nil
	}
	var eb errorBody
	if raw[0] == '"' {
		// Ollama style: "error": "message".
		if json.Unmarshal(raw, &eb.Message) != nil {
			return nil
		}
	} else if raw[0] != '{' || json.Unmarshal(raw, &eb) != nil {
		return nil
	}
	return streamError(eb)
}

// streamError builds the APIError of a mid-stream error.
func streamError(eb errorBody) *provider.APIError {
	ae := &provider.APIError{Provider: "openai", Type: eb.Type, Code: codeString(eb.Code), Message: transport.Shorten(eb.Message)}
	if ae.Message == "" {
		ae.Message = "error in stream"
	}
	classify(ae)
	return ae
}

// codeString renders a code that may be a string (OpenAI) or a number
// (OpenRouter, vLLM).
func codeString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// classify sets Retryable and ContextLength from the type, code and
// message.
func classify(ae *provider.APIError) {
	lt, lc := strings.ToLower(ae.Type), strings.ToLower(ae.Code)
	switch {
	case lc == "context_length_exceeded" || lt == "context_length_exceeded":
		ae.ContextLength = true
	default:
		m := strings.ToLower(ae.Message)
		for _, s := range contextPhrases {
			if strings.Contains(m, s) {
				ae.ContextLength = true
				break
			}
		}
	}
	if ae.ContextLength {
		return
	}
	switch lt {
	case "server_error", "rate_limit_error", "rate_limit_exceeded", "overloaded_error", "api_error", "timeout", "service_unavailable":
		ae.Retryable = true
	}
	switch lc {
	case "rate_limit_exceeded", "server_error", "overloaded":
		ae.Retryable = true
	}
	if n, err := strconv.Atoi(lc); err == nil && (n == 408 || n == 429 || n >= 500) {
		ae.Retryable = true
	}
}

// contextPhrases are lowercase fragments of the context-window errors seen
// from OpenAI, DeepSeek, vLLM, OpenRouter and llama.cpp.
var contextPhrases = [...]string{
	"maximum context length",
	"context_length_exceeded",
	"context length exceeded",
	"exceeds the available context size",
	"exceed context window",
	"exceeds the context window",
}

// decodeHTTPError classifies the body of a non-2xx answer for the
// transport. Shapes: {"error":{...}} (OpenAI, DeepSeek, OpenRouter with a
// numeric code), {"error":"..."} (Ollama), {"object":"error",...} (vLLM),
// {"message":...} and {"detail":...} (other gateways).
func decodeHTTPError(_ int, body []byte) *provider.APIError {
	var p struct {
		errorProbe
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &p) != nil {
		return nil
	}
	var eb errorBody
	raw := bytes.TrimSpace(p.Error)
	switch {
	case len(raw) > 0 && raw[0] == '{':
		_ = json.Unmarshal(raw, &eb)
	case len(raw) > 0 && raw[0] == '"':
		_ = json.Unmarshal(raw, &eb.Message)
	default:
		eb = errorBody{Message: p.Message, Type: p.Type, Code: p.Code}
		if eb.Message == "" && len(p.Detail) > 0 {
			if json.Unmarshal(p.Detail, &eb.Message) != nil {
				eb.Message = string(p.Detail)
			}
		}
	}
	ae := &provider.APIError{Type: eb.Type, Code: codeString(eb.Code), Param: codeString(eb.Param), Message: transport.Shorten(eb.Message)}
	classify(ae)
	return ae
}
