package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracing is the process's OpenTelemetry setup: traces of every turn
// exported over OTLP/HTTP when the standard OTEL_* variables name an
// endpoint; nothing otherwise.
type tracing struct {
	// tracer is nil when tracing is off (the bot and agent then use
	// no-op spans).
	tracer trace.Tracer
	// capture is OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT.
	capture  bool
	shutdown func(context.Context) error
}

// newTracing reads OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is) or
// OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces), OTEL_EXPORTER_OTLP_HEADERS
// (and _TRACES_HEADERS), OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_SDK_DISABLED and OTEL_TRACES_EXPORTER (none turns it off). The SDK
// reads the rest (OTEL_TRACES_SAMPLER, OTEL_BSP_*, timeouts) itself.
// Problems are reported with the variable's name.
func newTracing(getenv func(string) string, log *slog.Logger, probs *problems) tracing {
	off := tracing{shutdown: func(context.Context) error { return nil }}
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		if base := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); base != "" {
			endpoint = strings.TrimRight(base, "/") + "/v1/traces"
		}
	}
	if endpoint == "" || strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return off
	}
	if e := getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		probs.add(fmt.Sprintf("OTEL_TRACES_EXPORTER must be otlp or none, got %q", e))
		return off
	}
	proto := cmp.Or(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf")
	if proto != "http/protobuf" {
		probs.add(fmt.Sprintf("OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf (the one Bobbin exports), got %q", proto))
		return off
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		probs.add("OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL such as http://otel-collector:4318")
		return off
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}
	headers, err := otlpHeaders(getenv("OTEL_EXPORTER_OTLP_HEADERS"))
	if err != nil {
		probs.add("OTEL_EXPORTER_OTLP_HEADERS " + err.Error())
		return off
	}
	th, err := otlpHeaders(getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS"))
	if err != nil {
		probs.add("OTEL_EXPORTER_OTLP_TRACES_HEADERS " + err.Error())
		return off
	}
	for k, v := range th {
		headers[k] = v
	}
	if len(headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(headers))
	}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		probs.add("OTEL_EXPORTER_OTLP_ENDPOINT: " + err.Error())
		return off
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cmp.Or(getenv("OTEL_SERVICE_NAME"), "bobbin"))}
	for kv := range strings.SplitSeq(getenv("OTEL_RESOURCE_ATTRIBUTES"), ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			continue
		}
		if k == "service.name" && getenv("OTEL_SERVICE_NAME") != "" {
			continue // OTEL_SERVICE_NAME wins
		}
		if uv, err := url.QueryUnescape(v); err == nil {
			v = uv
		}
		attrs = append(attrs, attribute.String(k, v))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewWithAttributes("", attrs...)))
	// Export failures are the SDK's to report; send them through our
	// logger (one process-wide setting, made where the logger is built).
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("otel: trace export", "err", err) }))
	return tracing{
		tracer:   tp.Tracer("github.com/bobbinbot/bobbin"),
		capture:  strings.EqualFold(getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"), "true"),
		shutdown: tp.Shutdown,
	}
}

// otlpHeaders parses "k=v,k2=v2" (values URL-encoded, per the spec). The
// error never quotes a value: headers carry credentials.
func otlpHeaders(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("must be a comma-separated list of key=value")
		}
		if uv, err := url.QueryUnescape(strings.TrimSpace(v)); err == nil {
			v = uv
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}
