package anthropic

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
)

// FuzzDecode feeds arbitrary bodies through the SSE reader and the decoder:
// no panic, no hang, and a nil error always means the stream ended with
// exactly one done event, last.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob("testdata/*.sse")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
		f.Add(noEventLines(string(b)))
	}
	f.Add("")
	f.Add("data: {\"type\":\"message_stop\"}\n\n")
	f.Add("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
	f.Add("data: {\"type\":\"content_block_start\",\"index\":-1,\"content_block\":{\"type\":\"tool_use\"}}\n\ndata: {\"type\":\"content_block_stop\",\"index\":-1}\n\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"}}\n\ndata: {\"type\":\"message_stop\"}\n\n")
	f.Add("data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":\"x\"}}}\n\n")
	f.Add("data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"a\"}}\r\n\r\ndata: {\"type\":\"content_block_start\",\"index\":0}\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		evs, err := decodeBody(body)
		if err != nil {
			if len(evs) > 0 && evs[len(evs)-1].Type == provider.EventDone && !errors.Is(err, provider.ErrTruncated) {
				t.Fatalf("error %v after a done event", err)
			}
			return
		}
		if len(evs) == 0 || evs[len(evs)-1].Type != provider.EventDone {
			t.Fatalf("nil error without a final done event: %v", evs)
		}
		for _, ev := range evs[:len(evs)-1] {
			if ev.Type == provider.EventDone {
				t.Fatalf("done event before the end: %v", evs)
			}
		}
		done := evs[len(evs)-1]
		if done.Message == nil {
			t.Fatal("done event without message")
		}
		if done.StopReason != provider.StopToolUse && len(done.Message.ToolCalls) > 0 {
			t.Fatalf("tool calls with stop reason %q", done.StopReason)
		}
	})
}
