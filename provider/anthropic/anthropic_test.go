package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/transport"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testKey = "sk-ant-test-SECRET-0123456789"

// recorded is one request the fake endpoint received.
type recorded struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
}

// fakeAPI is an httptest server that answers each request with the next
// scripted handler (the last repeats) and records the requests.
type fakeAPI struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

func newFakeAPI(t *testing.T, handlers ...http.HandlerFunc) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		i := min(len(f.reqs), len(handlers)) - 1
		f.mu.Unlock()
		handlers[i](w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func (f *fakeAPI) client(o Options) *Client {
	o.BaseURL = f.srv.URL
	o.APIKey = testKey
	o.HTTPClient = f.srv.Client()
	return New(o)
}

// sseBody replays body as text/event-stream, flushing after every line.
func sseBody(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		for line := range strings.Lines(body) {
			if _, err := io.WriteString(w, line); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

func errorReply(status int, header map[string]string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// collect drains a stream.
func collect(seq func(func(provider.Event, error) bool)) ([]provider.Event, error) {
	var evs []provider.Event
	for ev, err := range seq {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

var hello = provider.Request{Model: "claude-test", Messages: []provider.Message{
	{Role: provider.RoleSystem, Content: "sys"},
	{Role: provider.RoleUser, Content: "hi"},
}}

func TestStreamFixtures(t *testing.T) {
	for _, tc := range fixtureGoldens {
		t.Run(tc.file, func(t *testing.T) {
			f := newFakeAPI(t, sseBody(readFixture(t, tc.file)))
			got, err := collect(f.client(Options{}).Stream(context.Background(), hello))
			if err != nil {
				t.Fatalf("stream %s: %v", tc.file, err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("events of %s (-want +got):\n%s", tc.file, d)
			}
		})
	}
}

func TestStreamRequest(t *testing.T) {
	f := newFakeAPI(t, sseBody(readFixture(t, "anthropic-tool-use.turn2.sse")))
	c := f.client(Options{ClientOptions: provider.ClientOptions{Headers: map[string]string{"X-Extra": "1"}}})
	if _, err := collect(c.Stream(context.Background(), hello)); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/v1/messages" {
		t.Errorf("request line = %s %s, want POST /v1/messages", r.Method, r.Path)
	}
	for k, want := range map[string]string{
		"X-Api-Key": testKey, "Anthropic-Version": "2023-06-01", "Content-Type": "application/json",
		"Accept": "text/event-stream", "X-Extra": "1",
	} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	want := map[string]any{
		"model": "claude-test", "max_tokens": 4096.0, "stream": true,
		"system":   []any{map[string]any{"type": "text", "text": "sys", "cache_control": map[string]any{"type": "ephemeral"}}},
		"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "hi", "cache_control": map[string]any{"type": "ephemeral"}}}}},
	}
	if d := cmp.Diff(want, r.Body); d != "" {
		t.Errorf("body (-want +got):\n%s", d)
	}
}

func TestStreamOptions(t *testing.T) {
	f := newFakeAPI(t, sseBody(readFixture(t, "anthropic-tool-use.turn2.sse")))
	off := false
	c := f.client(Options{Version: "2099-01-01", PromptCaching: &off, DefaultMaxTokens: 77})
	if _, err := collect(c.Stream(context.Background(), hello)); err != nil {
		t.Fatal(err)
	}
	r := f.requests()[0]
	if got := r.Header.Get("Anthropic-Version"); got != "2099-01-01" {
		t.Errorf("anthropic-version = %q", got)
	}
	if got := r.Body["max_tokens"]; got != 77.0 {
		t.Errorf("max_tokens = %v, want 77", got)
	}
	if got, _ := json.Marshal(r.Body["system"]); strings.Contains(string(got), "cache_control") {
		t.Errorf("system with caching off = %s", got)
	}
	if got, _ := json.Marshal(r.Body["messages"]); strings.Contains(string(got), "cache_control") {
		t.Errorf("messages with caching off = %s", got)
	}
}

func TestStreamHTTPErrors(t *testing.T) {
	ok := sseBody(readFixture(t, "anthropic-message-delta-input-tokens.sse"))
	tests := []struct {
		name     string
		handlers []http.HandlerFunc
		wantReqs int
		check    func(t *testing.T, evs []provider.Event, err error)
	}{{
		name: "529 overloaded then success",
		handlers: []http.HandlerFunc{
			errorReply(529, map[string]string{"Retry-After-Ms": "1"}, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			ok,
		},
		wantReqs: 2,
		check: func(t *testing.T, evs []provider.Event, err error) {
			if err != nil || len(evs) == 0 || evs[len(evs)-1].Type != provider.EventDone {
				t.Errorf("got %v, %v; want a complete stream after the retry", evs, err)
			}
		},
	}, {
		name: "429 three times gives up with RetryAfter",
		handlers: []http.HandlerFunc{
			errorReply(429, map[string]string{"Retry-After-Ms": "2"}, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`),
		},
		wantReqs: 3,
		check: func(t *testing.T, evs []provider.Event, err error) {
			var ae *provider.APIError
			if !errors.As(err, &ae) || !ae.Retryable || ae.Status != 429 || ae.RetryAfter != 2*time.Millisecond || ae.Type != "rate_limit_error" {
				t.Errorf("err = %#v, want retryable 429 rate_limit_error with RetryAfter 2ms", err)
			}
		},
	}, {
		name: "400 prompt too long is context length, not retried",
		handlers: []http.HandlerFunc{
			errorReply(400, nil, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`),
		},
		wantReqs: 1,
		check: func(t *testing.T, evs []provider.Event, err error) {
			if !errors.Is(err, provider.ErrContextLength) || provider.IsRetryable(err) {
				t.Errorf("err = %v, want ErrContextLength, not retryable", err)
			}
		},
	}, {
		name: "401 echoing the key never shows it",
		handlers: []http.HandlerFunc{
			errorReply(401, nil, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key `+testKey+`"}}`),
		},
		wantReqs: 1,
		check: func(t *testing.T, evs []provider.Event, err error) {
			if err == nil || strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), "SECRET") {
				t.Errorf("err = %v, want an error without the key", err)
			}
			var ae *provider.APIError
			if !errors.As(err, &ae) || strings.Contains(ae.Message, "SECRET") {
				t.Errorf("APIError = %#v leaks the key or is missing", ae)
			}
		},
	}, {
		name: "mid-stream overloaded error is not retried after events",
		handlers: []http.HandlerFunc{sseBody(`event: message_start
data: {"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}

event: error
data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}

`)},
		wantReqs: 1,
		check: func(t *testing.T, evs []provider.Event, err error) {
			if d := cmp.Diff([]provider.Event{text("Hel")}, evs); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			var ae *provider.APIError
			if !errors.As(err, &ae) || !ae.Retryable || ae.Status != 0 || ae.Type != "overloaded_error" {
				t.Errorf("err = %#v, want retryable overloaded_error with status 0", err)
			}
		},
	}, {
		name: "body cut before message_stop is truncated, partial text kept",
		handlers: []http.HandlerFunc{sseBody(func() string {
			s := readFixture(t, "anthropic-tool-use.turn1.sse")
			return s[:strings.Index(s, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1")]
		}())},
		wantReqs: 1,
		check: func(t *testing.T, evs []provider.Event, err error) {
			if !errors.Is(err, provider.ErrTruncated) {
				t.Errorf("err = %v, want ErrTruncated", err)
			}
			want := []provider.Event{text("I'll"), text(" get"), text(" the current weather in"), text(" San Francisco for you in"), text(" Fahrenheit.")}
			if d := cmp.Diff(want, evs); d != "" {
				t.Errorf("partial events (-want +got):\n%s", d)
			}
		},
	}, {
		name: "connection dropped mid-stream is truncated, partial text kept",
		handlers: []http.HandlerFunc{func(w http.ResponseWriter, r *http.Request) {
			sseBody(`event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hel"}}

`)(w, r)
			panic(http.ErrAbortHandler) // the server drops the connection mid-body
		}},
		wantReqs: 1,
		check: func(t *testing.T, evs []provider.Event, err error) {
			if !errors.Is(err, provider.ErrTruncated) {
				t.Errorf("err = %v, want ErrTruncated", err)
			}
			if d := cmp.Diff([]provider.Event{text("Hel")}, evs); d != "" {
				t.Errorf("partial events (-want +got):\n%s", d)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t, tc.handlers...)
			evs, err := collect(f.client(Options{}).Stream(context.Background(), hello))
			tc.check(t, evs, err)
			if n := len(f.requests()); n != tc.wantReqs {
				t.Errorf("got %d requests, want %d", n, tc.wantReqs)
			}
		})
	}
}

// TestStreamBreakCancels checks that leaving the loop early ends the request:
// the server sees its request context end.
func TestStreamBreakCancels(t *testing.T) {
	gone := make(chan struct{})
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"type\":\"message_start\",\"message\":{}}\n\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"first\"}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	})
	for ev, err := range f.client(Options{}).Stream(context.Background(), hello) {
		if err != nil || ev.Text != "first" {
			t.Fatalf("first pair = %v, %v", ev, err)
		}
		break
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("server request still open after breaking out of the loop")
	}
}

// TestStreamIdleTimeout: keep-alive comments do not keep a stalled stream
// alive.
func TestStreamIdleTimeout(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"type\":\"message_start\",\"message\":{}}\n\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"x\"}}\n\n")
		w.(http.Flusher).Flush()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				io.WriteString(w, ": keep-alive\n\n")
				w.(http.Flusher).Flush()
			}
		}
	})
	c := f.client(Options{ClientOptions: provider.ClientOptions{IdleTimeout: 50 * time.Millisecond}})
	evs, err := collect(c.Stream(context.Background(), hello))
	if d := cmp.Diff([]provider.Event{text("x")}, evs); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if !errors.Is(err, transport.ErrIdleTimeout) {
		t.Errorf("err = %v, want an idle timeout", err)
	}
}

func TestStreamContextCancelled(t *testing.T) {
	f := newFakeAPI(t, sseBody(readFixture(t, "anthropic-tool-use.turn2.sse")))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := collect(f.client(Options{}).Stream(ctx, hello))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}
