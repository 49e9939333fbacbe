package openai

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
)

// memTransport answers every request with the same SSE body from memory, so
// a benchmark measures the client rather than the loopback network.
type memTransport struct{ body []byte }

func (m memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(m.body)),
		Request:    r,
	}, nil
}

// textStream builds a gpt-4o style stream of n token-sized text deltas,
// shaped like the recorded fixtures (same chunk envelope and field order).
func textStream(n int) []byte {
	var b strings.Builder
	head := `data: {"id":"chatcmpl-ABfw4IfQfCCrcuybFm41wJyxjbkz7","object":"chat.completion.chunk","created":1727346172,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_5050236cbd","choices":[{"index":0,"delta":`
	tail := `,"logprobs":null,"finish_reason":null}]}` + "\n\n"
	b.WriteString(head + `{"role":"assistant","content":"","refusal":null}` + tail)
	words := []string{" the", " stream", " of", " tokens", " keeps", " coming", ",", " and", " Bob", "bin", " renders", " it", "."}
	for i := 0; i < n; i++ {
		b.WriteString(head + `{"content":` + strconv.Quote(words[i%len(words)]) + `}` + tail)
	}
	b.WriteString(head + `{}` + strings.Replace(tail, `"finish_reason":null`, `"finish_reason":"stop"`, 1))
	b.WriteString(`data: {"id":"chatcmpl-ABfw4IfQfCCrcuybFm41wJyxjbkz7","object":"chat.completion.chunk","created":1727346172,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_5050236cbd","choices":[],"usage":{"prompt_tokens":79,"completion_tokens":` + strconv.Itoa(n) + `,"total_tokens":90,"completion_tokens_details":{"reasoning_tokens":0}}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

// BenchmarkStreamText decodes a 500-delta text stream end to end through
// Client.Stream (request encoding, transport, SSE, chunk decoding, events)
// and reports time and allocations per text delta.
func BenchmarkStreamText(b *testing.B) {
	const deltas = 500
	body := textStream(deltas)
	c := New(Options{ClientOptions: provider.ClientOptions{
		BaseURL:    "http://model.invalid/v1",
		APIKey:     "sk-bench",
		HTTPClient: &http.Client{Transport: memTransport{body: body}},
	}})
	req := provider.Request{Model: "gpt-4o", Messages: []provider.Message{{Role: provider.RoleUser, Content: "Tell me a story."}}}
	ctx := context.Background()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := cpuTime()
	for b.Loop() {
		n := 0
		for ev, err := range c.Stream(ctx, req) {
			if err != nil {
				b.Fatal(err)
			}
			if ev.Type == provider.EventTextDelta {
				n++
			}
		}
		if n != deltas {
			b.Fatalf("%d deltas, want %d", n, deltas)
		}
	}
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&ms1)
	per := float64(b.N * deltas)
	b.ReportMetric(float64(cpu.Nanoseconds())/per, "cpu-ns/delta")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/delta")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/per, "allocs/delta")
}

// BenchmarkDecodeChunk is the chunk decoder alone on one text delta.
func BenchmarkDecodeChunk(b *testing.B) {
	data := `{"id":"chatcmpl-ABfw4IfQfCCrcuybFm41wJyxjbkz7","object":"chat.completion.chunk","created":1727346172,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_5050236cbd","choices":[{"index":0,"delta":{"content":" tokens"},"logprobs":null,"finish_reason":null}]}`
	b.ReportAllocs()
	var d decoder
	for b.Loop() {
		if _, err := d.feed(data); err != nil {
			b.Fatal(err)
		}
		if d.text.Len() > 1<<20 {
			d = decoder{}
		}
	}
}
