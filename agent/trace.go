package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/bobbinbot/bobbin/provider"
)

// Tracing follows the OpenTelemetry GenAI semantic conventions: a
// "chat MODEL" span per model call and an "execute_tool NAME" span per tool
// call, children of the caller's span in ctx (the bot's invoke_agent span),
// and an approval wait span around each question to a person. With no
// Options.Tracer the no-op tracer is used and no attribute is built.

// Attribute keys of the GenAI semantic conventions.
const (
	attrOperation     = attribute.Key("gen_ai.operation.name")
	attrProvider      = attribute.Key("gen_ai.provider.name")
	attrRequestModel  = attribute.Key("gen_ai.request.model")
	attrMaxTokens     = attribute.Key("gen_ai.request.max_tokens")
	attrResponseModel = attribute.Key("gen_ai.response.model")
	attrFinish        = attribute.Key("gen_ai.response.finish_reasons")
	attrInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	attrCacheRead     = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	attrCacheWrite    = attribute.Key("gen_ai.usage.cache_creation.input_tokens")
	attrToolName      = attribute.Key("gen_ai.tool.name")
	attrToolCallID    = attribute.Key("gen_ai.tool.call.id")
	attrToolType      = attribute.Key("gen_ai.tool.type")
	attrToolArgs      = attribute.Key("gen_ai.tool.call.arguments")
	attrToolResult    = attribute.Key("gen_ai.tool.call.result")
	attrInputMessages = attribute.Key("gen_ai.input.messages")
	attrOutputMsgs    = attribute.Key("gen_ai.output.messages")
	attrSystemInstr   = attribute.Key("gen_ai.system_instructions")
	attrErrorType     = attribute.Key("error.type")
	attrMCPServer     = attribute.Key("mcp.server.name")
	attrDecision      = attribute.Key("bobbin.approval.decision")
)

func (a *Agent) tracer() trace.Tracer {
	if a.opts.Tracer != nil {
		return a.opts.Tracer
	}
	return noopTracer
}

var noopTracer = noop.NewTracerProvider().Tracer("")

// startChat opens the span of one model call; turn says req was built
// from the run's history (its captured content then shows TurnOnly
// results as their placeholders).
func (r *run) startChat(ctx context.Context, req provider.Request, turn bool) (context.Context, trace.Span) {
	ctx, span := r.a.tracer().Start(ctx, "chat "+req.Model, trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(attrOperation.String("chat"), attrRequestModel.String(req.Model))
	if name := cmp.Or(r.t.ProviderName, r.a.opts.ProviderName); name != "" {
		span.SetAttributes(attrProvider.String(name))
	}
	if req.MaxTokens > 0 {
		span.SetAttributes(attrMaxTokens.Int(req.MaxTokens))
	}
	if r.a.opts.CaptureContent {
		if len(req.Messages) > 0 && req.Messages[0].Role == provider.RoleSystem {
			span.SetAttributes(attrSystemInstr.String(req.Messages[0].Content))
		}
		msgs := req.Messages
		if turn {
			msgs = r.keptRequest(msgs)
		}
		span.SetAttributes(attrInputMessages.String(messagesJSON(msgs)))
	}
	return ctx, span
}

// endChat records a model call's outcome on its span and ends it.
func (r *run) endChat(span trace.Span, s *streamed, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if s != nil {
		if s.usage.Known {
			span.SetAttributes(attrInputTokens.Int(s.usage.InputTokens), attrOutputTokens.Int(s.usage.OutputTokens),
				attrCacheRead.Int(s.usage.CacheReadTokens), attrCacheWrite.Int(s.usage.CacheWriteTokens))
		}
		if s.stop != "" {
			span.SetAttributes(attrFinish.StringSlice([]string{finishReason(s.stop, s.raw)}))
		}
		if r.a.opts.CaptureContent && err == nil {
			span.SetAttributes(attrOutputMsgs.String(messagesJSON([]provider.Message{s.msg})))
		}
	}
	if err != nil {
		span.SetAttributes(attrErrorType.String(errorType(err)))
		span.SetStatus(codes.Error, err.Error())
	}
}

// finishReason maps a normalized stop reason to the conventions' values.
func finishReason(s provider.StopReason, raw string) string {
	switch s {
	case provider.StopEndTurn:
		return "stop"
	case provider.StopToolUse:
		return "tool_call"
	case provider.StopMaxTokens:
		return "length"
	}
	if raw != "" {
		return raw
	}
	return string(s)
}

func errorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, provider.ErrContextLength):
		return "context_length_exceeded"
	case errors.Is(err, provider.ErrTruncated):
		return "truncated"
	}
	return "_OTHER"
}

func messagesJSON(msgs []provider.Message) string {
	type part struct {
		Role    string `json:"role"`
		Content string `json:"content,omitempty"`
		Tools   []any  `json:"tool_calls,omitempty"`
	}
	out := make([]part, len(msgs))
	for i, m := range msgs {
		out[i] = part{Role: string(m.Role), Content: m.Content}
		for _, c := range m.ToolCalls {
			out[i].Tools = append(out[i].Tools, map[string]string{"id": c.ID, "name": c.Name, "arguments": c.Arguments})
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// startTool opens the span of one tool call.
func (r *run) startTool(ctx context.Context, p *plan) (context.Context, trace.Span) {
	ctx, span := r.a.tracer().Start(ctx, "execute_tool "+p.call.Name, trace.WithSpanKind(trace.SpanKindInternal))
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(attrOperation.String("execute_tool"), attrToolName.String(p.call.Name),
		attrToolCallID.String(p.call.ID), attrToolType.String("function"))
	if p.hints.Server != "" {
		span.SetAttributes(attrMCPServer.String(p.hints.Server))
	}
	if r.a.opts.CaptureContent {
		span.SetAttributes(attrToolArgs.String(p.call.Arguments))
	}
	return ctx, span
}

// endTool records a tool call's result on its span and ends it.
func (r *run) endTool(span trace.Span, res provider.ToolResult) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if res.IsError {
		span.SetAttributes(attrErrorType.String("tool_error"))
		span.SetStatus(codes.Error, "tool error")
	}
	if r.a.opts.CaptureContent {
		span.SetAttributes(attrToolResult.String(res.Content))
	}
}

// startApproval opens the span of a wait for a person's approval.
func (r *run) startApproval(ctx context.Context, p *plan) (context.Context, trace.Span) {
	ctx, span := r.a.tracer().Start(ctx, "approval_wait "+p.call.Name)
	if span.IsRecording() {
		span.SetAttributes(attrToolName.String(p.call.Name), attrToolCallID.String(p.call.ID))
	}
	return ctx, span
}

func endApproval(span trace.Span, dec Decision, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetAttributes(attrDecision.String("none"), attrErrorType.String(errorType(err)))
		return
	}
	span.SetAttributes(attrDecision.String(dec.String()))
}
