package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
	pt "github.com/bobbinbot/bobbin/provider/providertest"
)

// history1000 is a 1,000-message thread of mixed user and assistant text
// and tool steps.
func history1000() []provider.Message {
	var h []provider.Message
	for i := 0; len(h) < 1000; i++ {
		h = append(h, user(fmt.Sprintf("Question %d: could you check the deploy logs for service-%d and tell me why it restarted?", i, i)))
		h = append(h, provider.Message{Role: provider.RoleAssistant, Content: "Let me look.",
			ToolCalls: []provider.ToolCall{pt.Call(fmt.Sprint(i), "logs", fmt.Sprintf(`{"service":"service-%d","lines":200}`, i))}})
		h = append(h, provider.ToolResult{CallID: fmt.Sprint(i), Name: "logs", Content: strings.Repeat(fmt.Sprintf("2026-11-29T10:%02d:00Z service-%d OOMKilled exit 137\n", i%60, i), 5)}.Message())
		h = append(h, provider.Message{Role: provider.RoleAssistant, Content: fmt.Sprintf("service-%d was killed for memory (exit 137) five times; raise its limit.", i)})
	}
	return h[:1000]
}

// BenchmarkAppendEstimate measures adding one new message to a 1,000-message
// history and re-estimating the prompt (the history is not re-tokenized).
func BenchmarkAppendEstimate(b *testing.B) {
	c := testCounter(b)
	h := history1000()
	for _, anchored := range []bool{true, false} {
		b.Run(fmt.Sprintf("anchor=%v", anchored), func(b *testing.B) {
			bud := newBudget(c, "gpt-4o", 0, Anchor{}, "You are a helpful assistant.", nil, h)
			if anchored {
				bud.observe(len(h)-1, provider.Usage{InputTokens: 90000, OutputTokens: 100, Known: true})
			}
			msgs := make([]provider.Message, b.N)
			for i := range msgs {
				msgs[i] = user(fmt.Sprintf("New message %d (%v): what about the other service, did it restart as well?", i, anchored))
			}
			b.ReportAllocs()
			b.ResetTimer()
			sink := 0
			for i := range b.N {
				bud.add(msgs[i])
				sink += bud.estimate()
				if bud.len() > 1100 {
					bud.prefix = bud.prefix[:1001] // keep the history at ~1,000
				}
			}
			_ = sink
		})
	}
}

// BenchmarkStepOverhead measures the loop's own cost per step: a
// zero-latency fake provider and a no-op tool, 10 tool steps and a final
// answer per turn.
func BenchmarkStepOverhead(b *testing.B) {
	noop := &fakeTool{name: "noop", schema: `{"type":"object","properties":{"i":{"type":"integer"}}}`,
		fn: func(context.Context, json.RawMessage) (string, error) { return "ok", nil }}
	tool := hinted{noop, allowAll}
	var script []pt.Step
	for i := range 10 {
		script = append(script, pt.ToolCalls(pt.Call(fmt.Sprint(i), "noop", fmt.Sprintf(`{"i":%d}`, i))).
			WithUsage(provider.Usage{InputTokens: 1000 + i, OutputTokens: 10, Known: true}))
	}
	script = append(script, pt.Text("done"))
	h := []provider.Message{user("go")}
	c := testCounter(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p := pt.New(script...)
		a := New(p, Options{Model: "gpt-4o", Counter: c})
		res, err := a.Run(context.Background(), Turn{System: "sys", History: h, Tools: []Tool{tool},
			Checkpoint: func(context.Context, Checkpoint) error { return nil }})
		if err != nil || res.Steps != 11 {
			b.Fatal(err, res.Steps)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*11), "ns/step")
}

// mixed100KB is ~100 KB of English prose, Go code and Chinese.
func mixed100KB() string {
	parts := []string{
		"The deployment failed because the container exceeded its memory limit; we raised the limit and added an alert. ",
		"func (s *Server) Handle(ctx context.Context, req *Request) (*Response, error) {\n\tif err := s.check(ctx, req); err != nil {\n\t\treturn nil, fmt.Errorf(\"handle: %w\", err)\n\t}\n\treturn &Response{ID: req.ID}, nil\n}\n",
		"部署失败是因为容器超出了内存限制；我们提高了限制并添加了警报。",
	}
	var b strings.Builder
	for i := 0; b.Len() < 100<<10; i++ {
		b.WriteString(parts[i%len(parts)])
	}
	return b.String()[:100<<10]
}

func BenchmarkCount100KB(b *testing.B) {
	c := testCounter(b)
	s := strings.ToValidUTF8(mixed100KB(), "")
	b.Run("segmented", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		b.ReportAllocs()
		for range b.N {
			c.Count(s)
		}
	})
	b.Run("tiktoken-direct", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		b.ReportAllocs()
		for range b.N {
			c.enc().EncodeOrdinary(s)
		}
	})
}
