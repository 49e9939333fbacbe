package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Config is where and how to export.
type Config struct {
	// URL is the full traces URL (for example
	// http://collector:4318/v1/traces).
	URL string
	// Headers are sent with every request (credentials: never logged).
	Headers map[string]string
	// Timeout bounds one export, retries included; 0 means 10 s (the
	// protocol's default for OTEL_EXPORTER_OTLP_TIMEOUT).
	Timeout time.Duration
	// Gzip compresses request bodies.
	Gzip bool
	// TLS is the client's TLS configuration for https URLs; nil uses the
	// system's roots.
	TLS *tls.Config
}

// Exporter is an sdktrace.SpanExporter speaking OTLP/HTTP.
type Exporter struct {
	cfg     Config
	client  *http.Client
	stopped atomic.Bool
}

var _ sdktrace.SpanExporter = (*Exporter)(nil)

// errStopped is returned by ExportSpans after Shutdown.
var errStopped = errors.New("otlp: exporter is shut down")

// New returns an exporter for cfg.
func New(cfg Config) (*Exporter, error) {
	if cfg.URL == "" {
		return nil, errors.New("otlp: no URL")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	// The default transport's proxy settings (from the environment), the
	// operator's TLS files.
	t := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.TLS != nil {
		t.TLSClientConfig = cfg.TLS
	}
	t.MaxIdleConnsPerHost = 2
	return &Exporter{cfg: cfg, client: &http.Client{Transport: t}}, nil
}

// ExportSpans sends one batch. It returns when the collector accepted it,
// refused it for good, or the export's timeout (or ctx) ended the retries.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.stopped.Load() {
		return errStopped
	}
	if len(spans) == 0 {
		return nil
	}
	body, err := encodeRequest(spans)
	if err != nil {
		return fmt.Errorf("otlp: encoding %d spans: %w", len(spans), err)
	}
	encoding := ""
	if e.cfg.Gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body)
		if err := zw.Close(); err != nil {
			return fmt.Errorf("otlp: compressing: %w", err)
		}
		body, encoding = buf.Bytes(), "gzip"
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	backoff := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		wait, err := e.send(ctx, body, encoding, len(spans))
		if err == nil || wait < 0 {
			return err
		}
		if wait == 0 {
			// Full jitter over the current back-off, doubling up to 5 s.
			wait = time.Duration(rand.Int64N(int64(backoff))) + backoff/2
			backoff = min(2*backoff, 5*time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up after %d attempts: %v)", err, attempt, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// send makes one attempt. wait < 0: do not retry; wait 0: retry after the
// back-off; wait > 0: retry after wait (the server's Retry-After).
func (e *Exporter) send(ctx context.Context, body []byte, encoding string, n int) (wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return -1, fmt.Errorf("otlp: building the request: %w", err)
	}
	for k, v := range e.cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return -1, fmt.Errorf("otlp: exporting %d spans: %w", n, context.Cause(ctx))
		}
		return 0, fmt.Errorf("otlp: exporting %d spans: %w", n, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		if rejected, msg := partialSuccess(data); rejected > 0 || msg != "" {
			return -1, fmt.Errorf("otlp: the collector rejected %d of %d spans: %s", rejected, n, truncate(msg, 200))
		}
		return -1, nil
	case code == http.StatusTooManyRequests || code == http.StatusBadGateway ||
		code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
		return retryAfter(resp.Header.Get("Retry-After")), fmt.Errorf("otlp: exporting %d spans: %s", n, resp.Status)
	default:
		return -1, fmt.Errorf("otlp: the collector refused %d spans: %s", n, resp.Status)
	}
}

// retryAfter reads a Retry-After header in seconds (capped at 30 s); 0
// when absent or not a number of seconds.
func retryAfter(v string) time.Duration {
	s, err := strconv.Atoi(v)
	if err != nil || s <= 0 {
		return 0
	}
	return min(time.Duration(s)*time.Second, 30*time.Second)
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := 0
	for i := range s {
		if i > n {
			break
		}
		cut = i
	}
	return s[:cut] + "…"
}

// Shutdown stops the exporter: later exports fail, idle connections are
// closed. Spans still queued are the span processor's to flush first.
func (e *Exporter) Shutdown(ctx context.Context) error {
	e.stopped.Store(true)
	e.client.CloseIdleConnections()
	return ctx.Err()
}
