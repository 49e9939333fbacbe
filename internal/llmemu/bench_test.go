package llmemu

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkStream measures serving one 200-delta text reply with a tool
// call end to end over loopback (no pacing), per protocol.
func BenchmarkStream(b *testing.B) {
	text := strings.Repeat("word ", 200)
	for _, p := range protocols {
		b.Run(string(p), func(b *testing.B) {
			s := New(Options{APIKey: testKey})
			defer s.Close()
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			body := requestBody(p, "hi", nil)
			s.SetResponder(func(Recorded) Reply {
				return Reply{Text: text, ToolCalls: []ToolCall{{Name: "search", Arguments: `{"query":"a fairly long query string"}`}}}
			})
			b.ReportAllocs()
			for b.Loop() {
				req := newRequest(b.Context(), b, s, p, body)
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(plan(Reply{Text: text}, ""))), "ns/delta")
		})
	}
}
