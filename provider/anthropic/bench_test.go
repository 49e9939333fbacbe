package anthropic

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/sse"
)

const benchDeltas = 2000

// longTextStream is a realistic answer of benchDeltas token-sized text
// deltas, padded like the recorded streams, with pings in between.
func longTextStream() string {
	var b strings.Builder
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5-20250929\",\"id\":\"msg_01Bench\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":1200,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":900,\"output_tokens\":2}}      }\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}   }\n\n")
	words := []string{" the", " weather", " in", " San", " Francisco", " is", " mild,", " with", " fog", " in\\n", " the", " morning."}
	for i := range benchDeltas {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%s\"}      }\n\n", words[i%len(words)])
		if i%100 == 99 {
			b.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
		}
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0   }\n\n")
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2000}   }\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"   }\n\n")
	return b.String()
}

// perDelta reports the cost of one text delta: ns and heap allocations.
func perDelta(b *testing.B, run func()) {
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	deltas := float64(b.N) * benchDeltas
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/deltas, "ns/delta")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/deltas, "allocs/delta")
}

// BenchmarkStreamText decodes a long text answer end to end: HTTP over
// loopback, SSE framing, JSON decoding, events through the iterator.
func BenchmarkStreamText(b *testing.B) {
	body := longTextStream()
	srv := newBenchServer(b, body)
	c := New(Options{ClientOptions: provider.ClientOptions{BaseURL: srv.URL, APIKey: "k", HTTPClient: srv.Client()}})
	ctx := context.Background()
	perDelta(b, func() {
		n := 0
		for ev, err := range c.Stream(ctx, hello) {
			if err != nil {
				b.Fatal(err)
			}
			if ev.Type == provider.EventTextDelta {
				n++
			}
		}
		if n != benchDeltas {
			b.Fatalf("got %d deltas, want %d", n, benchDeltas)
		}
	})
}

// BenchmarkDecodeText is the same stream without HTTP: SSE reader and
// decoder only.
func BenchmarkDecodeText(b *testing.B) {
	body := longTextStream()
	perDelta(b, func() {
		rd := sse.NewReader(strings.NewReader(body), 0)
		var d decoder
		n := 0
		for !d.done() {
			ev, err := rd.Next()
			if err != nil {
				b.Fatal(err)
			}
			if err := d.feed(ev.Type, ev.Data); err != nil {
				b.Fatal(err)
			}
			for _, e := range d.out {
				if e.Type == provider.EventTextDelta {
					n++
				}
			}
			d.out = d.out[:0]
		}
		if n != benchDeltas {
			b.Fatalf("got %d deltas, want %d", n, benchDeltas)
		}
	})
}

func newBenchServer(b *testing.B, body string) *httptest.Server {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
	}))
	b.Cleanup(srv.Close)
	return srv
}
