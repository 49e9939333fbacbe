package openai

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/importcheck"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/transport"
	"github.com/google/go-cmp/cmp"
)

func TestImports(t *testing.T) {
	importcheck.Forbid(t, ".",
		importcheck.Module+"/agent", importcheck.Module+"/bot", importcheck.Module+"/session", importcheck.Module+"/mcp",
		importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}

const testKey = "sk-test-9f8e7d6c5b4a3210"

// sseServer serves body as an event stream, flushing after every line, and
// records the request bodies.
type sseServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	hdrs   []http.Header
}

func serveSSE(t *testing.T, body string) *sseServer {
	t.Helper()
	s := &sseServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		s.hdrs = append(s.hdrs, r.Header.Clone())
		s.mu.Unlock()
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		br := bufio.NewReader(strings.NewReader(body))
		for {
			line, err := br.ReadString('\n')
			io.WriteString(w, line)
			f.Flush()
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newTestClient(url string, o Options) *Client {
	o.BaseURL = url + "/v1"
	if o.APIKey == "" {
		o.APIKey = testKey
	}
	return New(o)
}

// collect runs one Stream and returns its events and final error.
func collect(t *testing.T, c *Client, req provider.Request) ([]provider.Event, error) {
	t.Helper()
	var evs []provider.Event
	for ev, err := range c.Stream(t.Context(), req) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// coalesce merges runs of same-type deltas so golden sequences stay short;
// it returns the merged events and the number of delta events.
func coalesce(evs []provider.Event) ([]provider.Event, int) {
	var out []provider.Event
	n := 0
	for _, e := range evs {
		if e.Type == provider.EventTextDelta || e.Type == provider.EventReasoningDelta {
			n++
			if l := len(out); l > 0 && out[l-1].Type == e.Type {
				out[l-1].Text += e.Text
				continue
			}
		}
		out = append(out, e)
	}
	return out, n
}

func text(s string) provider.Event { return provider.Event{Type: provider.EventTextDelta, Text: s} }
func reasoning(s string) provider.Event {
	return provider.Event{Type: provider.EventReasoningDelta, Text: s}
}
func call(id, name, args string) provider.Event {
	return provider.Event{Type: provider.EventToolCall, ToolCall: provider.ToolCall{ID: id, Name: name, Arguments: args}}
}

func TestFixtures(t *testing.T) {
	weather := provider.ToolCall{ID: "call_JMW1whyEaYG438VE1OIflxA2", Name: "GetWeatherArgs", Arguments: `{"city": "Edinburgh", "country": "GB", "units": "c"}`}
	stock := provider.ToolCall{ID: "call_DNYTawLBoN8fj3KN6qU9N1Ou", Name: "get_stock_price", Arguments: `{"ticker": "AAPL", "exchange": "NASDAQ"}`}
	dsCall := provider.ToolCall{ID: "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", Name: "weather", Arguments: `{"location": "San Francisco"}`}
	dsReasoning := `The user is asking for the weather in San Francisco. I need to use the weather tool to get this information. Let me invoke the weather tool with the location parameter set to "San Francisco".`
	refusal := "I'm sorry, I can't assist with that request."
	tests := []struct {
		file   string
		want   []provider.Event
		deltas int
	}{
		{
			file: "openai-gpt4o-parallel-tool-calls-usage.sse",
			want: []provider.Event{
				{Type: provider.EventToolCall, ToolCall: weather},
				{Type: provider.EventToolCall, ToolCall: stock},
				{Type: provider.EventDone, StopReason: provider.StopToolUse, RawStopReason: "tool_calls",
					Message: &provider.Message{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{weather, stock}},
					Usage:   provider.Usage{InputTokens: 149, OutputTokens: 60, Known: true}},
			},
		},
		{
			file:   "deepseek-reasoner-reasoning-content-tool-call.sse",
			deltas: 39,
			want: []provider.Event{
				reasoning(dsReasoning),
				{Type: provider.EventToolCall, ToolCall: dsCall},
				{Type: provider.EventDone, StopReason: provider.StopToolUse, RawStopReason: "tool_calls",
					Message: &provider.Message{Role: provider.RoleAssistant, Reasoning: []provider.Reasoning{{Text: dsReasoning}}, ToolCalls: []provider.ToolCall{dsCall}},
					Usage:   provider.Usage{InputTokens: 339, OutputTokens: 83, CacheReadTokens: 320, Known: true}},
			},
		},
		{
			file:   "openai-gpt4o-refusal.sse",
			deltas: 10,
			want: []provider.Event{
				text(refusal),
				{Type: provider.EventDone, StopReason: provider.StopEndTurn, RawStopReason: "stop",
					Message: &provider.Message{Role: provider.RoleAssistant, Content: refusal},
					Usage:   provider.Usage{InputTokens: 79, OutputTokens: 11, Known: true}},
			},
		},
		{
			file:   "openai-gpt4o-finish-length.sse",
			deltas: 1,
			want: []provider.Event{
				text(`{"`),
				{Type: provider.EventDone, StopReason: provider.StopMaxTokens, RawStopReason: "length",
					Message: &provider.Message{Role: provider.RoleAssistant, Content: `{"`},
					Usage:   provider.Usage{InputTokens: 79, OutputTokens: 1, Known: true}},
			},
		},
		{
			file:   "openrouter-processing-comment-usage-after-finish.sse",
			deltas: 1,
			want: []provider.Event{
				text("test response"),
				{Type: provider.EventDone, StopReason: provider.StopEndTurn, RawStopReason: "stop",
					Message: &provider.Message{Role: provider.RoleAssistant, Content: "test response"},
					Usage:   provider.Usage{InputTokens: 586, OutputTokens: 3, Known: true}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv := serveSSE(t, fixture(t, tt.file))
			evs, err := collect(t, newTestClient(srv.URL, Options{}), provider.Request{Model: "m"})
			if err != nil {
				t.Fatalf("Stream(%s): %v", tt.file, err)
			}
			got, n := coalesce(evs)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events of %s (-want +got):\n%s", tt.file, diff)
			}
			if n != tt.deltas {
				t.Errorf("%s: %d delta events, want %d", tt.file, n, tt.deltas)
			}
		})
	}
}

// chunkLine builds one data line with the given choice delta JSON.
func chunkLine(delta, finish string) string {
	if finish == "" {
		finish = "null"
	} else {
		finish = `"` + finish + `"`
	}
	return `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + "}]}\n\n"
}

const done = "data: [DONE]\n\n"

func TestQuirks(t *testing.T) {
	doneEv := func(stop provider.StopReason, raw string, msg provider.Message, u provider.Usage) provider.Event {
		msg.Role = provider.RoleAssistant
		return provider.Event{Type: provider.EventDone, StopReason: stop, RawStopReason: raw, Message: &msg, Usage: u}
	}
	a := provider.ToolCall{ID: "call_a", Name: "alpha", Arguments: `{"x":1}`}
	b := provider.ToolCall{ID: "call_b", Name: "beta", Arguments: `{"y":2}`}
	tests := []struct {
		name string
		body string
		want []provider.Event
	}{
		{
			name: "ollama same index new id, finish stop",
			body: chunkLine(`{"role":"assistant","content":"","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"alpha","arguments":"{\"x\":1}"}}]}`, "") +
				chunkLine(`{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"beta","arguments":"{\"y\":2}"}}]}`, "") +
				chunkLine(`{}`, "stop") + done,
			want: []provider.Event{call("call_a", "alpha", `{"x":1}`), call("call_b", "beta", `{"y":2}`),
				doneEv(provider.StopToolUse, "stop", provider.Message{ToolCalls: []provider.ToolCall{a, b}}, provider.Usage{})},
		},
		{
			name: "missing index: position in the array, fragments merged",
			body: chunkLine(`{"tool_calls":[{"id":"call_a","function":{"name":"alpha","arguments":"{\"x\""}},{"id":"call_b","function":{"name":"beta","arguments":""}}]}`, "") +
				chunkLine(`{"tool_calls":[{"function":{"arguments":":1}"}},{"function":{"arguments":"{\"y\":2}"}}]}`, "") +
				chunkLine(`{}`, "tool_calls") + done,
			want: []provider.Event{call("call_a", "alpha", `{"x":1}`), call("call_b", "beta", `{"y":2}`),
				doneEv(provider.StopToolUse, "tool_calls", provider.Message{ToolCalls: []provider.ToolCall{a, b}}, provider.Usage{})},
		},
		{
			name: "no id and no arguments",
			body: chunkLine(`{"tool_calls":[{"index":0,"function":{"name":"now"}}]}`, "tool_calls") + done,
			want: []provider.Event{call("call_0", "now", `{}`),
				doneEv(provider.StopToolUse, "tool_calls", provider.Message{ToolCalls: []provider.ToolCall{{ID: "call_0", Name: "now", Arguments: "{}"}}}, provider.Usage{})},
		},
		{
			name: "length with tool calls: none runnable",
			body: chunkLine(`{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"alpha","arguments":"{\"x\":"}}]}`, "length") + done,
			want: []provider.Event{doneEv(provider.StopMaxTokens, "length", provider.Message{}, provider.Usage{})},
		},
		{
			name: "content_filter",
			body: chunkLine(`{"content":"Hi"}`, "") + chunkLine(`{}`, "content_filter") + done,
			want: []provider.Event{text("Hi"), doneEv(provider.StopOther, "content_filter", provider.Message{Content: "Hi"}, provider.Usage{})},
		},
		{
			name: "usage on choices null, OpenRouter cache write",
			body: chunkLine(`{"content":"ok"}`, "stop") +
				`data: {"choices":null,"usage":{"prompt_tokens":1000,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":600,"cache_write_tokens":300}}}` + "\n\n" + done,
			want: []provider.Event{text("ok"), doneEv(provider.StopEndTurn, "stop", provider.Message{Content: "ok"},
				provider.Usage{InputTokens: 1000, OutputTokens: 5, CacheReadTokens: 600, CacheWriteTokens: 300, Known: true})},
		},
		{
			name: "deepseek cache hit tokens only",
			body: `data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":2,"prompt_cache_hit_tokens":32,"prompt_cache_miss_tokens":18}}` + "\n\n" + done,
			want: []provider.Event{text("ok"), doneEv(provider.StopEndTurn, "stop", provider.Message{Content: "ok"},
				provider.Usage{InputTokens: 50, OutputTokens: 2, CacheReadTokens: 32, Known: true})},
		},
		{
			name: "reasoning field, and both fields sent once",
			body: chunkLine(`{"reasoning":"think "}`, "") + chunkLine(`{"reasoning":"more","reasoning_content":"more"}`, "") +
				chunkLine(`{"content":"answer"}`, "stop") + done,
			want: []provider.Event{reasoning("think "), reasoning("more"), text("answer"),
				doneEv(provider.StopEndTurn, "stop", provider.Message{Content: "answer", Reasoning: []provider.Reasoning{{Text: "think more"}}}, provider.Usage{})},
		},
		{
			name: "CRLF and keep-alive comments",
			body: strings.ReplaceAll(": keep-alive\n\n"+chunkLine(`{"content":"a"}`, "")+": keep-alive\n\n"+chunkLine(`{"content":"b"}`, "stop")+done, "\n", "\r\n"),
			want: []provider.Event{text("a"), text("b"), doneEv(provider.StopEndTurn, "stop", provider.Message{Content: "ab"}, provider.Usage{})},
		},
		{
			name: `"error":null is not an error`,
			body: `data: {"choices":[{"index":0,"delta":{"content":"fine"},"finish_reason":"stop"}],"error":null}` + "\n\n" + done,
			want: []provider.Event{text("fine"), doneEv(provider.StopEndTurn, "stop", provider.Message{Content: "fine"}, provider.Usage{})},
		},
		{
			name: "EOF after finish without [DONE] is lenient",
			body: chunkLine(`{"content":"a"}`, "stop"),
			want: []provider.Event{text("a"), doneEv(provider.StopEndTurn, "stop", provider.Message{Content: "a"}, provider.Usage{})},
		},
		{
			name: "[DONE] without finish reason",
			body: chunkLine(`{"content":"a"}`, "") + done,
			want: []provider.Event{text("a"), doneEv(provider.StopOther, "", provider.Message{Content: "a"}, provider.Usage{})},
		},
		{
			name: "other choices ignored",
			body: `data: {"choices":[{"index":1,"delta":{"content":"no"},"finish_reason":null},{"index":0,"delta":{"content":"yes"},"finish_reason":"stop"}]}` + "\n\n" + done,
			want: []provider.Event{text("yes"), doneEv(provider.StopEndTurn, "stop", provider.Message{Content: "yes"}, provider.Usage{})},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serveSSE(t, tt.body)
			got, err := collect(t, newTestClient(srv.URL, Options{}), provider.Request{Model: "m"})
			if err != nil {
				t.Fatalf("Stream: %v\nbody:\n%s", err, tt.body)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s\nbody:\n%s", diff, tt.body)
			}
		})
	}
}

func TestStreamErrors(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantText  []provider.Event // events before the error
		wantAPI   *provider.APIError
		truncated bool
	}{
		{
			name:     "bare error object",
			body:     chunkLine(`{"content":"par"}`, "") + `data: {"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}` + "\n\n",
			wantText: []provider.Event{text("par")},
			wantAPI:  &provider.APIError{Provider: "openai", Type: "server_error", Message: "The server had an error", Retryable: true},
		},
		{
			name:     "openrouter error chunk with finish_reason error",
			body:     chunkLine(`{"content":"par"}`, "") + `data: {"id":"gen-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}],"error":{"code":502,"message":"Provider returned error"}}` + "\n\n" + done,
			wantText: []provider.Event{text("par")},
			wantAPI:  &provider.APIError{Provider: "openai", Code: "502", Message: "Provider returned error", Retryable: true},
		},
		{
			name:    "old vLLM object error",
			body:    `data: {"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}` + "\n\n",
			wantAPI: &provider.APIError{Provider: "openai", Type: "BadRequestError", Code: "400", Message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.", ContextLength: true},
		},
		{
			name:      "truncated without finish",
			body:      chunkLine(`{"content":"half"}`, ""),
			wantText:  []provider.Event{text("half")},
			truncated: true,
		},
		{
			name: "more tool calls than the decoder keeps",
			body: func() string {
				var b strings.Builder
				for i := range maxCalls + 1 {
					b.WriteString(chunkLine(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"c%d","function":{"name":"f","arguments":"{}"}}]}`, i, i), ""))
				}
				return b.String() + done
			}(),
		},
		{
			name:      "empty body",
			body:      "",
			truncated: true,
		},
		{
			name:      "only comments",
			body:      ": OPENROUTER PROCESSING\n\n",
			truncated: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serveSSE(t, tt.body)
			got, err := collect(t, newTestClient(srv.URL, Options{}), provider.Request{Model: "m"})
			if err == nil {
				t.Fatalf("Stream succeeded with %v, want an error", got)
			}
			if diff := cmp.Diff(tt.wantText, got); diff != "" {
				t.Errorf("events before the error (-want +got):\n%s", diff)
			}
			if tt.truncated != errors.Is(err, provider.ErrTruncated) {
				t.Errorf("errors.Is(%v, ErrTruncated) = %v, want %v", err, !tt.truncated, tt.truncated)
			}
			if tt.wantAPI != nil {
				var ae *provider.APIError
				if !errors.As(err, &ae) {
					t.Fatalf("error %v is not an APIError", err)
				}
				if diff := cmp.Diff(tt.wantAPI, ae); diff != "" {
					t.Errorf("APIError (-want +got):\n%s", diff)
				}
				if ae.ContextLength != errors.Is(err, provider.ErrContextLength) {
					t.Errorf("errors.Is(ErrContextLength) disagrees with ContextLength")
				}
			}
		})
	}
}

// errServer answers every request with status, headers and body.
func errServer(t *testing.T, status int, hdr map[string]string, body string) (*httptest.Server, *int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		attempts int
		want     *provider.APIError
	}{
		{
			name: "openrouter 429 numeric code", status: 429, body: fixture(t, "openrouter-http-429-error.json"), attempts: 3,
			want: &provider.APIError{Provider: "openai", Status: 429, Code: "429", Retryable: true,
				Message: "Rate limit exceeded: limit_rpm/meta-llama/llama-3.2-3b-instruct/e8440b11-29fb-4887-a222-eff9ba33dfbf. High demand for meta-llama/llama-3.2-3b-instruct:free on OpenRouter - limited to 1 requests per minute. Please retry shortly."},
		},
		{
			name: "context length", status: 400, attempts: 1,
			body: `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			want: &provider.APIError{Provider: "openai", Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Param: "messages", ContextLength: true,
				Message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens."},
		},
		{
			name: "deepseek missing reasoning_content", status: 400, attempts: 1,
			body: `{"error":{"message":"Missing ` + "`reasoning_content`" + ` field in the assistant message at message index 2.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
			want: &provider.APIError{Provider: "openai", Status: 400, Type: "invalid_request_error", Code: "invalid_request_error",
				Message: "Missing `reasoning_content` field in the assistant message at message index 2."},
		},
		{
			name: "ollama string error", status: 404, attempts: 1,
			body: `{"error":"model \"llama9\" not found, try pulling it first"}`,
			want: &provider.APIError{Provider: "openai", Status: 404, Message: `model "llama9" not found, try pulling it first`},
		},
		{
			name: "key echoed back is scrubbed", status: 401, attempts: 1,
			body: `{"error":{"message":"Incorrect API key provided: ` + testKey + `.","type":"invalid_request_error","code":"invalid_api_key"}}`,
			want: &provider.APIError{Provider: "openai", Status: 401, Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided: [redacted]."},
		},
		{
			name: "503 retried to the limit", status: 503, attempts: 3, body: `upstream unavailable`,
			want: &provider.APIError{Provider: "openai", Status: 503, Retryable: true, Message: "upstream unavailable"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, n := errServer(t, tt.status, map[string]string{"Retry-After-Ms": "1"}, tt.body)
			_, err := collect(t, newTestClient(srv.URL, Options{}), provider.Request{Model: "m"})
			var ae *provider.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error = %v, want APIError", err)
			}
			tt.want.RetryAfter = time.Millisecond
			if diff := cmp.Diff(tt.want, ae); diff != "" {
				t.Errorf("APIError (-want +got):\n%s", diff)
			}
			if *n != tt.attempts {
				t.Errorf("requests = %d, want %d", *n, tt.attempts)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error contains the API key: %v", err)
			}
			if tt.want.ContextLength && !errors.Is(err, provider.ErrContextLength) {
				t.Errorf("errors.Is(%v, ErrContextLength) = false", err)
			}
		})
	}
}

func TestRetryBeforeFirstByte(t *testing.T) {
	var mu sync.Mutex
	n := 0
	body := chunkLine(`{"content":"hi"}`, "stop") + done
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After-Ms", "1")
			w.WriteHeader(529)
			return
		}
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	evs, err := collect(t, newTestClient(srv.URL, Options{}), provider.Request{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Text != "hi" {
		t.Errorf("events = %+v", evs)
	}
}

func TestIdleTimeoutCommentsOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, chunkLine(`{"content":"a"}`, ""))
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
				io.WriteString(w, ": keep-alive\n\n")
				w.(http.Flusher).Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	c := newTestClient(srv.URL, Options{ClientOptions: provider.ClientOptions{IdleTimeout: 100 * time.Millisecond, RequestTimeout: 20 * time.Second}})
	evs, err := collect(t, c, provider.Request{Model: "m"})
	if !errors.Is(err, transport.ErrIdleTimeout) || !errors.Is(err, provider.ErrTruncated) {
		t.Fatalf("error = %v, want idle timeout and ErrTruncated", err)
	}
	if diff := cmp.Diff([]provider.Event{text("a")}, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestBreakCancelsRequest(t *testing.T) {
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(gone)
		for {
			io.WriteString(w, chunkLine(`{"content":"x"}`, ""))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
	}))
	t.Cleanup(srv.Close)
	c := newTestClient(srv.URL, Options{})
	for ev, err := range c.Stream(t.Context(), provider.Request{Model: "m"}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Text != "x" {
			t.Fatalf("event %+v", ev)
		}
		break
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the server still streams after the consumer broke out")
	}
}

func TestCallerCancel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, chunkLine(`{"content":"x"}`, ""))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := newTestClient(srv.URL, Options{})
	var err error
	for ev, e := range c.Stream(ctx, provider.Request{Model: "m"}) {
		if e != nil {
			err = e
			break
		}
		if ev.Type == provider.EventTextDelta {
			cancel()
		}
	}
	if !errors.Is(err, context.Canceled) || errors.Is(err, provider.ErrTruncated) {
		t.Fatalf("error = %v, want context.Canceled and not ErrTruncated", err)
	}
}

func TestAuthHeaderAndURL(t *testing.T) {
	srv := serveSSE(t, chunkLine(`{"content":"a"}`, "stop")+done)
	c := New(Options{ClientOptions: provider.ClientOptions{BaseURL: srv.URL + "/v1/", APIKey: testKey, Headers: map[string]string{"HTTP-Referer": "https://bobbin.example"}}})
	if _, err := collect(t, c, provider.Request{Model: "m"}); err != nil {
		t.Fatal(err)
	}
	h := srv.hdrs[0]
	if got := h.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
	if got := h.Get("Http-Referer"); got != "https://bobbin.example" {
		t.Errorf("extra header = %q", got)
	}
	// A keyless local server gets no Authorization header.
	c = New(Options{ClientOptions: provider.ClientOptions{BaseURL: srv.URL + "/v1"}})
	if _, err := collect(t, c, provider.Request{Model: "m"}); err != nil {
		t.Fatal(err)
	}
	if got := srv.hdrs[1].Get("Authorization"); got != "" {
		t.Errorf("Authorization without a key = %q", got)
	}
	if !bytes.Contains(srv.bodies[0], []byte(`"stream":true`)) {
		t.Errorf("body lacks stream:true: %s", srv.bodies[0])
	}
}

func TestJSONInsteadOfStream(t *testing.T) {
	srv, _ := errServer(t, 200, map[string]string{"Content-Type": "application/json"}, `{"error":{"message":"model overloaded","type":"server_error"}}`)
	_, err := collect(t, newTestClient(srv.URL, Options{}), provider.Request{Model: "m"})
	var ae *provider.APIError
	if !errors.As(err, &ae) || ae.Message != "model overloaded" || !ae.Retryable {
		t.Fatalf("error = %v, want the retryable APIError from the JSON body", err)
	}
	srv, _ = errServer(t, 200, map[string]string{"Content-Type": "application/json"}, `{"choices":[]}`)
	if _, err := collect(t, newTestClient(srv.URL, Options{}), provider.Request{Model: "m"}); !errors.Is(err, provider.ErrTruncated) {
		t.Fatalf("error = %v, want ErrTruncated", err)
	}
}
