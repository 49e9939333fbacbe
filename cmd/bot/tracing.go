package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/bobbinbot/bobbin/internal/otlp"
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
// (and _TRACES_HEADERS), OTEL_EXPORTER_OTLP_TIMEOUT, _COMPRESSION,
// _CERTIFICATE, _CLIENT_CERTIFICATE and _CLIENT_KEY (each also as
// OTEL_EXPORTER_OTLP_TRACES_*, which wins), OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_SDK_DISABLED and OTEL_TRACES_EXPORTER
// (none turns it off). The SDK reads the rest (OTEL_TRACES_SAMPLER,
// OTEL_BSP_*) itself. Problems are reported with the variable's name.
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
	cfg := otlp.Config{URL: endpoint}
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
	cfg.Headers = headers
	if !otlpTransport(getenv, &cfg, probs) {
		return off
	}
	exp, err := otlp.New(cfg)
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

// otlpVar reads OTEL_EXPORTER_OTLP_TRACES_<name>, else
// OTEL_EXPORTER_OTLP_<name>, and says which one it read.
func otlpVar(getenv func(string) string, name string) (value, key string) {
	if v := getenv("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
		return v, "OTEL_EXPORTER_OTLP_TRACES_" + name
	}
	return getenv("OTEL_EXPORTER_OTLP_" + name), "OTEL_EXPORTER_OTLP_" + name
}

// otlpTransport reads the export's timeout (milliseconds), compression
// (gzip or none) and TLS files (PEM: a CA bundle, a client certificate
// and its key) into cfg; false when one is wrong (reported).
func otlpTransport(getenv func(string) string, cfg *otlp.Config, probs *problems) bool {
	ok := true
	if v, key := otlpVar(getenv, "TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || ms <= 0 {
			probs.add(key + " must be a positive number of milliseconds, got " + strconv.Quote(v))
			ok = false
		}
		cfg.Timeout = time.Duration(ms) * time.Millisecond
	}
	switch v, key := otlpVar(getenv, "COMPRESSION"); strings.ToLower(strings.TrimSpace(v)) {
	case "", "none":
	case "gzip":
		cfg.Gzip = true
	default:
		probs.add(key + " must be gzip or none, got " + strconv.Quote(v))
		ok = false
	}
	ca, caKey := otlpVar(getenv, "CERTIFICATE")
	cert, certKey := otlpVar(getenv, "CLIENT_CERTIFICATE")
	key, keyKey := otlpVar(getenv, "CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return ok
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		pool := x509.NewCertPool()
		switch {
		case err != nil:
			probs.add(caKey + ": " + err.Error())
			ok = false
		case !pool.AppendCertsFromPEM(pem):
			probs.add(caKey + ": " + ca + " holds no PEM certificate")
			ok = false
		}
		tc.RootCAs = pool
	}
	switch {
	case (cert == "") != (key == ""):
		probs.add(certKey + " and " + keyKey + " must be set together")
		ok = false
	case cert != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			probs.add(certKey + ", " + keyKey + ": " + err.Error())
			ok = false
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	cfg.TLS = tc
	return ok
}
