package openai

import (
	"errors"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/google/go-cmp/cmp"
)

func newEmu(t *testing.T, o llmemu.Options) (*llmemu.Server, *Client) {
	t.Helper()
	o.APIKey = testKey
	emu := llmemu.New(o)
	t.Cleanup(emu.Close)
	return emu, New(Options{ClientOptions: provider.ClientOptions{BaseURL: emu.URL() + "/v1", APIKey: testKey}})
}

// TestAgainstEmulator runs a tool-use cycle against the project's fake
// OpenAI-compatible server: the second request must pass back the
// reasoning, the calls and one tool message per result.
func TestAgainstEmulator(t *testing.T) {
	emu, c := newEmu(t, llmemu.Options{})
	emu.Enqueue(
		llmemu.Reply{Reasoning: "Look it up.", Text: "Checking.",
			ToolCalls: []llmemu.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}, {Name: "get_time"}}},
		llmemu.Reply{Text: "Sunny, and it is noon."},
	)
	req := provider.Request{Model: "gpt-test", Tools: []provider.ToolSpec{{Name: "get_time"}, {Name: "get_weather"}},
		Messages: []provider.Message{{Role: provider.RoleSystem, Content: "Be brief."}, {Role: provider.RoleUser, UserName: "Alice", Content: "Weather?"}}}
	evs, err := collect(t, c, req)
	if err != nil {
		t.Fatalf("turn 1: %v", err)
	}
	done := evs[len(evs)-1]
	if done.StopReason != provider.StopToolUse || len(done.Message.ToolCalls) != 2 || !done.Usage.Known {
		t.Fatalf("turn 1 done = %+v", done)
	}
	if done.Message.Content != "Checking." || done.Message.ReasoningText() != "Look it up." {
		t.Errorf("turn 1 message = %+v", done.Message)
	}
	calls := done.Message.ToolCalls
	req.Messages = append(req.Messages, *done.Message,
		provider.ToolResult{CallID: calls[0].ID, Content: "sunny"}.Message(),
		provider.ToolResult{CallID: calls[1].ID, Content: "12:00"}.Message())
	evs, err = collect(t, c, req)
	if err != nil {
		t.Fatalf("turn 2: %v", err)
	}
	if got := evs[len(evs)-1].Message.Content; got != "Sunny, and it is noon." {
		t.Errorf("turn 2 text = %q", got)
	}
	recs := emu.Requests()
	if len(recs) != 2 {
		t.Fatalf("emulator saw %d requests", len(recs))
	}
	var roles []string
	for _, m := range recs[1].Messages {
		roles = append(roles, m.Role)
	}
	if d := cmp.Diff([]string{"system", "user", "assistant", "tool", "tool"}, roles); d != "" {
		t.Errorf("turn 2 roles (-want +got):\n%s", d)
	}
	if a := recs[1].Messages[2]; a.Reasoning != "Look it up." || len(a.ToolCalls) != 2 {
		t.Errorf("turn 2 assistant = %+v", a)
	}
}

func TestEmulatorFaults(t *testing.T) {
	tests := []struct {
		name      string
		reply     llmemu.Reply
		truncated bool
		retryable bool
	}{
		{name: "abort mid-stream", reply: llmemu.Reply{Text: "one two three four", Abort: true, CutAfter: 2}, truncated: true},
		{name: "clean cut", reply: llmemu.Reply{Text: "one two three four", Truncate: true, CutAfter: 2}, truncated: true},
		{name: "mid-stream server error", reply: llmemu.Reply{Text: "one two three", Error: &llmemu.ErrorReply{MidStream: true}, CutAfter: 1}, retryable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			emu, c := newEmu(t, llmemu.Options{})
			emu.Enqueue(tt.reply)
			evs, err := collect(t, c, provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}})
			if err == nil {
				t.Fatalf("no error; events %+v", evs)
			}
			if errors.Is(err, provider.ErrTruncated) != tt.truncated || provider.IsRetryable(err) != tt.retryable {
				t.Errorf("error %v: truncated %v retryable %v, want %v %v", err, errors.Is(err, provider.ErrTruncated), provider.IsRetryable(err), tt.truncated, tt.retryable)
			}
			for _, e := range evs {
				if e.Type != provider.EventTextDelta {
					t.Errorf("event %v before the failure", e.Type)
				}
			}
		})
	}
}

func TestEmulatorContextLengthAndRetry(t *testing.T) {
	emu, c := newEmu(t, llmemu.Options{ContextWindow: 10})
	_, err := collect(t, c, provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: string(make([]byte, 400))}}})
	if !errors.Is(err, provider.ErrContextLength) {
		t.Fatalf("error = %v, want ErrContextLength", err)
	}
	if n := len(emu.Requests()); n != 1 {
		t.Errorf("context-length error retried: %d requests", n)
	}

	emu, c = newEmu(t, llmemu.Options{})
	emu.FailNext(2, llmemu.ErrorReply{Status: 429, RetryAfter: time.Millisecond})
	evs, err := collect(t, c, provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}})
	if err != nil {
		t.Fatalf("after two 429s: %v", err)
	}
	if got := evs[len(evs)-1].Message.Content; got != llmemu.AnswerFor("hi") {
		t.Errorf("answer = %q", got)
	}
	if n := len(emu.Requests()); n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
}
