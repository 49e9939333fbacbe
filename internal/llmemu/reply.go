package llmemu

import (
	"net/http"
	"time"
	"unicode"
	"unicode/utf8"
)

// Reply scripts one response. The zero value is an empty answer that ends
// normally (finish_reason "stop" / stop_reason "end_turn").
type Reply struct {
	// Reasoning is streamed first: reasoning_content deltas (OpenAI,
	// DeepSeek style) or a thinking block with a signature (Anthropic).
	Reasoning string
	// Text is the answer, streamed as token-sized deltas.
	Text string
	// ToolCalls are streamed after the text, arguments in fragments.
	ToolCalls []ToolCall
	// Stop overrides the raw finish/stop reason. Default: tool_calls/tool_use
	// with tool calls, length/max_tokens when cut by the request's max
	// tokens, stop/end_turn otherwise.
	Stop string
	// Usage overrides the reported usage. Default: input =
	// Recorded.InputTokens, output = number of deltas, nothing cached. To
	// report cached tokens, a responder can set e.g.
	// &Usage{InputTokens: req.InputTokens(), OutputTokens: len(Tokens(text)), CachedTokens: …}.
	Usage *Usage
	// Delay is waited before the first byte (status line) is written.
	Delay time.Duration
	// Error makes the reply fail: an HTTP error response, or with
	// Error.MidStream an error event after CutAfter deltas.
	Error *ErrorReply
	// Truncate ends the body cleanly after CutAfter deltas, without finish
	// reason, usage or terminal marker ([DONE] / message_stop).
	Truncate bool
	// Abort resets the connection after CutAfter deltas (the client sees an
	// unexpected EOF rather than a clean end of body).
	Abort bool
	// CutAfter is the number of deltas sent before a Truncate, Abort or
	// mid-stream Error takes effect; 0 cuts right after the opening event.
	CutAfter int
}

// ToolCall is one tool call, scripted in a Reply or seen in a recorded
// assistant message.
type ToolCall struct {
	// ID is the call id. Empty in a Reply: one is generated
	// (call_… for OpenAI, toolu_… for Anthropic).
	ID   string
	Name string
	// Arguments is the JSON object text. Empty means no arguments ("{}").
	Arguments string
}

// Usage is token usage as the emulator reports it.
type Usage struct {
	// InputTokens is the total input, cached tokens included. On the
	// Anthropic wire input_tokens is reported as InputTokens minus
	// CachedTokens minus CacheWriteTokens.
	InputTokens  int
	OutputTokens int
	// CachedTokens is the part of the input read from a prompt cache
	// (prompt_tokens_details.cached_tokens / cache_read_input_tokens).
	CachedTokens int
	// CacheWriteTokens is the part written to the cache (Anthropic
	// cache_creation_input_tokens; not reported on the OpenAI wire).
	CacheWriteTokens int
}

// ErrorReply describes a failure in the protocol's own error format.
type ErrorReply struct {
	// Status is the HTTP status; 0 means 500. Ignored with MidStream.
	Status int
	// Type is the error type ("rate_limit_error", "server_error", …); empty
	// means the protocol's usual type for Status (overloaded_error for an
	// Anthropic mid-stream error, server_error for OpenAI).
	Type string
	// Code is the OpenAI "code" field; empty means the usual one or null.
	Code string
	// Param is the OpenAI "param" field; empty means null.
	Param string
	// Message is the human-readable message; empty means a stock one.
	Message string
	// Body, when set, is sent verbatim instead of the generated JSON: as the
	// response body, or as the data of the mid-stream error event (so other
	// shapes can be scripted, e.g. OpenRouter's chunk with "error" and
	// finish_reason "error", or vLLM's {"object":"error",…}).
	Body string
	// RetryAfter, when positive, sets Retry-After (whole seconds, rounded
	// up) and retry-after-ms.
	RetryAfter time.Duration
	// Header holds extra response headers (e.g. x-should-retry).
	Header http.Header
	// MidStream answers 200 and starts the stream, then sends the error
	// event after Reply.CutAfter deltas and ends the body.
	MidStream bool
}

// DefaultReply is the answer used when neither the queue nor a responder
// decides: a text answer derived from the last user message.
func DefaultReply(req Recorded) Reply {
	return Reply{Text: AnswerFor(req.LastUserText())}
}

// AnswerFor is the text DefaultReply streams for a last user message, so a
// test can predict it.
func AnswerFor(userText string) string {
	if userText == "" {
		return "Hello from llmemu."
	}
	return "You said: " + userText + ". This is a scripted answer from llmemu."
}

// Tokens splits s into the token-sized deltas the emulator streams: each
// piece is a word with its leading whitespace; words longer than six
// characters are cut into pieces of four. Pieces never split a UTF-8
// sequence and concatenate back to s.
func Tokens(s string) []string {
	var out []string
	for len(s) > 0 {
		n := tokenLen(s)
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func tokenLen(s string) int {
	// Leading whitespace rides with the next word unless it is a long run
	// (indentation), which becomes a piece of its own.
	i, spaces := 0, 0
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += w
		spaces++
		if spaces == 16 {
			return i
		}
	}
	if i == len(s) || spaces > 4 {
		return i
	}
	// Measure the word: take it whole up to six runes, else four runes.
	j, runes := i, 0
	cut := -1
	for j < len(s) {
		r, w := utf8.DecodeRuneInString(s[j:])
		if unicode.IsSpace(r) {
			break
		}
		j += w
		runes++
		if runes == 4 {
			cut = j
		}
		if runes > 6 {
			return cut
		}
	}
	return j
}

// fragmentSizes is the rune-length cycle used to cut tool arguments, so the
// fragments look irregular like real ones.
var fragmentSizes = [...]int{3, 5, 2, 6, 4, 7}

// fragments cuts tool-argument text into pieces of a few runes each.
func fragments(s string) []string {
	var out []string
	for k := 0; len(s) > 0; k++ {
		size := fragmentSizes[k%len(fragmentSizes)]
		i := 0
		for n := 0; n < size && i < len(s); n++ {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

type stepKind uint8

const (
	stepReasoning stepKind = iota
	stepText
	stepToolStart // the call's id and name (and an empty argument piece)
	stepToolArgs
)

// step is one delta of the output, protocol-neutral.
type step struct {
	kind stepKind
	tool int // index into Reply.ToolCalls
	text string
}

// plan turns a reply into its sequence of deltas. noArgs is the argument
// text sent for a call with empty Arguments ("{}" for OpenAI, nothing for
// Anthropic, matching recordings).
func plan(r Reply, noArgs string) []step {
	var steps []step
	for _, t := range Tokens(r.Reasoning) {
		steps = append(steps, step{kind: stepReasoning, text: t})
	}
	for _, t := range Tokens(r.Text) {
		steps = append(steps, step{kind: stepText, text: t})
	}
	for i, tc := range r.ToolCalls {
		steps = append(steps, step{kind: stepToolStart, tool: i})
		args := tc.Arguments
		if args == "" {
			args = noArgs
		}
		for _, f := range fragments(args) {
			steps = append(steps, step{kind: stepToolArgs, tool: i, text: f})
		}
	}
	return steps
}
