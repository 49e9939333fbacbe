package agent

import (
	"context"
	"slices"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/bobbinbot/bobbin/provider"
	pt "github.com/bobbinbot/bobbin/provider/providertest"
)

// firstText notes when a turn's first visible text reaches the observer.
type firstText struct{ at time.Time }

func (f *firstText) Observe(ev Event) {
	if ev.Kind == EventText && f.at.IsZero() {
		f.at = time.Now()
	}
}

// BenchmarkTracingOverhead: what tracing adds to a turn, off (the no-op
// provider, as when OTEL_EXPORTER_OTLP_ENDPOINT is unset) and on (the SDK's
// TracerProvider batching to an exporter that discards, as cmd/bot wires
// it, minus the network). The turn span is opened as the bot opens
// invoke_agent. "text" is a one-step answer (one chat span before the
// first text); "tool" calls a tool that needs approval first (chat,
// approval_wait, execute_tool, chat). The scripted provider answers at
// once, so the figures are the tracer's and the loop's own cost:
// first-text-ns is the mean time from the turn's start to its first
// visible text (the agent's share of the first-visible-text figure),
// ns/op the whole turn.
func BenchmarkTracingOverhead(b *testing.B) {
	u := provider.Usage{InputTokens: 1200, OutputTokens: 40, CacheReadTokens: 300, Known: true}
	scripts := map[string][]pt.Step{
		"text": {pt.Text("The deploy failed because the container ran out of memory; raise its limit.").WithUsage(u)},
		"tool": {
			pt.ToolCalls(pt.Call("c1", "logs", `{"q":"service-1"}`)).WithUsage(u),
			pt.Text("service-1 was killed for memory five times; raise its limit.").WithUsage(u),
		},
	}
	for _, script := range []string{"text", "tool"} {
		for _, mode := range []string{"off", "on"} {
			b.Run(script+"/"+mode, func(b *testing.B) {
				var tp trace.TracerProvider = noop.NewTracerProvider()
				if mode == "on" {
					sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
					b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
					tp = sdk
				}
				tracer := tp.Tracer("github.com/bobbinbot/bobbin")
				tool := hinted{echoTool("logs"), Hints{Server: "ops"}}
				h := []provider.Message{user("why did service-1 restart?")}
				c := testCounter(b)
				turn := func() time.Duration {
					p := pt.New(scripts[script]...)
					a := New(p, Options{Model: "gpt-4o", Counter: c, Tracer: tracer, ProviderName: "openai"})
					ft := &firstText{}
					start := time.Now()
					ctx, span := tracer.Start(context.Background(), "invoke_agent bobbin", trace.WithSpanKind(trace.SpanKindInternal))
					_, err := a.Run(ctx, Turn{System: "sys", History: h, Tools: []Tool{tool}, Approver: always(AllowOnce),
						Observer: ft, Checkpoint: func(context.Context, Checkpoint) error { return nil }})
					span.End()
					if err != nil || ft.at.IsZero() {
						b.Fatal(err, "or no text")
					}
					return ft.at.Sub(start)
				}
				for range 20 { // warm up (the counter's tables, the SDK's pools)
					turn()
				}
				first := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					first = append(first, turn())
				}
				b.StopTimer()
				var sum time.Duration
				for _, d := range first {
					sum += d
				}
				b.ReportMetric(float64(sum.Nanoseconds())/float64(len(first)), "first-text-ns")
				slices.Sort(first)
				b.ReportMetric(float64(first[len(first)*99/100].Nanoseconds()), "first-text-p99-ns")
			})
		}
	}
}
