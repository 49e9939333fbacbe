package anthropic

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/provider"
)

// TestAgainstEmulator runs a full tool-use cycle against the project's fake
// Anthropic server: the second request must carry the thinking block, the
// tool_use and its result in the shape the emulator (like the real API)
// accepts.
func TestAgainstEmulator(t *testing.T) {
	emu := llmemu.New(llmemu.Options{APIKey: testKey})
	t.Cleanup(emu.Close)
	c := New(Options{ClientOptions: provider.ClientOptions{BaseURL: emu.URL(), APIKey: testKey}})
	ctx := context.Background()

	emu.Enqueue(
		llmemu.Reply{Reasoning: "I should look it up.", Text: "Let me check.",
			ToolCalls: []llmemu.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}, {Name: "get_time"}}},
		llmemu.Reply{Text: "Sunny, and it is noon."},
	)
	req := provider.Request{Model: "claude-test", Tools: []provider.ToolSpec{{Name: "get_time"}, weatherTool},
		Messages: []provider.Message{{Role: provider.RoleSystem, Content: "Be brief."}, {Role: provider.RoleUser, UserName: "Alice", Content: "Weather in Paris?"}}}

	evs, err := collect(c.Stream(ctx, req))
	if err != nil {
		t.Fatalf("turn 1: %v", err)
	}
	done := evs[len(evs)-1]
	if done.Type != provider.EventDone || done.StopReason != provider.StopToolUse || len(done.Message.ToolCalls) != 2 {
		t.Fatalf("turn 1 done = %+v", done)
	}
	if r := done.Message.Reasoning; len(r) != 1 || r[0].Text != "I should look it up." || r[0].Signature == "" {
		t.Errorf("turn 1 reasoning = %+v, want one signed block", r)
	}
	if done.Message.Content != "Let me check." || !done.Usage.Known {
		t.Errorf("turn 1 message = %q, usage %+v", done.Message.Content, done.Usage)
	}
	calls := done.Message.ToolCalls
	if calls[1].Arguments != "{}" {
		t.Errorf("no-argument call has arguments %q, want {}", calls[1].Arguments)
	}

	req.Messages = append(req.Messages, *done.Message,
		provider.ToolResult{CallID: calls[0].ID, Name: calls[0].Name, Content: "sunny"}.Message(),
		provider.ToolResult{CallID: calls[1].ID, Name: calls[1].Name, Content: "12:00"}.Message())
	evs, err = collect(c.Stream(ctx, req))
	if err != nil {
		t.Fatalf("turn 2: %v", err)
	}
	if got := evs[len(evs)-1].Message.Content; got != "Sunny, and it is noon." {
		t.Errorf("turn 2 text = %q", got)
	}
	recs := emu.Requests()
	if len(recs) != 2 {
		t.Fatalf("emulator saw %d requests, want 2", len(recs))
	}
	var roles []string
	for _, m := range recs[1].Messages {
		roles = append(roles, m.Role)
	}
	if d := cmp.Diff([]string{"system", "user", "assistant", "tool", "tool"}, roles); d != "" {
		t.Errorf("turn 2 conversation roles (-want +got):\n%s", d)
	}
	if a := recs[1].Messages[2]; a.Reasoning != "I should look it up." || len(a.ToolCalls) != 2 {
		t.Errorf("turn 2 assistant = %+v, want reasoning and two tool calls passed back", a)
	}
	if u := recs[1].Messages[1]; u.Text != "[Alice] Weather in Paris?" {
		t.Errorf("turn 2 user text = %q", u.Text)
	}
}

func TestEmulatorFailures(t *testing.T) {
	tests := []struct {
		name  string
		setup func(emu *llmemu.Server)
		check func(t *testing.T, evs []provider.Event, err error)
	}{{
		name: "overloaded before the first byte is retried",
		setup: func(emu *llmemu.Server) {
			emu.FailNext(1, llmemu.ErrorReply{Status: 529, Type: "overloaded_error", RetryAfter: time.Millisecond})
			emu.Enqueue(llmemu.Reply{Text: "ok now"})
		},
		check: func(t *testing.T, evs []provider.Event, err error) {
			if err != nil || evs[len(evs)-1].Message.Content != "ok now" {
				t.Errorf("got %v, %v", evs, err)
			}
		},
	}, {
		name: "mid-stream error keeps partial text",
		setup: func(emu *llmemu.Server) {
			emu.Enqueue(llmemu.Reply{Text: "one two three four", CutAfter: 2, Error: &llmemu.ErrorReply{MidStream: true}})
		},
		check: func(t *testing.T, evs []provider.Event, err error) {
			if len(evs) != 2 || !provider.IsRetryable(err) {
				t.Errorf("got %d events, err %v; want 2 deltas and a retryable error", len(evs), err)
			}
		},
	}, {
		name: "truncated",
		setup: func(emu *llmemu.Server) {
			emu.Enqueue(llmemu.Reply{Text: "one two three", CutAfter: 1, Truncate: true})
		},
		check: func(t *testing.T, evs []provider.Event, err error) {
			if len(evs) != 1 || !errors.Is(err, provider.ErrTruncated) {
				t.Errorf("got %d events, err %v; want 1 delta and ErrTruncated", len(evs), err)
			}
		},
	}, {
		name:  "connection reset mid-stream",
		setup: func(emu *llmemu.Server) { emu.Enqueue(llmemu.Reply{Text: "one two three", CutAfter: 1, Abort: true}) },
		check: func(t *testing.T, evs []provider.Event, err error) {
			if len(evs) != 1 || err == nil {
				t.Errorf("got %d events, err %v; want 1 delta and an error", len(evs), err)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			emu := llmemu.New(llmemu.Options{APIKey: testKey})
			t.Cleanup(emu.Close)
			tc.setup(emu)
			c := New(Options{ClientOptions: provider.ClientOptions{BaseURL: emu.URL(), APIKey: testKey}})
			evs, err := collect(c.Stream(context.Background(), hello))
			tc.check(t, evs, err)
		})
	}
}
