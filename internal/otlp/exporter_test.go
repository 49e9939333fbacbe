package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// collector is an OTLP/HTTP traces endpoint that decodes requests with
// the protocol's generated types (the upstream definition of the wire
// format, independent of our encoder) and answers as told.
type collector struct {
	t  *testing.T
	mu sync.Mutex
	// reqs are the decoded requests; headers those of the last request.
	reqs     []*coltracepb.ExportTraceServiceRequest
	headers  http.Header
	attempts atomic.Int32
	// reply answers attempt n (1-based); nil: 200 with an empty response.
	reply func(n int32, w http.ResponseWriter)
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.attempts.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		c.t.Errorf("request %s %s, Content-Type %q", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			c.t.Errorf("gzip: %v", err)
			return
		}
		body = zr
	}
	data, _ := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &req); err != nil {
		c.t.Errorf("the body is not an ExportTraceServiceRequest: %v", err)
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, &req)
	c.headers = r.Header.Clone()
	c.mu.Unlock()
	if c.reply != nil {
		c.reply(n, w)
		return
	}
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

func newCollector(t *testing.T) (*collector, string) {
	c := &collector{t: t}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return c, srv.URL + "/v1/traces"
}

// spans records a parent and a child span with every kind of attribute
// value, an event, a link to a remote span, an error status, and a
// second scope.
func spans(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	rec := &recorder{}
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0", attribute.String("service.name", "bobbin"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(rec), sdktrace.WithResource(res))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tr := tp.Tracer("github.com/bobbinbot/bobbin", trace.WithInstrumentationVersion("v1"),
		trace.WithInstrumentationAttributes(attribute.String("scope.k", "scope.v")))
	other := tp.Tracer("other")

	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0xaa, 1}, SpanID: trace.SpanID{0xbb, 2}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	ctx, parent := tr.Start(context.Background(), "invoke_agent bobbin", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("link.k", "v")}}))
	_, child := tr.Start(ctx, "chat gpt-4o", trace.WithSpanKind(trace.SpanKindClient))
	child.SetAttributes(
		attribute.Bool("b", true), attribute.Int64("i", -7), attribute.Float64("f", 1.5), attribute.String("s", "ünïcode"),
		attribute.BoolSlice("bs", []bool{true, false}), attribute.Int64Slice("is", []int64{1, 2}),
		attribute.Float64Slice("fs", []float64{0.25}), attribute.StringSlice("ss", []string{"a", "b"}),
	)
	child.AddEvent("gen_ai.choice", trace.WithAttributes(attribute.Int("index", 0)))
	child.SetStatus(codes.Error, "the model stream broke")
	child.End()
	parent.SetStatus(codes.Ok, "ignored for ok")
	parent.End()
	_, o := other.Start(context.Background(), "other")
	o.End()
	return rec.spans()
}

type recorder struct {
	mu sync.Mutex
	s  []sdktrace.ReadOnlySpan
}

func (r *recorder) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s = append(r.s, s...)
	return nil
}
func (r *recorder) Shutdown(context.Context) error { return nil }
func (r *recorder) spans() []sdktrace.ReadOnlySpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sdktrace.ReadOnlySpan(nil), r.s...)
}

func TestExportWireFormat(t *testing.T) {
	for _, gz := range []bool{false, true} {
		c, url := newCollector(t)
		exp, err := New(Config{URL: url, Headers: map[string]string{"Authorization": "Bearer secret-token"}, Gzip: gz})
		if err != nil {
			t.Fatal(err)
		}
		in := spans(t)
		if err := exp.ExportSpans(context.Background(), in); err != nil {
			t.Fatalf("gzip=%v: %v", gz, err)
		}
		if len(c.reqs) != 1 {
			t.Fatalf("gzip=%v: %d requests, want 1", gz, len(c.reqs))
		}
		if got := c.headers.Get("Authorization"); got != "Bearer secret-token" {
			t.Errorf("Authorization header %q", got)
		}
		rss := c.reqs[0].ResourceSpans
		if len(rss) != 1 {
			t.Fatalf("%d resource spans, want 1 (one resource)", len(rss))
		}
		rs := rss[0]
		if rs.SchemaUrl != "https://opentelemetry.io/schemas/1.26.0" || len(rs.Resource.Attributes) != 1 ||
			rs.Resource.Attributes[0].Key != "service.name" || rs.Resource.Attributes[0].Value.GetStringValue() != "bobbin" {
			t.Errorf("resource: %v (schema %q)", rs.Resource, rs.SchemaUrl)
		}
		if len(rs.ScopeSpans) != 2 {
			t.Fatalf("%d scopes, want 2", len(rs.ScopeSpans))
		}
		byName := map[string]*tracepb.Span{}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				byName[s.Name] = s
			}
			if ss.Scope.Name == "github.com/bobbinbot/bobbin" {
				if ss.Scope.Version != "v1" || len(ss.Scope.Attributes) != 1 || ss.Scope.Attributes[0].Key != "scope.k" {
					t.Errorf("scope: %v", ss.Scope)
				}
				if len(ss.Spans) != 2 {
					t.Errorf("%d spans in our scope, want 2", len(ss.Spans))
				}
			}
		}
		child, parent := byName["chat gpt-4o"], byName["invoke_agent bobbin"]
		if child == nil || parent == nil || byName["other"] == nil {
			t.Fatalf("spans: %v", byName)
		}
		// Identity and structure, checked against the SDK's own record.
		var want sdktrace.ReadOnlySpan
		for _, s := range in {
			if s.Name() == "chat gpt-4o" {
				want = s
			}
		}
		tid, sid, psid := want.SpanContext().TraceID(), want.SpanContext().SpanID(), want.Parent().SpanID()
		if !bytes.Equal(child.TraceId, tid[:]) || !bytes.Equal(child.SpanId, sid[:]) || !bytes.Equal(child.ParentSpanId, psid[:]) {
			t.Errorf("child ids: trace %x span %x parent %x", child.TraceId, child.SpanId, child.ParentSpanId)
		}
		if !bytes.Equal(child.ParentSpanId, parent.SpanId) || len(parent.ParentSpanId) != 0 {
			t.Errorf("parent link: child's parent %x, parent's id %x, parent's parent %x", child.ParentSpanId, parent.SpanId, parent.ParentSpanId)
		}
		if child.Kind != tracepb.Span_SPAN_KIND_CLIENT || parent.Kind != tracepb.Span_SPAN_KIND_SERVER || byName["other"].Kind != tracepb.Span_SPAN_KIND_INTERNAL {
			t.Errorf("kinds: %v %v %v", child.Kind, parent.Kind, byName["other"].Kind)
		}
		if child.StartTimeUnixNano != uint64(want.StartTime().UnixNano()) || child.EndTimeUnixNano != uint64(want.EndTime().UnixNano()) || child.EndTimeUnixNano < child.StartTimeUnixNano {
			t.Errorf("times: %d..%d", child.StartTimeUnixNano, child.EndTimeUnixNano)
		}
		// Sampled, local parent.
		if child.Flags != 0x101 {
			t.Errorf("child flags %#x, want 0x101 (sampled, parent known local)", child.Flags)
		}
		if child.Status.Code != tracepb.Status_STATUS_CODE_ERROR || child.Status.Message != "the model stream broke" {
			t.Errorf("child status %v", child.Status)
		}
		if parent.Status.Code != tracepb.Status_STATUS_CODE_OK || parent.Status.Message != "" {
			t.Errorf("parent status %v (an ok status carries no message)", parent.Status)
		}
		attrs := map[string]string{}
		for _, kv := range child.Attributes {
			attrs[kv.Key] = kv.Value.String()
		}
		for k, want := range map[string]string{
			"b": "bool_value:true", "i": "int_value:-7", "f": "double_value:1.5", "s": `string_value:"ünïcode"`,
			"bs": "array_value:{values:{bool_value:true} values:{bool_value:false}}",
			"is": "array_value:{values:{int_value:1} values:{int_value:2}}",
			"fs": "array_value:{values:{double_value:0.25}}",
			"ss": `array_value:{values:{string_value:"a"} values:{string_value:"b"}}`,
		} {
			if got := strings.Join(strings.Fields(attrs[k]), " "); got != want {
				t.Errorf("attribute %s = %s, want %s", k, got, want)
			}
		}
		if len(child.Events) != 1 || child.Events[0].Name != "gen_ai.choice" || child.Events[0].TimeUnixNano == 0 ||
			len(child.Events[0].Attributes) != 1 || child.Events[0].Attributes[0].Value.GetIntValue() != 0 {
			t.Errorf("events: %v", child.Events)
		}
		if len(parent.Links) != 1 {
			t.Fatalf("links: %v", parent.Links)
		}
		l := parent.Links[0]
		if l.TraceId[0] != 0xaa || l.SpanId[0] != 0xbb || l.Flags != 0x301 || len(l.Attributes) != 1 {
			t.Errorf("link: %v (flags %#x, want 0x301: sampled, remote)", l, l.Flags)
		}
	}
}

func TestExportRetries(t *testing.T) {
	t.Run("503 then 200", func(t *testing.T) {
		c, url := newCollector(t)
		c.reply = func(n int32, w http.ResponseWriter) {
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}
		exp, _ := New(Config{URL: url})
		if err := exp.ExportSpans(context.Background(), spans(t)); err != nil {
			t.Fatal(err)
		}
		if n := c.attempts.Load(); n != 2 {
			t.Errorf("%d attempts, want 2", n)
		}
	})
	t.Run("429 with Retry-After", func(t *testing.T) {
		c, url := newCollector(t)
		c.reply = func(n int32, w http.ResponseWriter) {
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		}
		exp, _ := New(Config{URL: url})
		if err := exp.ExportSpans(context.Background(), spans(t)); err != nil {
			t.Fatal(err)
		}
		if n := c.attempts.Load(); n != 2 {
			t.Errorf("%d attempts, want 2", n)
		}
	})
	t.Run("400 is final", func(t *testing.T) {
		c, url := newCollector(t)
		c.reply = func(_ int32, w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest) }
		exp, _ := New(Config{URL: url, Headers: map[string]string{"x-api-key": "secret-token"}})
		err := exp.ExportSpans(context.Background(), spans(t))
		if err == nil || !strings.Contains(err.Error(), "400") || strings.Contains(err.Error(), "secret-token") {
			t.Errorf("error %v: want the status and no header value", err)
		}
		if n := c.attempts.Load(); n != 1 {
			t.Errorf("%d attempts, want 1", n)
		}
	})
	t.Run("always 503 gives up at the timeout", func(t *testing.T) {
		c, url := newCollector(t)
		c.reply = func(_ int32, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) }
		exp, _ := New(Config{URL: url, Timeout: 1500 * time.Millisecond})
		err := exp.ExportSpans(context.Background(), spans(t))
		if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "gave up") {
			t.Errorf("error %v", err)
		}
		if n := c.attempts.Load(); n < 2 {
			t.Errorf("%d attempts, want retries", n)
		}
	})
	t.Run("collector down", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL + "/v1/traces"
		srv.Close()
		exp, _ := New(Config{URL: url, Timeout: 800 * time.Millisecond})
		if err := exp.ExportSpans(context.Background(), spans(t)); err == nil {
			t.Error("no error with the collector down")
		}
	})
}

func TestExportPartialSuccess(t *testing.T) {
	c, url := newCollector(t)
	c.reply = func(_ int32, w http.ResponseWriter) {
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{
			RejectedSpans: 2, ErrorMessage: "spans too old"}})
		_, _ = w.Write(b)
	}
	exp, _ := New(Config{URL: url})
	err := exp.ExportSpans(context.Background(), spans(t))
	if err == nil || !strings.Contains(err.Error(), "rejected 2 of 3 spans: spans too old") {
		t.Errorf("error %v", err)
	}
	if n := c.attempts.Load(); n != 1 {
		t.Errorf("%d attempts, want 1 (a partial success is not retried)", n)
	}
}

func TestShutdown(t *testing.T) {
	_, url := newCollector(t)
	exp, _ := New(Config{URL: url})
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(context.Background(), spans(t)); err == nil {
		t.Error("export after shutdown succeeded")
	}
}

// TestPartialSuccessDecoding: malformed and unknown-field bodies.
func TestPartialSuccessDecoding(t *testing.T) {
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 5}})
	if n, msg := partialSuccess(b); n != 5 || msg != "" {
		t.Errorf("got %d %q", n, msg)
	}
	for _, bad := range [][]byte{nil, {0xff}, {0x0a, 0x05, 0x08}, []byte("not protobuf at all")} {
		_, _ = partialSuccess(bad) // must not panic
	}
}

func FuzzTruncate(f *testing.F) {
	f.Add("héllo wörld", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1000 {
			return
		}
		got := truncate(s, n)
		if len(s) <= n && got != s {
			t.Fatalf("truncate(%q, %d) = %q", s, n, got)
		}
		if len(s) > n && len(strings.TrimSuffix(got, "…")) > n {
			t.Fatalf("truncate(%q, %d) = %q: too long", s, n, got)
		}
	})
}
