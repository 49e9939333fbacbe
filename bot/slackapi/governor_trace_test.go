package slackapi

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestGovernorTracesBudgetWaits: a call that waits for budget, or is
// dropped or merged, is a slack.budget_wait span under the span of its
// context, with the method, the outcome and the wait; a call granted at
// once, or whose context has no recording span, records nothing.
func TestGovernorTracesBudgetWaits(t *testing.T) {
	leakCheck(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	// One token every 200 ms, no burst.
	g := testGovernor(t, testStore(t), map[string]RateLimit{"test.Method": {PerMinute: 300, Burst: 1}})
	team := testTeam()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctx, root := tp.Tracer("test").Start(ctx, "invoke_agent")
	call := Call{Team: team, Method: "test.Method"}

	// Budget at once: no span.
	if _, err := g.Acquire(ctx, call); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans for a call that did not wait", n)
	}
	// A lossy call tried once while budget is out: dropped.
	if _, err := g.Acquire(ctx, Call{Team: team, Method: "test.Method", Prio: Lossy}); !errors.Is(err, ErrDropped) {
		t.Fatalf("lossy try: %v, want dropped", err)
	}
	// A must-deliver call waits for the next token.
	start := time.Now()
	if _, err := g.Acquire(ctx, call); err != nil {
		t.Fatal(err)
	}
	waited := time.Since(start)
	// Without a recording span in the context a wait records nothing.
	if _, err := g.Acquire(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	root.End()

	var got []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "slack.budget_wait" {
			got = append(got, s)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d budget wait spans, want 2 (dropped, granted): %v", len(got), got)
	}
	want := []struct {
		prio, outcome string
		minWait       time.Duration
	}{{"lossy", outcomeDropped, 0}, {"must", outcomeGranted, 100 * time.Millisecond}}
	for i, s := range got {
		if s.Parent.SpanID() != root.SpanContext().SpanID() || s.SpanContext.TraceID() != root.SpanContext().TraceID() {
			t.Errorf("span %d is not a child of the context's span", i)
		}
		a := attrs(s.Attributes)
		if a[attrMethod].AsString() != "test.Method" || a[attrPriority].AsString() != want[i].prio || a[attrOutcome].AsString() != want[i].outcome {
			t.Errorf("span %d attributes %v, want method test.Method, %s, %s", i, s.Attributes, want[i].prio, want[i].outcome)
		}
		ms := time.Duration(a[attrWaitMS].AsInt64()) * time.Millisecond
		if ms < want[i].minWait || ms > waited+50*time.Millisecond {
			t.Errorf("span %d: wait %v, want between %v and %v", i, ms, want[i].minWait, waited)
		}
		if d := s.EndTime.Sub(s.StartTime); d < want[i].minWait {
			t.Errorf("span %d lasts %v, want at least %v", i, d, want[i].minWait)
		}
	}
}

// TestGovernorTracesMerged: a lossy call replaced by a newer one for the
// same target ends its wait span as merged.
func TestGovernorTracesMerged(t *testing.T) {
	leakCheck(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	g := testGovernor(t, testStore(t), map[string]RateLimit{"test.Method": {PerMinute: 1, Burst: 1}})
	team := testTeam()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := Call{Team: team, Method: "test.Method"}
	if _, err := g.Acquire(ctx, call); err != nil {
		t.Fatal(err)
	}
	tctx, root := tp.Tracer("test").Start(ctx, "invoke_agent")
	first := Call{Team: team, Method: "test.Method", Prio: Lossy, Wait: -1, Merge: "C1:1.000"}
	merged := make(chan error, 1)
	go func() { _, err := g.Acquire(tctx, first); merged <- err }()
	waitQueued(t, g, team+" test.Method", 1)
	// Merging spares a call asking Redis: wait until the first has been
	// refused once.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		idle := g.lanes[team+" test.Method"].holder == nil
		g.mu.Unlock()
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first lossy call still asks for budget")
		}
	}
	second := first
	second.Wait = 20 * time.Millisecond
	if _, err := g.Acquire(context.Background(), second); !errors.Is(err, ErrDropped) {
		t.Fatalf("second lossy call: %v, want dropped", err)
	}
	if err := <-merged; !errors.Is(err, ErrMerged) {
		t.Fatalf("first lossy call: %v, want merged", err)
	}
	root.End()
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Name != "slack.budget_wait" || attrs(spans[0].Attributes)[attrOutcome].AsString() != outcomeMerged {
		t.Fatalf("spans %v, want one merged budget wait then the root", spans)
	}
}

// TestTraceWaitOffCostsNothing: with no recording span in the context
// (tracing off, or the turn not sampled) a wait allocates nothing.
func TestTraceWaitOffCostsNothing(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	unsampled, span := tp.Tracer("test").Start(context.Background(), "invoke_agent")
	defer span.End()
	start := time.Now()
	c := Call{Team: "T1", Method: ChatUpdate}
	for name, ctx := range map[string]context.Context{"no span": context.Background(), "unsampled": unsampled,
		"remote parent": trace.ContextWithRemoteSpanContext(context.Background(), span.SpanContext())} {
		if n := testing.AllocsPerRun(100, func() { traceWait(ctx, c, start, outcomeGranted) }); n != 0 {
			t.Errorf("%s: %v allocations per wait, want 0", name, n)
		}
	}
}

func attrs(kv []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, a := range kv {
		m[a.Key] = a.Value
	}
	return m
}
