package anthropic

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/sse"
)

// decodeBody runs the decoder over an SSE body without HTTP.
func decodeBody(body string) ([]provider.Event, error) {
	rd := sse.NewReader(strings.NewReader(body), 0)
	var d decoder
	var evs []provider.Event
	for !d.done() {
		ev, err := rd.Next()
		if err == io.EOF {
			return evs, d.end()
		}
		if err != nil {
			return evs, err
		}
		err = d.feed(ev.Type, ev.Data)
		evs = append(evs, d.out...)
		d.out = d.out[:0]
		if err != nil {
			return evs, err
		}
	}
	return evs, nil
}

func text(s string) provider.Event { return provider.Event{Type: provider.EventTextDelta, Text: s} }
func think(s string) provider.Event {
	return provider.Event{Type: provider.EventReasoningDelta, Text: s}
}
func toolCall(id, name, args string) provider.Event {
	return provider.Event{Type: provider.EventToolCall, ToolCall: provider.ToolCall{ID: id, Name: name, Arguments: args}}
}

func readFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fixtureGoldens are the normalized events each recorded stream must yield.
var fixtureGoldens = []struct {
	file string
	want []provider.Event
}{{
	file: "anthropic-tool-use.turn1.sse",
	want: []provider.Event{
		text("I'll"), text(" get"), text(" the current weather in"), text(" San Francisco for you in"), text(" Fahrenheit."),
		toolCall("toolu_01RaX2WYWRWCbaeFHssmGJXG", "get_weather", `{"city": "San Francisco", "units": "fahrenheit"}`),
		{Type: provider.EventDone, StopReason: provider.StopToolUse, RawStopReason: "tool_use",
			Usage: provider.Usage{InputTokens: 397, OutputTokens: 89, Known: true},
			Message: &provider.Message{Role: provider.RoleAssistant,
				Content:   "I'll get the current weather in San Francisco for you in Fahrenheit.",
				ToolCalls: []provider.ToolCall{{ID: "toolu_01RaX2WYWRWCbaeFHssmGJXG", Name: "get_weather", Arguments: `{"city": "San Francisco", "units": "fahrenheit"}`}}}},
	},
}, {
	file: "anthropic-tool-use.turn2.sse",
	want: []provider.Event{
		text("The"), text(" current weather"), text(" in San Francisco is "), text("68 degrees Fahren"), text("heit."),
		{Type: provider.EventDone, StopReason: provider.StopEndTurn, RawStopReason: "end_turn",
			Usage:   provider.Usage{InputTokens: 509, OutputTokens: 19, Known: true},
			Message: &provider.Message{Role: provider.RoleAssistant, Content: "The current weather in San Francisco is 68 degrees Fahrenheit."}},
	},
}, {
	file: "anthropic-thinking-signature.sse",
	want: []provider.Event{
		think("The previous"), think(" result"), think(" was"), think(" 925."), think(" Now"), think(" I need to divide that"),
		think(" by 5.\n\n925"), think(" ÷ 5 "), think("= 185"),
		text("925"), text(" ÷ 5 "), text("= 185"),
		{Type: provider.EventDone, StopReason: provider.StopEndTurn, RawStopReason: "end_turn",
			Usage: provider.Usage{InputTokens: 69, OutputTokens: 53, Known: true},
			Message: &provider.Message{Role: provider.RoleAssistant, Content: "925 ÷ 5 = 185",
				Reasoning: []provider.Reasoning{{
					Text:      "The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185",
					Signature: "EvQBCkYICxgCKkAxhD4NUKFzudtZ6NzbZdEiBACIScTzqjPViM596iWLZIk4EFKYYBj3B6Ptl3b0dcQv/VeJBNbejNWIWRBn+KPNEgz6HWtKx7p+QRgKsEoaDGjsiqfht7gTRFYHiyIwD1VSmNqHxv3wy8KEMP+LYb/TC4UH3H97tuoaADARFFcA0phdfxnzKQxFnc9lwY+dKlzUsaKSUAFeu1bDL5ikZJ1vL0Fkz6JjoFke0L/wOJRIUDUlDUOFJ1tZ3ea7g6LGE/5hwuvWgLwewdcm64d+43l7F57XrOmqNd6flI2K/oPr/4yzNgvi/EhT6Ca17BgB",
				}}}},
	},
}, {
	file: "anthropic-tool-no-args.sse",
	want: []provider.Event{
		text("I'll update the issue list for"), text(" you."),
		toolCall("toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "updateIssueList", "{}"),
		{Type: provider.EventDone, StopReason: provider.StopToolUse, RawStopReason: "tool_use",
			Usage: provider.Usage{InputTokens: 565, OutputTokens: 48, Known: true},
			Message: &provider.Message{Role: provider.RoleAssistant, Content: "I'll update the issue list for you.",
				ToolCalls: []provider.ToolCall{{ID: "toolu_01QE1WLsSVp5hy5Q3GmGTmjP", Name: "updateIssueList", Arguments: "{}"}}}},
	},
}, {
	file: "anthropic-message-delta-input-tokens.sse",
	want: []provider.Event{
		text("p"), text("ong"),
		{Type: provider.EventDone, StopReason: provider.StopEndTurn, RawStopReason: "end_turn",
			Usage:   provider.Usage{InputTokens: 61, OutputTokens: 2, Known: true},
			Message: &provider.Message{Role: provider.RoleAssistant, Content: "pong"}},
	},
}, {
	// The cut tool_use must not surface as a call: max_tokens never runs tools.
	file: "anthropic-max-tokens-partial-tool-json.sse",
	want: []provider.Event{
		text("I"), text("'ll create a comprehensive tax guide for"), text(" someone with multiple W2s an"),
		text("d save it in a file called taxes.txt. Let"), text(" me do that for you now."),
		{Type: provider.EventDone, StopReason: provider.StopMaxTokens, RawStopReason: "max_tokens",
			Usage: provider.Usage{InputTokens: 450, OutputTokens: 124, Known: true},
			Message: &provider.Message{Role: provider.RoleAssistant,
				Content: "I'll create a comprehensive tax guide for someone with multiple W2s and save it in a file called taxes.txt. Let me do that for you now."}},
	},
}, {
	file: "anthropic-refusal-stop-details.sse",
	want: []provider.Event{
		{Type: provider.EventDone, StopReason: provider.StopOther, RawStopReason: "refusal",
			Usage:   provider.Usage{InputTokens: 20, OutputTokens: 0, Known: true},
			Message: &provider.Message{Role: provider.RoleAssistant}},
	},
}}

func TestDecodeFixtures(t *testing.T) {
	for _, tc := range fixtureGoldens {
		t.Run(tc.file, func(t *testing.T) {
			got, err := decodeBody(readFixture(t, tc.file))
			if err != nil {
				t.Fatalf("decode %s: %v", tc.file, err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("events of %s (-want +got):\n%s", tc.file, d)
			}
		})
	}
}

// noEventLines strips the event: lines of a recorded stream: dispatch must
// work on the JSON "type" alone.
func noEventLines(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if !strings.HasPrefix(line, "event:") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func TestDecodeVariants(t *testing.T) {
	for _, tc := range fixtureGoldens {
		for _, v := range []struct {
			name string
			f    func(string) string
		}{
			{"no event lines", noEventLines},
			{"CRLF", func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }},
			{"keep-alive comments", func(s string) string { return strings.ReplaceAll(s, "\n\n", "\n\n: keep-alive\n\n") }},
		} {
			t.Run(v.name+"/"+tc.file, func(t *testing.T) {
				got, err := decodeBody(v.f(readFixture(t, tc.file)))
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("events (-want +got):\n%s", d)
				}
			})
		}
	}
}

func TestDecodeHandWritten(t *testing.T) {
	const start = `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":10,"cache_read_input_tokens":100,"cache_creation_input_tokens":5,"output_tokens":1}}}

`
	tests := []struct {
		name    string
		body    string
		want    []provider.Event
		wantErr error
		check   func(t *testing.T, err error)
	}{{
		name: "redacted thinking then thinking then text, cache usage",
		body: start + `data: {"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}}

data: {"type":"content_block_stop","index":0}

data: {"type":"content_block_start","index":1,"content_block":{"type":"thinking","thinking":"","signature":""}}

data: {"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"hmm"}}

data: {"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"sigA"}}

data: {"type":"content_block_stop","index":1}

data: {"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}

data: {"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"hi"}}

data: {"type":"content_block_stop","index":2}

data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}

data: {"type":"message_stop"}

`,
		want: []provider.Event{think("hmm"), text("hi"),
			{Type: provider.EventDone, StopReason: provider.StopEndTurn, RawStopReason: "end_turn",
				Usage: provider.Usage{InputTokens: 115, OutputTokens: 7, CacheReadTokens: 100, CacheWriteTokens: 5, Known: true},
				Message: &provider.Message{Role: provider.RoleAssistant, Content: "hi",
					Reasoning: []provider.Reasoning{{Redacted: "EmwKAhgBEgy3va3pzix"}, {Text: "hmm", Signature: "sigA"}}}}},
	}, {
		name: "event error overloaded after text",
		body: start + `event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"partial"}}

event: error
data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}

`,
		want: []provider.Event{text("partial")},
		check: func(t *testing.T, err error) {
			var ae *provider.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *provider.APIError", err)
			}
			want := &provider.APIError{Provider: "anthropic", Type: "overloaded_error", Message: "Overloaded", Retryable: true}
			if d := cmp.Diff(want, ae); d != "" {
				t.Errorf("APIError (-want +got):\n%s", d)
			}
		},
	}, {
		name: "event error invalid request is not retryable",
		body: "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad\"}}\n\n",
		check: func(t *testing.T, err error) {
			if err == nil || provider.IsRetryable(err) {
				t.Errorf("err = %v, want a non-retryable APIError", err)
			}
		},
	}, {
		name:    "truncated after text",
		body:    start + "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"half\"}}\n\n",
		want:    []provider.Event{text("half")},
		wantErr: provider.ErrTruncated,
	}, {
		name:    "truncated after message_delta",
		body:    start + "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n",
		wantErr: provider.ErrTruncated,
	}, {
		name:    "empty body",
		body:    "",
		wantErr: provider.ErrTruncated,
	}, {
		name: "unknown events and fields ignored, data after message_stop ignored",
		body: start + `data: {"type":"future_event","x":1}

data: {"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s1","name":"web_search","input":{}}}

data: {"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{}}}

data: {"type":"content_block_stop","index":0}

data: {"type":"message_delta","delta":{"stop_reason":"pause_turn","stop_details":null},"usage":{"output_tokens":4,"server_tool_use":{"web_search_requests":1}}}

data: {"type":"message_stop"}

data: not json at all
`,
		want: []provider.Event{{Type: provider.EventDone, StopReason: provider.StopOther, RawStopReason: "pause_turn",
			Usage:   provider.Usage{InputTokens: 115, OutputTokens: 4, CacheReadTokens: 100, CacheWriteTokens: 5, Known: true},
			Message: &provider.Message{Role: provider.RoleAssistant}}},
	}, {
		name: "two tool calls, end_turn with calls is tool use",
		body: start + `data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"a","name":"f","input":{}}}

data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"x\":1}"}}

data: {"type":"content_block_stop","index":0}

data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"b","name":"g","input":{}}}

data: {"type":"content_block_stop","index":1}

data: {"type":"message_delta","delta":{"stop_reason":"end_turn"}}

data: {"type":"message_stop"}

`,
		want: []provider.Event{toolCall("a", "f", `{"x":1}`), toolCall("b", "g", "{}"),
			{Type: provider.EventDone, StopReason: provider.StopToolUse, RawStopReason: "end_turn",
				Usage: provider.Usage{InputTokens: 115, OutputTokens: 1, CacheReadTokens: 100, CacheWriteTokens: 5, Known: true},
				Message: &provider.Message{Role: provider.RoleAssistant,
					ToolCalls: []provider.ToolCall{{ID: "a", Name: "f", Arguments: `{"x":1}`}, {ID: "b", Name: "g", Arguments: "{}"}}}}},
	}, {
		name: "no usage at all is unknown",
		body: "data: {\"type\":\"message_stop\"}\n\n",
		want: []provider.Event{{Type: provider.EventDone, StopReason: provider.StopOther,
			Message: &provider.Message{Role: provider.RoleAssistant}}},
	}, {
		name: "malformed JSON is an error",
		body: start + "data: {\"type\":\"content_block_start\"\n\n",
		check: func(t *testing.T, err error) {
			if err == nil || errors.Is(err, provider.ErrTruncated) {
				t.Errorf("err = %v, want a decode error", err)
			}
		},
	}, {
		name: "delta for unknown block is an error",
		body: start + "data: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n",
		check: func(t *testing.T, err error) {
			if err == nil || !strings.Contains(err.Error(), "unknown content block 3") {
				t.Errorf("err = %v, want unknown block error", err)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeBody(tc.body)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			switch {
			case tc.check != nil:
				tc.check(t, err)
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("err = %v, want %v", err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   *provider.APIError
	}{
		{"overloaded 529", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			&provider.APIError{Provider: "anthropic", Status: 529, Type: "overloaded_error", Message: "Overloaded", Retryable: true}},
		{"rate limit 429", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`,
			&provider.APIError{Provider: "anthropic", Status: 429, Type: "rate_limit_error", Message: "slow down", Retryable: true}},
		{"plain 502 from a proxy", 502, `<html>bad gateway</html>`,
			&provider.APIError{Provider: "anthropic", Status: 502, Message: "<html>bad gateway</html>", Retryable: true}},
		{"prompt too long", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 201234 tokens > 200000 maximum"}}`,
			&provider.APIError{Provider: "anthropic", Status: 400, Type: "invalid_request_error", Message: "prompt is too long: 201234 tokens > 200000 maximum", ContextLength: true}},
		{"auth", 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
			&provider.APIError{Provider: "anthropic", Status: 401, Type: "authentication_error", Message: "invalid x-api-key"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := classifyBody(tc.status, []byte(tc.body))
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("classify (-want +got):\n%s", d)
			}
			if tc.want.ContextLength && !errors.Is(got, provider.ErrContextLength) {
				t.Errorf("errors.Is(%v, ErrContextLength) = false", got)
			}
		})
	}
}
