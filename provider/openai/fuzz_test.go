package openai

import (
	"errors"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
)

// FuzzDecode feeds arbitrary chunk payloads (one per line of the input) to
// the decoder: it must never panic, only yield well-formed events, and end
// with exactly one done event or an error.
func FuzzDecode(f *testing.F) {
	for _, name := range []string{
		"openai-gpt4o-parallel-tool-calls-usage.sse",
		"deepseek-reasoner-reasoning-content-tool-call.sse",
		"openrouter-processing-comment-usage-after-finish.sse",
		"openai-gpt4o-refusal.sse",
	} {
		var payloads []string
		for _, line := range strings.Split(fixture(f, name), "\n") {
			if p, ok := strings.CutPrefix(line, "data: "); ok && p != "[DONE]" {
				payloads = append(payloads, p)
			}
		}
		f.Add(strings.Join(payloads, "\n"))
	}
	for _, s := range []string{
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}},{"id":"b"}]},"finish_reason":"stop"}]}`,
		`{"error":{"message":"x","code":502}}`,
		`{"object":"error","message":"maximum context length","code":400}`,
		`{"choices":[],"error":null,"usage":{"prompt_tokens":1,"prompt_tokens_details":null}}`,
		`{"error":"string"}` + "\n" + `{"choices":null}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":-5,"function":{"arguments":"x"}}]},"finish_reason":"length"}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var d decoder
		var failed bool
		for _, p := range strings.Split(in, "\n") {
			evs, err := d.feed(p)
			for _, e := range evs {
				if e.Type != provider.EventTextDelta && e.Type != provider.EventReasoningDelta {
					t.Fatalf("feed yielded %v", e.Type)
				}
				if e.Text == "" {
					t.Fatalf("empty delta")
				}
			}
			if err != nil {
				failed = true
				break
			}
		}
		if failed {
			return
		}
		for _, sawDone := range []bool{false, true} {
			evs, err := d.end(sawDone)
			if err != nil {
				if !errors.Is(err, provider.ErrTruncated) {
					t.Fatalf("end: %v", err)
				}
				continue
			}
			last := evs[len(evs)-1]
			if last.Type != provider.EventDone || last.Message == nil {
				t.Fatalf("last event %+v is not done", last)
			}
			if n := len(evs) - 1; n != len(last.Message.ToolCalls) {
				t.Fatalf("%d tool call events, message has %d", n, len(last.Message.ToolCalls))
			}
			if n := len(last.Message.ToolCalls); n > 0 && last.StopReason != provider.StopToolUse {
				t.Fatalf("runnable tool calls with stop %v", last.StopReason)
			}
			for _, tc := range last.Message.ToolCalls {
				if tc.ID == "" || tc.Arguments == "" {
					t.Fatalf("incomplete tool call %+v", tc)
				}
			}
		}
	})
}
