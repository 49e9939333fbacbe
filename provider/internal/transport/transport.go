// Package transport is the HTTP plumbing shared by the model clients
// (provider/openai, provider/anthropic): building the *http.Client, POSTing
// a JSON body, retrying only before the first byte, the first-byte, idle and
// overall timeouts, bounded error bodies and stream bodies, and API-key
// scrubbing. Each protocol decodes its own stream and classifies its own
// error JSON.
//
// transport may import provider and provider/internal/sse; it must not
// import agent, bot, session, mcp or any third-party package.
package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/sse"
)

// Defaults for the zero values of provider.ClientOptions.
const (
	DefaultConnectTimeout   = 10 * time.Second
	DefaultFirstByteTimeout = 60 * time.Second
	DefaultIdleTimeout      = 90 * time.Second
	DefaultRequestTimeout   = 10 * time.Minute
	DefaultMaxAttempts      = 3
	// MaxRetryAfter is the longest server-requested wait the client sleeps
	// through; a longer Retry-After ends the retries and is reported in
	// APIError.RetryAfter for the caller to decide.
	MaxRetryAfter = 60 * time.Second
	// MaxErrorBody caps how much of an error response is read.
	MaxErrorBody = 64 << 10
	// DefaultMaxResponseBytes caps a stream's body: a model answer is at
	// most a few megabytes, and an endless stream must not grow the
	// decoders' buffers without bound.
	DefaultMaxResponseBytes = 64 << 20
)

// Timeout causes. They are the context.Cause of the request context and the
// error Stream.Read returns when the timer fired.
var (
	ErrFirstByteTimeout = errors.New("no response headers before the first-byte timeout")
	ErrIdleTimeout      = errors.New("no stream data before the idle timeout")
	ErrRequestTimeout   = errors.New("request exceeded its overall timeout")
)

// ErrResponseTooLarge is the error Stream.Read returns once the body has
// exceeded Config.MaxResponseBytes.
var ErrResponseTooLarge = errors.New("stream body exceeds the size limit")

// errClosed is the cancel cause after Stream.Close.
var errClosed = errors.New("stream closed")

// Config configures a Client.
type Config struct {
	// Provider names the protocol in APIError.Provider ("openai").
	Provider string
	// Options are the caller's client options; zero fields mean defaults. A
	// negative timeout disables that timer.
	Options provider.ClientOptions
	// DecodeError turns the bounded body of a non-2xx response into an
	// APIError (type, code, message, ContextLength, Retryable for
	// protocol-level overload types). It may return nil. The transport then
	// fills Provider, Status and RetryAfter, ORs in status-based
	// retryability (408, 409, 429, 5xx) and applies x-should-retry, and
	// scrubs the API key from Message.
	DecodeError func(status int, body []byte) *provider.APIError
	// Sleep waits d or until ctx ends (returning its cause); nil means a
	// real timer. Tests inject a recorder.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a number in [0, 1); nil means math/rand/v2.
	Jitter func() float64
	// MaxResponseBytes caps a stream's body (default
	// DefaultMaxResponseBytes).
	MaxResponseBytes int64
}

// Client posts requests for one model client. It is safe for concurrent
// use.
type Client struct {
	cfg        Config
	hc         *http.Client
	log        *slog.Logger
	firstByte  time.Duration
	idle       time.Duration
	overall    time.Duration
	maxAttempt int
}

// New returns a Client for cfg. When cfg.Options.HTTPClient is nil it
// builds one with NewHTTPClient.
func New(cfg Config) *Client {
	o := cfg.Options
	c := &Client{
		cfg:        cfg,
		hc:         o.HTTPClient,
		log:        o.Logger,
		firstByte:  orDefault(o.FirstByteTimeout, DefaultFirstByteTimeout),
		idle:       orDefault(o.IdleTimeout, DefaultIdleTimeout),
		overall:    orDefault(o.RequestTimeout, DefaultRequestTimeout),
		maxAttempt: o.MaxAttempts,
	}
	if c.hc == nil {
		c.hc = NewHTTPClient(o)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.maxAttempt <= 0 {
		c.maxAttempt = DefaultMaxAttempts
	}
	if c.cfg.Sleep == nil {
		c.cfg.Sleep = sleep
	}
	if c.cfg.Jitter == nil {
		c.cfg.Jitter = rand.Float64
	}
	if c.cfg.MaxResponseBytes <= 0 {
		c.cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	return c
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// NewHTTPClient builds the client used when ClientOptions.HTTPClient is nil:
// proxy from the environment, a dialer and TLS handshake bounded by
// ConnectTimeout, HTTP/2 when offered, and no overall client timeout (a
// stream may legitimately last minutes; Client enforces its own deadlines).
func NewHTTPClient(o provider.ClientOptions) *http.Client {
	ct := orDefault(o.ConnectTimeout, DefaultConnectTimeout)
	if ct < 0 {
		ct = 0
	}
	d := &net.Dialer{Timeout: ct, KeepAlive: 30 * time.Second}
	return &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         d.DialContext,
		TLSHandshakeTimeout: ct,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        100,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
	}}
}

// Post sends body as JSON to url with header (plus Content-Type,
// Accept: text/event-stream and ClientOptions.Headers, which win) and
// returns the open stream once a 2xx status arrived. Network errors,
// first-byte timeouts and 408, 409, 429, 5xx answers are retried up to
// MaxAttempts with exponential backoff (0.5 s·2ⁿ, jittered) or the server's
// Retry-After-Ms / Retry-After; x-should-retry overrides the decision. A
// final non-2xx answer is returned as *provider.APIError. The caller must
// Close the stream.
func (c *Client) Post(ctx context.Context, url string, header http.Header, body []byte) (*Stream, error) {
	reqCtx, reqCancel := context.WithCancel(ctx)
	if c.overall > 0 {
		var stop context.CancelFunc
		reqCtx, stop = context.WithTimeoutCause(reqCtx, c.overall, ErrRequestTimeout)
		parent := reqCancel
		reqCancel = func() { stop(); parent() }
	}
	s, err := c.post(reqCtx, url, header, body)
	if err != nil {
		reqCancel()
		return nil, err
	}
	s.reqCancel = reqCancel
	return s, nil
}

func (c *Client) post(ctx context.Context, url string, header http.Header, body []byte) (*Stream, error) {
	var lastErr error
	for attempt := 0; attempt < c.maxAttempt; attempt++ {
		if attempt > 0 {
			if err := c.cfg.Sleep(ctx, c.delay(attempt-1, lastErr)); err != nil {
				return nil, c.Scrub(fmt.Errorf("waiting to retry after %w: %w", lastErr, err))
			}
		}
		s, retry, err := c.try(ctx, url, header, body)
		if err == nil {
			s.Attempts = attempt + 1
			return s, nil
		}
		lastErr = err
		if !retry || ctx.Err() != nil {
			break
		}
		if attempt+1 < c.maxAttempt {
			c.log.LogAttrs(ctx, slog.LevelWarn, "model request failed, retrying",
				slog.String("provider", c.cfg.Provider), slog.Int("attempt", attempt+1), slog.String("error", lastErr.Error()))
		}
	}
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); !errors.Is(lastErr, cause) {
			return nil, c.Scrub(fmt.Errorf("%w (last attempt: %w)", cause, lastErr))
		}
	}
	return nil, lastErr
}

// try makes one attempt. It reports whether a failure may be retried.
func (c *Client) try(ctx context.Context, url string, header http.Header, body []byte) (*Stream, bool, error) {
	attCtx, attCancel := context.WithCancelCause(ctx)
	req, err := http.NewRequestWithContext(attCtx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		attCancel(nil)
		return nil, false, c.Scrub(err)
	}
	for k, v := range header {
		req.Header[http.CanonicalHeaderKey(k)] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range c.cfg.Options.Headers {
		req.Header.Set(k, v)
	}
	var fb *time.Timer
	if c.firstByte > 0 {
		fb = time.AfterFunc(c.firstByte, func() { attCancel(ErrFirstByteTimeout) })
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if fb != nil {
			fb.Stop()
		}
		cause := context.Cause(attCtx)
		attCancel(nil)
		if errors.Is(cause, ErrFirstByteTimeout) {
			return nil, true, ErrFirstByteTimeout
		}
		if ctx.Err() != nil {
			return nil, false, c.Scrub(fmt.Errorf("%w: %w", context.Cause(ctx), err))
		}
		return nil, true, c.Scrub(err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if fb != nil && !fb.Stop() {
			// The timer fired as the headers arrived: the attempt is
			// cancelled, so treat it as the timeout it nearly was.
			resp.Body.Close()
			attCancel(nil)
			return nil, true, ErrFirstByteTimeout
		}
		return c.newStream(attCtx, resp, attCancel), false, nil
	}
	// The first-byte timer keeps running while the error body is read.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
	resp.Body.Close()
	if fb != nil {
		fb.Stop()
	}
	attCancel(nil)
	ae := c.apiError(resp, b)
	// A wait longer than MaxRetryAfter is the caller's decision.
	return nil, ae.Retryable && ae.RetryAfter <= MaxRetryAfter, ae
}

// apiError classifies a non-2xx response.
func (c *Client) apiError(resp *http.Response, body []byte) *provider.APIError {
	var ae *provider.APIError
	if c.cfg.DecodeError != nil {
		ae = c.cfg.DecodeError(resp.StatusCode, body)
	}
	if ae == nil {
		ae = &provider.APIError{}
	}
	if ae.Message == "" {
		ae.Message = Shorten(string(body))
		if ae.Message == "" {
			ae.Message = http.StatusText(resp.StatusCode)
		}
	}
	ae.Provider = c.cfg.Provider
	ae.Status = resp.StatusCode
	ae.Message = c.scrubString(ae.Message)
	ae.Retryable = ae.Retryable || RetryableStatus(resp.StatusCode)
	switch strings.ToLower(resp.Header.Get("x-should-retry")) {
	case "true":
		ae.Retryable = true
	case "false":
		ae.Retryable = false
	}
	if d, ok := RetryAfter(resp.Header, time.Now()); ok {
		ae.RetryAfter = d
	}
	return ae
}

// maxMessageBytes is the longest error message kept from an endpoint.
const maxMessageBytes = 512

// Shorten trims an endpoint's error message and cuts it, on a rune
// boundary, to something fit for a log line.
func Shorten(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxMessageBytes {
		return s
	}
	i := maxMessageBytes
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// RetryableStatus reports whether an HTTP status is worth retrying: 408,
// 409, 429 and every 5xx (Anthropic's 529 overloaded included).
func RetryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusConflict ||
		code == http.StatusTooManyRequests || code >= 500
}

// maxReportedRetryAfter caps a parsed Retry-After: a header like "1e300"
// or "Inf" must not overflow time.Duration into a negative wait.
const maxReportedRetryAfter = 24 * time.Hour

// RetryAfter reads the server's requested wait: Retry-After-Ms
// (milliseconds, OpenAI and Anthropic), else Retry-After as seconds or an
// HTTP date relative to now. The result is at most 24 h.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if d, ok := parseWait(v, time.Millisecond); ok {
			return d, true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if d, ok := parseWait(v, time.Second); ok {
		return d, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxReportedRetryAfter), true
	}
	return 0, false
}

// parseWait parses a non-negative decimal count of unit, capped at
// maxReportedRetryAfter.
func parseWait(v string, unit time.Duration) (time.Duration, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0) { // !(f >= 0) also rejects NaN
		return 0, false
	}
	if f*float64(unit) >= float64(maxReportedRetryAfter) {
		return maxReportedRetryAfter, true
	}
	return time.Duration(f * float64(unit)), true
}

// delay is the wait before retry n (0-based) after err.
func (c *Client) delay(n int, err error) time.Duration {
	var ae *provider.APIError
	if errors.As(err, &ae) && ae.RetryAfter > 0 && ae.RetryAfter <= MaxRetryAfter {
		return ae.RetryAfter
	}
	d := 500 * time.Millisecond << min(n, 4)
	// Up to 25 % less, so clients that failed together do not retry together.
	return d - time.Duration(float64(d)*0.25*c.cfg.Jitter())
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Scrub returns err with every occurrence of the API key in its text
// replaced by "[redacted]", keeping errors.Is/As through Unwrap. It returns
// err itself when the key does not occur.
func (c *Client) Scrub(err error) error {
	if err == nil || c.cfg.Options.APIKey == "" || !strings.Contains(err.Error(), c.cfg.Options.APIKey) {
		return err
	}
	return &scrubbed{err: err, msg: c.scrubString(err.Error())}
}

// ScrubString removes the API key from s.
func (c *Client) ScrubString(s string) string { return c.scrubString(s) }

func (c *Client) scrubString(s string) string {
	if k := c.cfg.Options.APIKey; k != "" {
		return strings.ReplaceAll(s, k, "[redacted]")
	}
	return s
}

type scrubbed struct {
	err error
	msg string
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// Stream is an open 2xx response. Read it (usually through an sse.Reader),
// call Touch after every data event, and Close it when done. It is an
// io.Reader whose errors after a timeout or cancellation are the cause
// (ErrIdleTimeout, ErrRequestTimeout, the caller's context cause) rather
// than the transport's "context canceled".
type Stream struct {
	// StatusCode and Header are the response's.
	StatusCode int
	Header     http.Header
	// Attempts is how many requests it took (1 = no retry).
	Attempts int

	body io.ReadCloser
	// cause returns the attempt context's cancel cause once it has ended
	// (Close, the watchdog, the overall timeout, the caller), else nil.
	cause     func() error
	cancel    context.CancelCauseFunc
	reqCancel context.CancelFunc
	scrub     func(error) error

	idle   time.Duration
	start  time.Time
	max    int64        // body bytes allowed
	read   int64        // body bytes read so far (Read is not concurrent)
	last   atomic.Int64 // time.Since(start) at the last Touch
	closed atomic.Bool
	mu     sync.Mutex
	timer  *time.Timer
}

func (c *Client) newStream(attCtx context.Context, resp *http.Response, cancel context.CancelCauseFunc) *Stream {
	s := &Stream{
		StatusCode: resp.StatusCode,
		Header:     resp.Header,
		body:       resp.Body,
		cause: func() error {
			if attCtx.Err() == nil {
				return nil
			}
			return context.Cause(attCtx)
		},
		cancel: cancel,
		scrub:  c.Scrub,
		idle:   c.idle,
		max:    c.cfg.MaxResponseBytes,
		start:  time.Now(),
	}
	if s.idle > 0 {
		s.mu.Lock()
		s.timer = time.AfterFunc(s.idle, s.watch)
		s.mu.Unlock()
	}
	return s
}

// Touch records stream progress: the idle timer restarts from now. Call it
// for data events only; comments and keep-alives must not keep a stalled
// stream alive. It is cheap (one clock read, one atomic store).
func (s *Stream) Touch() {
	s.last.Store(int64(time.Since(s.start)))
}

// watch runs when the idle timer fires: it cancels the stream if nothing
// touched it for the idle timeout, else re-arms for the remainder.
func (s *Stream) watch() {
	if s.closed.Load() {
		return
	}
	quiet := time.Since(s.start) - time.Duration(s.last.Load())
	if quiet >= s.idle {
		s.cancel(ErrIdleTimeout)
		return
	}
	s.mu.Lock()
	if !s.closed.Load() { // Close may have stopped the timer meanwhile
		s.timer.Reset(s.idle - quiet)
	}
	s.mu.Unlock()
}

// Read reads the response body. After a timeout or cancellation it returns
// the cause (see Err); past the size cap, ErrResponseTooLarge.
func (s *Stream) Read(p []byte) (int, error) {
	if s.read > s.max {
		return 0, ErrResponseTooLarge
	}
	n, err := s.body.Read(p)
	s.read += int64(n)
	if s.read > s.max {
		return n, ErrResponseTooLarge
	}
	if err != nil && err != io.EOF {
		err = s.Err(err)
	}
	return n, err
}

// Err translates an error met while reading the stream: if the stream's
// context has ended it returns the cause (ErrIdleTimeout,
// ErrRequestTimeout, the caller's cancellation), wrapped around err;
// otherwise err. The API key is scrubbed from the text.
func (s *Stream) Err(err error) error {
	if err == nil {
		return nil
	}
	if cause := s.cause(); cause != nil && !errors.Is(err, cause) {
		if errors.Is(cause, ErrIdleTimeout) || errors.Is(cause, ErrRequestTimeout) {
			return cause
		}
		err = fmt.Errorf("%w: %w", cause, err)
	}
	return s.scrub(err)
}

// ReadError translates a failure to read the body (as Err does) for the
// caller's final error. Unless the caller's ctx ended or oversized input was
// refused, the stream was cut short before its terminal marker, so the
// result also matches provider.ErrTruncated.
func (s *Stream) ReadError(ctx context.Context, err error) error {
	err = s.Err(err)
	if ctx.Err() != nil || errors.Is(err, sse.ErrTooLarge) || errors.Is(err, ErrResponseTooLarge) {
		return err
	}
	return fmt.Errorf("%w: %w", provider.ErrTruncated, err)
}

// Close ends the request, stops the timers and releases the connection. It
// is safe to call more than once.
func (s *Stream) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.cancel(errClosed)
	err := s.body.Close()
	if s.reqCancel != nil {
		s.reqCancel()
	}
	return err
}
