package otlp

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// Span flags of OTLP (trace.proto, SpanFlags): bits 0-7 carry the W3C
// trace flags; these two say whether the parent (or a link's span) is
// remote.
const (
	flagHasIsRemote = uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	flagIsRemote    = uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
)

// encodeRequest is the body of an OTLP/HTTP trace export: the bytes of an
// ExportTraceServiceRequest (collector/trace/v1), whose only field is
// `repeated ResourceSpans resource_spans = 1`. Each ResourceSpans is
// marshalled by the protobuf library and framed here, which keeps the
// collector's generated gRPC service code out of the program.
func encodeRequest(spans []sdktrace.ReadOnlySpan) ([]byte, error) {
	var out []byte
	for _, rs := range group(spans) {
		b, err := proto.Marshal(rs)
		if err != nil {
			return nil, err
		}
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, b)
	}
	return out, nil
}

// group sorts spans into one ResourceSpans per resource and one
// ScopeSpans per instrumentation scope, in the order first seen.
func group(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	type scopeKey struct {
		res   attribute.Distinct
		name  string
		ver   string
		url   string
		attrs attribute.Distinct
	}
	var out []*tracepb.ResourceSpans
	byRes := map[attribute.Distinct]*tracepb.ResourceSpans{}
	byScope := map[scopeKey]*tracepb.ScopeSpans{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		res := s.Resource()
		rk := resKey(res)
		rs := byRes[rk]
		if rs == nil {
			rs = &tracepb.ResourceSpans{Resource: resourceOf(res)}
			if res != nil {
				rs.SchemaUrl = res.SchemaURL()
			}
			byRes[rk] = rs
			out = append(out, rs)
		}
		sc := s.InstrumentationScope()
		scAttrs := sc.Attributes
		sk := scopeKey{rk, sc.Name, sc.Version, sc.SchemaURL, scAttrs.Equivalent()}
		ss := byScope[sk]
		if ss == nil {
			ss = &tracepb.ScopeSpans{Scope: scopeOf(sc), SchemaUrl: sc.SchemaURL}
			byScope[sk] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, spanOf(s))
	}
	return out
}

func resKey(r *resource.Resource) attribute.Distinct {
	if r == nil {
		empty := attribute.NewSet()
		return empty.Equivalent()
	}
	return r.Equivalent()
}

func resourceOf(r *resource.Resource) *resourcepb.Resource {
	if r == nil {
		return &resourcepb.Resource{}
	}
	return &resourcepb.Resource{Attributes: keyValues(r.Attributes())}
}

func scopeOf(sc instrumentation.Scope) *commonpb.InstrumentationScope {
	attrs := sc.Attributes
	return &commonpb.InstrumentationScope{Name: sc.Name, Version: sc.Version, Attributes: keyValues(attrs.ToSlice())}
}

func spanOf(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	out := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Flags:                  flags(sc.TraceFlags(), s.Parent()),
		Name:                   s.Name(),
		Kind:                   tracepb.Span_SpanKind(kindOf(s.SpanKind())),
		StartTimeUnixNano:      unixNano(s.StartTime().UnixNano()),
		EndTimeUnixNano:        unixNano(s.EndTime().UnixNano()),
		Attributes:             keyValues(s.Attributes()),
		DroppedAttributesCount: uint32(max(s.DroppedAttributes(), 0)),
		DroppedEventsCount:     uint32(max(s.DroppedEvents(), 0)),
		DroppedLinksCount:      uint32(max(s.DroppedLinks(), 0)),
		Status:                 statusOf(s.Status()),
	}
	if p := s.Parent(); p.SpanID().IsValid() {
		psid := p.SpanID()
		out.ParentSpanId = psid[:]
	}
	for _, e := range s.Events() {
		out.Events = append(out.Events, &tracepb.Span_Event{
			TimeUnixNano: unixNano(e.Time.UnixNano()), Name: e.Name,
			Attributes: keyValues(e.Attributes), DroppedAttributesCount: uint32(max(e.DroppedAttributeCount, 0)),
		})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		out.Links = append(out.Links, &tracepb.Span_Link{
			TraceId: ltid[:], SpanId: lsid[:], TraceState: l.SpanContext.TraceState().String(),
			Attributes: keyValues(l.Attributes), DroppedAttributesCount: uint32(max(l.DroppedAttributeCount, 0)),
			Flags: flags(l.SpanContext.TraceFlags(), l.SpanContext),
		})
	}
	return out
}

// flags are a span's (or link's) OTLP flags: the W3C trace flags, and
// whether the related context (the parent, or the linked span) is remote.
func flags(tf trace.TraceFlags, related trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if related.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

// kindOf maps the API's span kind to OTLP's (the same numbers, 0-5).
func kindOf(k trace.SpanKind) int32 {
	if k < trace.SpanKindUnspecified || k > trace.SpanKindConsumer {
		return int32(trace.SpanKindInternal)
	}
	return int32(k)
}

func statusOf(st sdktrace.Status) *tracepb.Status {
	switch st.Code {
	case codes.Error:
		return &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: st.Description}
	case codes.Ok:
		return &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	}
	return &tracepb.Status{Code: tracepb.Status_STATUS_CODE_UNSET}
}

// unixNano is a time for OTLP: a zero time (before 1970) is 0.
func unixNano(ns int64) uint64 {
	if ns < 0 {
		return 0
	}
	return uint64(ns)
}

func keyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)})
	}
	return out
}

// anyValue converts an attribute value to OTLP's AnyValue; an empty value
// is an AnyValue with nothing set, as the protocol defines it.
func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.AsString()}}
	case attribute.BYTESLICE:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}}
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), func(b bool) *commonpb.AnyValue { return anyValue(attribute.BoolValue(b)) })
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), func(n int64) *commonpb.AnyValue { return anyValue(attribute.Int64Value(n)) })
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), func(f float64) *commonpb.AnyValue { return anyValue(attribute.Float64Value(f)) })
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), func(s string) *commonpb.AnyValue { return anyValue(attribute.StringValue(s)) })
	case attribute.SLICE:
		return array(v.AsSlice(), anyValue)
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: keyValues(v.AsMap())}}}
	}
	return &commonpb.AnyValue{}
}

func array[T any](xs []T, f func(T) *commonpb.AnyValue) *commonpb.AnyValue {
	vals := make([]*commonpb.AnyValue, len(xs))
	for i, x := range xs {
		vals[i] = f(x)
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}
}

// partialSuccess reads an ExportTraceServiceResponse: field 1 is
// partial_success {int64 rejected_spans = 1; string error_message = 2}.
// Unknown fields are skipped; a malformed body reads as full success (the
// status code already said the export was accepted).
func partialSuccess(b []byte) (rejected int64, msg string) {
	eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) {
		if num != 1 || typ != protowire.BytesType {
			return
		}
		eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) {
			switch {
			case num == 1 && typ == protowire.VarintType:
				if n, m := protowire.ConsumeVarint(v); m > 0 {
					rejected = int64(n)
				}
			case num == 2 && typ == protowire.BytesType:
				msg = string(v)
			}
		})
	})
	return rejected, msg
}

// eachField calls fn with each field of a protobuf message in order: its
// number, wire type and value (a length-delimited field's payload, any
// other field's encoded value). It stops at the first malformed field.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte)) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return
		}
		v := b[:m]
		if typ == protowire.BytesType {
			v, _ = protowire.ConsumeBytes(v)
		}
		fn(num, typ, v)
		b = b[m:]
	}
}
