package llmemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// errorJSON decodes either protocol's error body into (type, code, message).
func errorJSON(t *testing.T, p Protocol, body []byte) (typ, code, msg string) {
	t.Helper()
	if p == Anthropic {
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Type != "error" {
			t.Fatalf("not an Anthropic error body (%v): %s", err, body)
		}
		return e.Error.Type, "", e.Error.Message
	}
	var e struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil {
		t.Fatalf("not an OpenAI error body (%v): %s", err, body)
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	return e.Error.Type, code, e.Error.Message
}

func TestHTTPErrors(t *testing.T) {
	type want struct {
		status    int
		typ, code string
	}
	tests := []struct {
		name   string
		opts   Options
		mutate func(*http.Request)
		body   func(Protocol) []byte
		want   map[Protocol]want
	}{
		{
			name:   "missing key",
			mutate: func(r *http.Request) { r.Header.Del("Authorization"); r.Header.Del("X-Api-Key") },
			want: map[Protocol]want{
				OpenAI:    {401, "invalid_request_error", "invalid_api_key"},
				Anthropic: {401, "authentication_error", ""},
			},
		},
		{
			name: "wrong key",
			mutate: func(r *http.Request) {
				r.Header.Set("Authorization", "Bearer nope")
				r.Header.Set("X-Api-Key", "nope")
			},
			want: map[Protocol]want{
				OpenAI:    {401, "invalid_request_error", "invalid_api_key"},
				Anthropic: {401, "authentication_error", ""},
			},
		},
		{
			name: "not JSON",
			body: func(Protocol) []byte { return []byte("{nope") },
			want: map[Protocol]want{
				OpenAI:    {400, "invalid_request_error", ""},
				Anthropic: {400, "invalid_request_error", ""},
			},
		},
		{
			name: "no model",
			body: func(p Protocol) []byte { return requestBody(p, "hi", map[string]any{"model": nil}) },
			want: map[Protocol]want{
				OpenAI:    {400, "invalid_request_error", ""},
				Anthropic: {400, "invalid_request_error", ""},
			},
		},
		{
			name: "not streaming",
			body: func(p Protocol) []byte { return requestBody(p, "hi", map[string]any{"stream": false}) },
			want: map[Protocol]want{
				OpenAI:    {400, "invalid_request_error", ""},
				Anthropic: {400, "invalid_request_error", ""},
			},
		},
		{
			name: "anthropic without max_tokens",
			body: func(p Protocol) []byte { return requestBody(p, "hi", map[string]any{"max_tokens": nil}) },
			want: map[Protocol]want{
				OpenAI:    {200, "", ""},
				Anthropic: {400, "invalid_request_error", ""},
			},
		},
		{
			name:   "anthropic without anthropic-version",
			mutate: func(r *http.Request) { r.Header.Del("Anthropic-Version") },
			want: map[Protocol]want{
				OpenAI:    {200, "", ""},
				Anthropic: {400, "invalid_request_error", ""},
			},
		},
		{
			name: "context window exceeded",
			opts: Options{ContextWindow: 10},
			body: func(p Protocol) []byte { return requestBody(p, strings.Repeat("long ", 100), nil) },
			want: map[Protocol]want{
				OpenAI:    {400, "invalid_request_error", "context_length_exceeded"},
				Anthropic: {400, "invalid_request_error", ""},
			},
		},
	}
	for _, tt := range tests {
		for _, p := range protocols {
			t.Run(tt.name+"/"+string(p), func(t *testing.T) {
				s := newServer(t, tt.opts)
				body := requestBody(p, "hi", nil)
				if tt.body != nil {
					body = tt.body(p)
				}
				req := newRequest(t.Context(), t, s, p, body)
				if tt.mutate != nil {
					tt.mutate(req)
				}
				resp, err := newClient(t).Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				w := tt.want[p]
				if resp.StatusCode != w.status {
					t.Fatalf("status %d, want %d: %s", resp.StatusCode, w.status, raw)
				}
				if w.status != 200 {
					typ, code, msg := errorJSON(t, p, raw)
					if typ != w.typ || code != w.code || msg == "" {
						t.Errorf("error (%q, %q, %q), want (%q, %q, non-empty)", typ, code, msg, w.typ, w.code)
					}
					if strings.Contains(string(raw), testKey) {
						t.Errorf("error body echoes the key: %s", raw)
					}
				}
				reqs := s.Requests()
				if len(reqs) != 1 || reqs[0].Status != w.status {
					t.Errorf("recorded %+v, want one request with status %d", reqs, w.status)
				}
			})
		}
	}
}

func TestRoutes(t *testing.T) {
	s := newServer(t, Options{})
	c := newClient(t)
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodPost, "/v1/nope", 404},
		{http.MethodGet, "/v1/chat/completions", 405},
		{http.MethodPost, "/chat/completions", 200}, // DeepSeek-style base URL without /v1
	} {
		body := strings.NewReader(string(requestBody(OpenAI, "hi", nil)))
		req, _ := http.NewRequestWithContext(t.Context(), tc.method, s.URL()+tc.path, body)
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
	}
}

func TestCountTokens(t *testing.T) {
	s := newServer(t, Options{})
	body := requestBody(Anthropic, "count me", map[string]any{"stream": nil, "max_tokens": nil})
	req := newRequest(t.Context(), t, s, Anthropic, body)
	req.URL.Path = "/v1/messages/count_tokens"
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.InputTokens != (len(body)+3)/4 {
		t.Errorf("count_tokens: %+v, %v; want %d", got, err, (len(body)+3)/4)
	}
}

func TestFailNext(t *testing.T) {
	tests := []struct {
		name      string
		p         Protocol
		e         ErrorReply
		typ, code string
		header    map[string]string
	}{
		{"openai 429 retry-after", OpenAI, ErrorReply{Status: 429, RetryAfter: 1500 * time.Millisecond}, "requests", "rate_limit_exceeded",
			map[string]string{"Retry-After": "2", "Retry-After-Ms": "1500"}},
		{"openai 500", OpenAI, ErrorReply{Status: 500, Header: http.Header{"X-Should-Retry": {"true"}}}, "server_error", "",
			map[string]string{"X-Should-Retry": "true"}},
		{"anthropic 529", Anthropic, ErrorReply{Status: 529}, "overloaded_error", "", nil},
		{"anthropic 429", Anthropic, ErrorReply{Status: 429, RetryAfter: time.Second}, "rate_limit_error", "",
			map[string]string{"Retry-After": "1"}},
		{"openrouter body verbatim", OpenAI, ErrorReply{Status: 429, Body: `{"error":{"message":"Rate limit exceeded","code":429}}`}, "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, Options{})
			c := newClient(t)
			s.Enqueue(Reply{Text: "after the storm"})
			s.FailNext(2, tt.e)
			for i := range 2 {
				resp := post(t.Context(), t, c, s, tt.p, requestBody(tt.p, "hi", nil))
				raw, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != tt.e.Status {
					t.Fatalf("request %d: status %d, want %d", i, resp.StatusCode, tt.e.Status)
				}
				if tt.e.Body != "" {
					if string(raw) != tt.e.Body {
						t.Errorf("body %s, want verbatim %s", raw, tt.e.Body)
					}
				} else if typ, code, _ := errorJSON(t, tt.p, raw); typ != tt.typ || code != tt.code {
					t.Errorf("error (%q, %q), want (%q, %q)", typ, code, tt.typ, tt.code)
				}
				for k, v := range tt.header {
					if got := resp.Header.Get(k); got != v {
						t.Errorf("header %s = %q, want %q", k, got, v)
					}
				}
			}
			if s.Pending() != 1 {
				t.Errorf("faults consumed the queue: pending %d", s.Pending())
			}
			resp := post(t.Context(), t, c, s, tt.p, requestBody(tt.p, "hi", nil))
			evs, err := readAllEvents(t, resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if got := reassemble(t, tt.p, evs); got.Text != "after the storm" || !got.Done {
				t.Errorf("third request: %+v", got)
			}
		})
	}
}

// TestCutStreams covers mid-stream errors, truncation and connection
// resets after N deltas.
func TestCutStreams(t *testing.T) {
	const text = "one two three four five six"
	tests := []struct {
		name    string
		reply   Reply
		errType map[Protocol]string
		deltas  int
		readErr bool
	}{
		{"mid-stream error", Reply{Text: text, CutAfter: 3, Error: &ErrorReply{MidStream: true}}, map[Protocol]string{OpenAI: "server_error", Anthropic: "overloaded_error"}, 3, false},
		{"mid-stream error with type", Reply{Text: text, CutAfter: 1, Error: &ErrorReply{MidStream: true, Type: "api_error"}}, map[Protocol]string{OpenAI: "api_error", Anthropic: "api_error"}, 1, false},
		{"mid-stream error before any delta", Reply{Text: text, Error: &ErrorReply{MidStream: true}}, map[Protocol]string{OpenAI: "server_error", Anthropic: "overloaded_error"}, 0, false},
		{"truncate", Reply{Text: text, CutAfter: 2, Truncate: true}, nil, 2, false},
		{"truncate after everything", Reply{Text: text, CutAfter: 100, Truncate: true}, nil, 6, false},
		{"abort", Reply{Text: text, CutAfter: 4, Abort: true}, nil, 4, true},
	}
	for _, tt := range tests {
		for _, p := range protocols {
			t.Run(tt.name+"/"+string(p), func(t *testing.T) {
				s := newServer(t, Options{})
				s.Enqueue(tt.reply)
				resp := post(t.Context(), t, newClient(t), s, p, requestBody(p, "hi", nil))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d", resp.StatusCode)
				}
				evs, err := readAllEvents(t, resp.Body)
				if (err != nil) != tt.readErr {
					t.Fatalf("read error %v, want error: %v", err, tt.readErr)
				}
				got := reassemble(t, p, evs)
				if got.Done || got.Stop != "" {
					t.Errorf("cut stream has terminal marker %v or stop %q", got.Done, got.Stop)
				}
				if got.Deltas != tt.deltas || !strings.HasPrefix(text, got.Text) {
					t.Errorf("got %d deltas %q, want %d", got.Deltas, got.Text, tt.deltas)
				}
				if got.ErrType != tt.errType[p] {
					t.Errorf("error type %q, want %q", got.ErrType, tt.errType[p])
				}
			})
		}
	}
}

// TestQueueResponderDefault checks the order of decision: queue first,
// then the responder, which sees the recorded request.
func TestQueueResponderDefault(t *testing.T) {
	s := newServer(t, Options{})
	c := newClient(t)
	s.Enqueue(Reply{Text: "first"}, Reply{Text: "second"})
	// A typical responder: call a tool unless the last message is its result.
	s.SetResponder(func(req Recorded) Reply {
		if last := req.LastMessage(); last.Role == "tool" {
			return Reply{Text: "the tool said " + last.Text}
		}
		return Reply{ToolCalls: []ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"q":"x"}`}}}
	})
	texts := func(body []byte) result {
		resp := post(t.Context(), t, c, s, OpenAI, body)
		evs, err := readAllEvents(t, resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return reassemble(t, OpenAI, evs)
	}
	for _, want := range []string{"first", "second"} {
		if got := texts(requestBody(OpenAI, "hi", nil)); got.Text != want {
			t.Errorf("queued reply %q, want %q", got.Text, want)
		}
	}
	if got := texts(requestBody(OpenAI, "hi", nil)); len(got.Calls) != 1 || got.Calls[0].Name != "lookup" {
		t.Errorf("responder reply %+v, want a lookup call", got)
	}
	followUp := requestBody(OpenAI, "", map[string]any{"messages": []any{
		map[string]any{"role": "user", "content": "hi"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": "call_1", "type": "function", "function": map[string]any{"name": "lookup", "arguments": `{"q":"x"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "42"},
	}})
	if got := texts(followUp); got.Text != "the tool said 42" {
		t.Errorf("responder after tool result: %q", got.Text)
	}
	s.SetResponder(nil)
	if got := texts(requestBody(OpenAI, "back to default", nil)); got.Text != AnswerFor("back to default") {
		t.Errorf("default reply %q", got.Text)
	}
}

// TestHold parks a stream mid-way, checks the counters, then releases it;
// a second stream parked the same way ends when its client goes away.
func TestHold(t *testing.T) {
	for _, p := range protocols {
		t.Run(string(p), func(t *testing.T) {
			s := newServer(t, Options{})
			c := newClient(t)
			release := s.Hold(2)
			s.Enqueue(Reply{Text: "alpha beta gamma delta epsilon"})
			resp := post(t.Context(), t, c, s, p, requestBody(p, "hi", nil))
			r := newSSEReader(resp.Body)
			var evs []sseEvent
			for reassemble(t, p, evs).Deltas < 2 {
				ev, err := r.next()
				if err != nil {
					t.Fatal(err)
				}
				evs = append(evs, ev)
			}
			if err := s.WaitHeld(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			if s.InFlight() != 1 || s.Held() != 1 {
				t.Errorf("in flight %d, held %d; want 1, 1", s.InFlight(), s.Held())
			}
			release()
			release() // idempotent
			rest, err := readAllEvents(t, resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if got := reassemble(t, p, append(evs, rest...)); got.Text != "alpha beta gamma delta epsilon" || !got.Done {
				t.Errorf("after release: %+v", got)
			}

			// The client of a parked stream goes away (a killed bot).
			s.Hold(0)
			ctx, cancel := context.WithCancel(t.Context())
			resp = post(ctx, t, c, s, p, requestBody(p, "hi", nil))
			if err := s.WaitHeld(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			cancel()
			resp.Body.Close()
			if err := s.WaitInFlight(t.Context(), 0); err != nil {
				t.Fatal(err)
			}
			if s.Held() != 0 {
				t.Errorf("held %d after the client left", s.Held())
			}
		})
	}
}

// TestCloseEndsParkedStreams checks that Close does not wait for a
// release: parked streams end without their terminal marker.
func TestCloseEndsParkedStreams(t *testing.T) {
	s := New(Options{})
	c := newClient(t)
	s.Hold(1)
	resp := post(t.Context(), t, c, s, OpenAI, requestBody(OpenAI, "hi", nil))
	if err := s.WaitHeld(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s.Close()
	evs, _ := readAllEvents(t, resp.Body)
	if got := reassemble(t, OpenAI, evs); got.Done {
		t.Errorf("a stream cut by Close ended with [DONE]")
	}
	if err := s.WaitHeld(t.Context(), 5); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitHeld after Close: %v, want ErrClosed", err)
	}
}

// TestDelayAndClientGone checks Reply.Delay and that a client giving up
// during the delay frees the handler.
func TestDelayAndClientGone(t *testing.T) {
	s := newServer(t, Options{})
	c := newClient(t)
	s.Enqueue(Reply{Text: "late", Delay: time.Millisecond}, Reply{Text: "never", Delay: time.Hour})
	resp := post(t.Context(), t, c, s, Anthropic, requestBody(Anthropic, "hi", nil))
	evs, err := readAllEvents(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := reassemble(t, Anthropic, evs); got.Text != "late" {
		t.Errorf("delayed reply %q", got.Text)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		resp, err := c.Do(newRequest(ctx, t, s, Anthropic, requestBody(Anthropic, "hi", nil)))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	if err := s.WaitInFlight(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("request during a 1h delay succeeded")
	}
	if err := s.WaitInFlight(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
}

// TestPacing checks that with a token interval the deltas still arrive in
// order, spaced by at least the interval (a lower bound, which timers
// guarantee), and that SetTokenInterval applies to a running stream.
func TestPacing(t *testing.T) {
	const interval = 3 * time.Millisecond
	text := "a b c d e f g h i j"
	for _, p := range protocols {
		t.Run(string(p), func(t *testing.T) {
			s := newServer(t, Options{TokenInterval: interval})
			s.Enqueue(Reply{Text: text}, Reply{Text: text})
			c := newClient(t)

			resp := post(t.Context(), t, c, s, p, requestBody(p, "hi", nil))
			r := newSSEReader(resp.Body)
			var evs []sseEvent
			var stamps []time.Time
			for {
				ev, err := r.next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				before := reassemble(t, p, evs).Deltas
				evs = append(evs, ev)
				if reassemble(t, p, evs).Deltas > before {
					stamps = append(stamps, time.Now())
				}
			}
			got := reassemble(t, p, evs)
			if got.Text != text || len(stamps) != len(Tokens(text)) {
				t.Fatalf("paced stream: %q in %d deltas", got.Text, len(stamps))
			}
			if elapsed := stamps[len(stamps)-1].Sub(stamps[0]); elapsed < time.Duration(len(stamps)-1)*interval {
				t.Errorf("%d deltas in %v, want at least %v apart", len(stamps), elapsed, interval)
			}

			// Change the pace mid-stream: the stream still completes in order.
			release := s.Hold(1)
			resp = post(t.Context(), t, c, s, p, requestBody(p, "hi", nil))
			if err := s.WaitHeld(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			s.SetTokenInterval(0)
			release()
			evs, err := readAllEvents(t, resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if got := reassemble(t, p, evs); got.Text != text || !got.Done {
				t.Errorf("after SetTokenInterval: %+v", got)
			}
		})
	}
}

// TestConcurrentStreams runs 50 paced streams at once, half per protocol,
// each with its own user text, and checks every answer and the recording.
func TestConcurrentStreams(t *testing.T) {
	const n = 50
	s := newServer(t, Options{TokenInterval: time.Millisecond})
	c := newClient(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		p := protocols[i%2]
		user := fmt.Sprintf("thread %d asks", i)
		req := newRequest(t.Context(), t, s, p, requestBody(p, user, nil))
		wg.Go(func() {
			resp, err := c.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			evs, err := readAllEvents(t, resp.Body)
			if err != nil {
				errs <- err
				return
			}
			if got := reassemble(t, p, evs); got.Text != AnswerFor(user) || !got.Done {
				errs <- fmt.Errorf("%s %q: got %q done=%v", p, user, got.Text, got.Done)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	reqs := s.Requests()
	seen := map[string]bool{}
	for i, r := range reqs {
		if r.Seq != i+1 || r.Status != 200 {
			t.Errorf("request %d: seq %d status %d", i, r.Seq, r.Status)
		}
		seen[r.LastUserText()] = true
	}
	if len(reqs) != n || len(seen) != n {
		t.Errorf("recorded %d requests with %d distinct texts, want %d", len(reqs), len(seen), n)
	}
	if err := s.WaitInFlight(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
}

func TestWaitRequests(t *testing.T) {
	s := newServer(t, Options{})
	c := newClient(t)
	req := newRequest(t.Context(), t, s, OpenAI, requestBody(OpenAI, "ping", nil))
	done := make(chan struct{})
	defer func() { <-done }()
	go func() {
		defer close(done)
		resp, err := c.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	reqs, err := s.WaitRequests(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("ping", reqs[0].LastUserText()); diff != "" {
		t.Error(diff)
	}
	if err := s.WaitInFlight(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.WaitRequests(ctx, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitRequests with a cancelled ctx: %v", err)
	}
}
