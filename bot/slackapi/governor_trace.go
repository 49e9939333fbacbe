package slackapi

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Tracing of budget waits: a call the governor made wait for budget, or
// dropped or merged, is a "slack.budget_wait" span under the span in the
// call's context (the turn's invoke_agent span for a reply's edits). The
// tracer is the one of that span's provider, so nothing is injected; a
// call that did not wait, or whose context carries no recording span,
// builds nothing.

// tracerName is the instrumentation scope of the governor's spans.
const tracerName = "github.com/bobbinbot/bobbin/bot/slackapi"

// Outcomes of a budget wait (attribute slack.budget.outcome).
const (
	outcomeGranted  = "granted"
	outcomeDropped  = "dropped"
	outcomeMerged   = "merged"
	outcomeNoSlot   = "no_slot"
	outcomeCanceled = "canceled"
)

// Attribute keys of the budget wait span.
const (
	attrMethod   = attribute.Key("slack.method")
	attrPriority = attribute.Key("slack.priority")
	attrOutcome  = attribute.Key("slack.budget.outcome")
	attrWaitMS   = attribute.Key("slack.budget.wait_ms")
)

// traceWait records c's wait from start until now, ended by outcome, as a
// span under ctx's span. It is called only for calls that waited, were
// dropped or were merged.
func traceWait(ctx context.Context, c Call, start time.Time, outcome string) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return
	}
	end := time.Now()
	_, span := parent.TracerProvider().Tracer(tracerName).Start(ctx, "slack.budget_wait",
		trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrMethod.String(c.Method), attrPriority.String(c.Prio.String()),
			attrOutcome.String(outcome), attrWaitMS.Int64(end.Sub(start).Milliseconds())))
	span.End(trace.WithTimestamp(end))
}
