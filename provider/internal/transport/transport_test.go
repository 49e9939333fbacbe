package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/importcheck"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/google/go-cmp/cmp"
)

func TestImports(t *testing.T) {
	importcheck.Forbid(t, ".",
		importcheck.Module+"/agent", importcheck.Module+"/bot", importcheck.Module+"/session", importcheck.Module+"/mcp",
		importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}

const testKey = "sk-test-0123456789abcdef"

// sleeps records backoff waits instead of sleeping.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return context.Cause(ctx)
}

func (s *sleeps) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

func decodeErr(status int, body []byte) *provider.APIError {
	var v struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	return &provider.APIError{Type: v.Error.Type, Message: v.Error.Message}
}

func newClient(t *testing.T, o provider.ClientOptions, sl *sleeps) *Client {
	t.Helper()
	o.APIKey = testKey
	c := New(Config{Provider: "test", Options: o, DecodeError: decodeErr, Sleep: sl.sleep, Jitter: func() float64 { return 0 }})
	t.Cleanup(c.hc.CloseIdleConnections)
	return c
}

// reply is one scripted response.
type reply struct {
	status int
	header map[string]string
	body   string
}

// script serves replies in order (the last one repeats) and counts requests.
func script(t *testing.T, replies ...reply) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		if i >= len(replies) {
			i = len(replies) - 1
		}
		rp := replies[i]
		for k, v := range rp.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rp.status)
		io.WriteString(w, rp.body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestRetries(t *testing.T) {
	date := time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)
	ok := reply{status: 200, body: "data: {}\n\n"}
	e500 := reply{status: 500, body: `{"error":{"message":"boom","type":"server_error"}}`}
	tests := []struct {
		name       string
		replies    []reply
		attempts   int // MaxAttempts option
		wantCalls  int32
		wantSleeps []time.Duration
		wantErr    bool
		wantStatus int
		wantRetry  bool // APIError.Retryable
	}{
		{name: "ok first time", replies: []reply{ok}, wantCalls: 1},
		{name: "500 then ok", replies: []reply{e500, ok}, wantCalls: 2, wantSleeps: []time.Duration{500 * time.Millisecond}},
		{name: "exhausted", replies: []reply{e500}, wantCalls: 3, wantSleeps: []time.Duration{500 * time.Millisecond, time.Second}, wantErr: true, wantStatus: 500, wantRetry: true},
		{name: "max attempts 5", replies: []reply{e500}, attempts: 5, wantCalls: 5, wantSleeps: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}, wantErr: true, wantStatus: 500, wantRetry: true},
		{name: "408 409 529 retried", replies: []reply{{status: 408}, {status: 409}, {status: 529}, ok}, attempts: 4, wantCalls: 4, wantSleeps: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}},
		{name: "400 not retried", replies: []reply{{status: 400, body: `{"error":{"message":"bad","type":"invalid_request_error"}}`}, ok}, wantCalls: 1, wantErr: true, wantStatus: 400},
		{name: "401 not retried", replies: []reply{{status: 401}, ok}, wantCalls: 1, wantErr: true, wantStatus: 401},
		{name: "Retry-After-Ms", replies: []reply{{status: 429, header: map[string]string{"Retry-After-Ms": "20", "Retry-After": "9"}}, ok}, wantCalls: 2, wantSleeps: []time.Duration{20 * time.Millisecond}},
		{name: "Retry-After seconds", replies: []reply{{status: 429, header: map[string]string{"Retry-After": "2"}}, ok}, wantCalls: 2, wantSleeps: []time.Duration{2 * time.Second}},
		{name: "Retry-After too long", replies: []reply{{status: 429, header: map[string]string{"Retry-After": "3600"}}, ok}, wantCalls: 1, wantErr: true, wantStatus: 429, wantRetry: true},
		{name: "x-should-retry false", replies: []reply{{status: 503, header: map[string]string{"x-should-retry": "false"}}, ok}, wantCalls: 1, wantErr: true, wantStatus: 503},
		{name: "x-should-retry true", replies: []reply{{status: 400, header: map[string]string{"x-should-retry": "true"}}, ok}, wantCalls: 2, wantSleeps: []time.Duration{500 * time.Millisecond}},
		{name: "Retry-After date", replies: []reply{{status: 503, header: map[string]string{"Retry-After": date}}, ok}, wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, calls := script(t, tt.replies...)
			var sl sleeps
			c := newClient(t, provider.ClientOptions{MaxAttempts: tt.attempts}, &sl)
			s, err := c.Post(t.Context(), srv.URL, nil, []byte(`{}`))
			if got := calls.Load(); got != tt.wantCalls {
				t.Errorf("requests = %d, want %d", got, tt.wantCalls)
			}
			if tt.name == "Retry-After date" {
				// An HTTP date is relative to now: between 1 and 3 s.
				if d := sl.got(); len(d) != 1 || d[0] < time.Second || d[0] > 3*time.Second {
					t.Errorf("sleeps = %v, want one wait of 1-3 s", d)
				}
			} else if diff := cmp.Diff(tt.wantSleeps, sl.got()); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Post: %v", err)
				}
				if s.Attempts != int(tt.wantCalls) {
					t.Errorf("Attempts = %d, want %d", s.Attempts, tt.wantCalls)
				}
				s.Close()
				return
			}
			var ae *provider.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error = %v, want *provider.APIError", err)
			}
			if ae.Status != tt.wantStatus || ae.Retryable != tt.wantRetry || ae.Provider != "test" {
				t.Errorf("APIError = %+v, want status %d retryable %v", ae, tt.wantStatus, tt.wantRetry)
			}
		})
	}
}

func TestBackoffJitter(t *testing.T) {
	c := New(Config{Jitter: func() float64 { return 0.999 }})
	for n, base := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second} {
		d := c.delay(n, errors.New("x"))
		if d > base || d < base*3/4 {
			t.Errorf("delay(%d) = %v, want within [%v, %v]", n, d, base*3/4, base)
		}
	}
}

func TestAPIErrorFields(t *testing.T) {
	srv, _ := script(t, reply{status: 400, header: map[string]string{"Retry-After": "1"}, body: `{"error":{"message":"key ` + testKey + ` is bad","type":"invalid_request_error"}}`})
	c := newClient(t, provider.ClientOptions{}, &sleeps{})
	_, err := c.Post(t.Context(), srv.URL, nil, nil)
	var ae *provider.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v", err)
	}
	want := &provider.APIError{Provider: "test", Status: 400, Type: "invalid_request_error", Message: "key [redacted] is bad", RetryAfter: time.Second}
	if diff := cmp.Diff(want, ae); diff != "" {
		t.Errorf("APIError (-want +got):\n%s", diff)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error text contains the API key: %v", err)
	}
}

func TestUnstructuredErrorBody(t *testing.T) {
	srv, _ := script(t, reply{status: 404, body: "<html>" + strings.Repeat("x", 2*MaxErrorBody) + "</html>"})
	c := newClient(t, provider.ClientOptions{}, &sleeps{})
	_, err := c.Post(t.Context(), srv.URL, nil, nil)
	var ae *provider.APIError
	if !errors.As(err, &ae) || ae.Status != 404 || len(ae.Message) > 600 {
		t.Fatalf("error = %v, want a short 404 APIError", err)
	}
}

func TestHeadersAndBody(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	var hdr http.Header
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		hdr = r.Header.Clone()
		mu.Unlock()
		if n.Add(1) == 1 {
			w.WriteHeader(502)
			return
		}
		w.WriteHeader(200)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, provider.ClientOptions{Headers: map[string]string{"X-Title": "bobbin", "Accept": "application/x-ndjson"}}, &sleeps{})
	s, err := c.Post(t.Context(), srv.URL, http.Header{"authorization": {"Bearer " + testKey}}, []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{`{"a":1}`, `{"a":1}`}, bodies); diff != "" {
		t.Errorf("bodies (-want +got):\n%s", diff)
	}
	for k, want := range map[string]string{"Authorization": "Bearer " + testKey, "Content-Type": "application/json", "X-Title": "bobbin", "Accept": "application/x-ndjson"} {
		if got := hdr.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
}

func TestNetworkErrorRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	var sl sleeps
	c := newClient(t, provider.ClientOptions{}, &sl)
	_, err = c.Post(t.Context(), "http://"+addr+"/v1?key="+testKey, nil, nil)
	if err == nil {
		t.Fatal("Post to a closed port succeeded")
	}
	if len(sl.got()) != 2 {
		t.Errorf("sleeps = %v, want 2 (3 attempts)", sl.got())
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error text contains the API key: %v", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) {
		t.Errorf("scrubbed error lost its chain: %v", err)
	}
}

// hang is a handler that never answers until the client goes away.
func hang(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

func TestFirstByteTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(hang))
	t.Cleanup(srv.Close)
	var sl sleeps
	c := newClient(t, provider.ClientOptions{FirstByteTimeout: 20 * time.Millisecond, MaxAttempts: 2}, &sl)
	_, err := c.Post(t.Context(), srv.URL, nil, nil)
	if !errors.Is(err, ErrFirstByteTimeout) {
		t.Fatalf("error = %v, want ErrFirstByteTimeout", err)
	}
	if len(sl.got()) != 1 {
		t.Errorf("sleeps = %v, want one retry", sl.got())
	}
}

func TestRequestTimeoutBeforeHeaders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(hang))
	t.Cleanup(srv.Close)
	c := newClient(t, provider.ClientOptions{RequestTimeout: 20 * time.Millisecond}, &sleeps{})
	_, err := c.Post(t.Context(), srv.URL, nil, nil)
	if !errors.Is(err, ErrRequestTimeout) {
		t.Fatalf("error = %v, want ErrRequestTimeout", err)
	}
}

// cancelAfter cancels a context as soon as a response arrives.
type cancelAfter struct {
	rt     http.RoundTripper
	cancel context.CancelFunc
}

func (c cancelAfter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	c.cancel()
	return resp, err
}

func TestBackoffRespectsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	srv, calls := script(t, reply{status: 503, header: map[string]string{"Retry-After": "30"}})
	hc := &http.Client{Transport: cancelAfter{rt: http.DefaultTransport, cancel: cancel}}
	// The real sleep: it must return at once because ctx is cancelled.
	c := New(Config{Provider: "test", Options: provider.ClientOptions{APIKey: testKey, HTTPClient: hc}})
	_, err := c.Post(ctx, srv.URL, nil, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	var ae *provider.APIError
	if !errors.As(err, &ae) || ae.Status != 503 {
		t.Errorf("error %v does not carry the 503", err)
	}
	if calls.Load() != 1 {
		t.Errorf("requests = %d, want 1", calls.Load())
	}
}

// ticker streams n lines (data or comment) at a small interval, then holds
// the connection open until the client leaves.
func ticker(n int, line string, every time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for i := 0; i < n; i++ {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(every):
			}
			io.WriteString(w, line)
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	}
}

// readLines reads s line by line, touching on data lines, until an error.
func readLines(s *Stream, touch bool) (int, error) {
	buf := make([]byte, 1024)
	lines := 0
	for {
		n, err := s.Read(buf)
		if n > 0 && touch {
			s.Touch()
		}
		lines += strings.Count(string(buf[:n]), "\n")
		if err != nil {
			return lines, err
		}
	}
}

func TestIdleTimeout(t *testing.T) {
	tests := []struct {
		name  string
		lines int
		line  string
		touch bool
		idle  time.Duration
	}{
		// Bytes keep flowing (comments, never touched) far past the idle
		// timeout: only Touch counts as progress.
		{"comments do not reset", 1 << 30, ": keep-alive\n", false, 100 * time.Millisecond},
		// Touched data keeps the stream alive; then silence ends it.
		{"data resets, then silence", 20, "data: {}\n", true, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(ticker(tt.lines, tt.line, 2*time.Millisecond))
			t.Cleanup(srv.Close)
			// The overall timeout only turns a failure into an error
			// instead of a hang.
			c := newClient(t, provider.ClientOptions{IdleTimeout: tt.idle, RequestTimeout: 20 * time.Second}, &sleeps{})
			s, err := c.Post(t.Context(), srv.URL, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			lines, err := readLines(s, tt.touch)
			if !errors.Is(err, ErrIdleTimeout) {
				t.Fatalf("read error = %v, want ErrIdleTimeout", err)
			}
			if tt.touch && lines != tt.lines {
				t.Errorf("read %d data lines before the idle timeout, want all %d", lines, tt.lines)
			}
		})
	}
}

func TestRequestTimeoutMidStream(t *testing.T) {
	srv := httptest.NewServer(ticker(1<<30, "data: {}\n", time.Millisecond))
	t.Cleanup(srv.Close)
	c := newClient(t, provider.ClientOptions{RequestTimeout: 100 * time.Millisecond}, &sleeps{})
	s, err := c.Post(t.Context(), srv.URL, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := readLines(s, true); !errors.Is(err, ErrRequestTimeout) {
		t.Fatalf("read error = %v, want ErrRequestTimeout", err)
	}
}

func TestCancelMidStream(t *testing.T) {
	srv := httptest.NewServer(ticker(1<<30, "data: {}\n", time.Millisecond))
	t.Cleanup(srv.Close)
	c := newClient(t, provider.ClientOptions{}, &sleeps{})
	ctx, cancel := context.WithCancelCause(t.Context())
	s, err := c.Post(ctx, srv.URL, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stop := errors.New("stop button")
	buf := make([]byte, 64)
	if _, err := s.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel(stop)
	if _, err := readLines(s, true); !errors.Is(err, stop) {
		t.Fatalf("read error = %v, want the cancel cause", err)
	}
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	s.Close() // idempotent
}

func TestRetryAfterParse(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{http.Header{}, 0, false},
		{http.Header{"Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond, true},
		{http.Header{"Retry-After-Ms": {"2.5"}}, 2500 * time.Microsecond, true},
		{http.Header{"Retry-After": {"7"}}, 7 * time.Second, true},
		{http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second, true},
		{http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, 0, true},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{"Retry-After": {"-3"}}, 0, false},
		{http.Header{"Retry-After": {"NaN"}}, 0, false},
		// Absurd values are capped instead of overflowing into a negative
		// duration.
		{http.Header{"Retry-After": {"1e300"}}, 24 * time.Hour, true},
		{http.Header{"Retry-After": {"Inf"}}, 24 * time.Hour, true},
		{http.Header{"Retry-After-Ms": {"9e18"}}, 24 * time.Hour, true},
		{http.Header{"Retry-After": {now.AddDate(5, 0, 0).Format(http.TimeFormat)}}, 24 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.h), func(t *testing.T) {
			d, ok := RetryAfter(tt.h, now)
			if d != tt.want || ok != tt.ok {
				t.Errorf("RetryAfter(%v) = %v, %v; want %v, %v", tt.h, d, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestScrub(t *testing.T) {
	c := New(Config{Options: provider.ClientOptions{APIKey: testKey}})
	base := errors.New("dial with " + testKey + " failed")
	err := c.Scrub(fmt.Errorf("wrapped: %w", base))
	if strings.Contains(err.Error(), testKey) || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("Scrub = %q", err)
	}
	if !errors.Is(err, base) {
		t.Errorf("Scrub broke the error chain")
	}
	plain := errors.New("no key here")
	if c.Scrub(plain) != plain {
		t.Errorf("Scrub changed an error without the key")
	}
}

func TestShorten(t *testing.T) {
	long := "  " + strings.Repeat("a", 511) + "é" + strings.Repeat("b", 100)
	got := Shorten(long)
	if want := strings.Repeat("a", 511) + "…"; got != want {
		t.Errorf("Shorten(%d bytes) = %q…, want the 511 a's and an ellipsis (cut before the split rune)", len(long), got[:20])
	}
	if got := Shorten(" short \n"); got != "short" {
		t.Errorf("Shorten(%q) = %q, want %q", " short \n", got, "short")
	}
}

// TestResponseSizeCap: an endless body ends with ErrResponseTooLarge once it
// passes the cap, whatever it contains.
func TestResponseSizeCap(t *testing.T) {
	srv := httptest.NewServer(ticker(1<<30, ": keep-alive\n", 0))
	t.Cleanup(srv.Close)
	const limit = 4 << 10
	c := New(Config{Provider: "test", MaxResponseBytes: limit})
	t.Cleanup(c.hc.CloseIdleConnections)
	s, err := c.Post(t.Context(), srv.URL, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n, err := io.Copy(io.Discard, s)
	if !errors.Is(err, ErrResponseTooLarge) {
		t.Fatalf("read %d bytes, error %v; want ErrResponseTooLarge", n, err)
	}
	if n <= limit || n > limit+64<<10 {
		t.Errorf("read %d bytes before the error, want just over %d", n, limit)
	}
	if err := s.ReadError(t.Context(), err); errors.Is(err, provider.ErrTruncated) {
		t.Errorf("ReadError(%v) matches ErrTruncated; a refused body is not a truncated one", err)
	}
}
