package llmemu

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

const testKey = "sk-test-0123456789"

// newServer starts a Server closed at the end of the test.
func newServer(t *testing.T, opts Options) *Server {
	t.Helper()
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	s := New(opts)
	t.Cleanup(s.Close)
	return s
}

// newClient returns an http.Client whose idle connections are closed at the
// end of the test (goleak).
func newClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// sseEvent is one server-sent event as a client sees it.
type sseEvent struct {
	Event string
	Data  string
}

// sseReader is a minimal SSE reader: event:/data: fields, blank-line
// separated, comments skipped.
type sseReader struct{ r *bufio.Reader }

func newSSEReader(r io.Reader) *sseReader { return &sseReader{bufio.NewReader(r)} }

// next returns the next event, io.EOF at a clean end of body, or the read
// error.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data []string
	seen := false
	for {
		line, err := s.r.ReadString('\n')
		if err != nil && line == "" {
			if seen {
				ev.Data = strings.Join(data, "\n")
				return ev, nil
			}
			return ev, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if seen {
				ev.Data = strings.Join(data, "\n")
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			ev.Event, seen = strings.TrimPrefix(strings.TrimPrefix(line, "event:"), " "), true
		case strings.HasPrefix(line, "data:"):
			data, seen = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")), true
		}
	}
}

func readAllEvents(t *testing.T, body io.Reader) ([]sseEvent, error) {
	t.Helper()
	r := newSSEReader(body)
	var evs []sseEvent
	for {
		ev, err := r.next()
		if errors.Is(err, io.EOF) {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// request builds a request body of the protocol with one user message.
func requestBody(p Protocol, user string, extra map[string]any) []byte {
	body := map[string]any{"model": "test-model", "stream": true}
	if p == Anthropic {
		body["max_tokens"] = 1024
		body["messages"] = []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": user}}}}
	} else {
		body["stream_options"] = map[string]any{"include_usage": true}
		body["messages"] = []any{
			map[string]any{"role": "system", "content": "You are a test."},
			map[string]any{"role": "user", "content": user},
		}
	}
	for k, v := range extra {
		if v == nil {
			delete(body, k)
		} else {
			body[k] = v
		}
	}
	b, _ := json.Marshal(body)
	return b
}

// post sends body to the protocol's endpoint with the test key.
func post(ctx context.Context, t *testing.T, c *http.Client, s *Server, p Protocol, body []byte) *http.Response {
	t.Helper()
	req := newRequest(ctx, t, s, p, body)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", req.URL, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func newRequest(ctx context.Context, t testing.TB, s *Server, p Protocol, body []byte) *http.Request {
	t.Helper()
	url := s.URL() + "/v1/chat/completions"
	if p == Anthropic {
		url = s.URL() + "/v1/messages"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if p == Anthropic {
		req.Header.Set("X-Api-Key", testKey)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+testKey)
	}
	return req
}

// result is a stream reassembled by a client, protocol-neutral.
type result struct {
	Text      string
	Reasoning string
	Signature string
	Calls     []ToolCall
	Stop      string
	Usage     *Usage
	Deltas    int    // text, reasoning and argument deltas seen
	Done      bool   // [DONE] / message_stop seen last
	ErrType   string // mid-stream error type
	Pings     int
}

// reassemble decodes events of p into a result, failing the test on any
// event that is not valid JSON of the expected shape.
func reassemble(t *testing.T, p Protocol, evs []sseEvent) result {
	t.Helper()
	if p == Anthropic {
		return reassembleAnthropic(t, evs)
	}
	return reassembleOpenAI(t, evs)
}

type oaTestChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role             string  `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func reassembleOpenAI(t *testing.T, evs []sseEvent) result {
	t.Helper()
	var res result
	calls := map[int]*ToolCall{}
	for i, ev := range evs {
		if res.Done {
			t.Fatalf("event %d after [DONE]: %q", i, ev.Data)
		}
		if ev.Event != "" {
			t.Errorf("event %d: OpenAI streams have no event: lines, got %q", i, ev.Event)
		}
		if ev.Data == "[DONE]" {
			res.Done = true
			continue
		}
		var c oaTestChunk
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			t.Fatalf("event %d is not JSON: %v: %q", i, err, ev.Data)
		}
		if c.Error != nil {
			res.ErrType = c.Error.Type
			continue
		}
		var keys map[string]json.RawMessage
		_ = json.Unmarshal([]byte(ev.Data), &keys)
		for _, k := range []string{"id", "object", "created", "model", "choices"} {
			if _, ok := keys[k]; !ok {
				t.Errorf("chunk %d lacks %q: %s", i, k, ev.Data)
			}
		}
		if c.Object != "chat.completion.chunk" || c.ID == "" || c.Created == 0 || c.Model != "test-model" {
			t.Errorf("chunk %d header: %s", i, ev.Data)
		}
		if c.Usage != nil {
			res.Usage = &Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens, CachedTokens: c.Usage.PromptTokensDetails.CachedTokens}
			if c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
				t.Errorf("usage total: %s", ev.Data)
			}
		}
		for _, ch := range c.Choices {
			d := ch.Delta
			if d.Content != nil && *d.Content != "" {
				res.Text += *d.Content
				res.Deltas++
			}
			if d.ReasoningContent != nil {
				res.Reasoning += *d.ReasoningContent
				res.Deltas++
			}
			for _, tc := range d.ToolCalls {
				call := calls[tc.Index]
				if call == nil {
					if tc.ID == "" || tc.Type != "function" || tc.Function.Name == "" {
						t.Errorf("first fragment of call %d lacks id/type/name: %s", tc.Index, ev.Data)
					}
					call = &ToolCall{ID: tc.ID, Name: tc.Function.Name}
					calls[tc.Index] = call
				}
				res.Deltas++
				call.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				res.Stop = *ch.FinishReason
			}
		}
	}
	for i := range len(calls) {
		if calls[i] == nil {
			t.Fatalf("tool call indexes not dense: %v", calls)
		}
		res.Calls = append(res.Calls, *calls[i])
	}
	return res
}

func reassembleAnthropic(t *testing.T, evs []sseEvent) result {
	t.Helper()
	var res result
	type block struct {
		typ  string
		call *ToolCall
	}
	blocks := map[int]*block{}
	open := -1
	for i, ev := range evs {
		if res.Done {
			t.Fatalf("event %d after message_stop: %q", i, ev.Data)
		}
		var e struct {
			Type         string `json:"type"`
			Index        int    `json:"index"`
			ContentBlock struct {
				Type  string          `json:"type"`
				ID    string          `json:"id"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			} `json:"content_block"`
			Delta struct {
				Type        string  `json:"type"`
				Text        string  `json:"text"`
				Thinking    string  `json:"thinking"`
				Signature   string  `json:"signature"`
				PartialJSON *string `json:"partial_json"`
				StopReason  string  `json:"stop_reason"`
			} `json:"delta"`
			Message struct {
				Model string `json:"model"`
				Usage struct {
					InputTokens          int `json:"input_tokens"`
					CacheReadInputTokens int `json:"cache_read_input_tokens"`
					CacheCreation        int `json:"cache_creation_input_tokens"`
				} `json:"usage"`
			} `json:"message"`
			Usage struct {
				InputTokens          int `json:"input_tokens"`
				CacheReadInputTokens int `json:"cache_read_input_tokens"`
				CacheCreation        int `json:"cache_creation_input_tokens"`
				OutputTokens         int `json:"output_tokens"`
			} `json:"usage"`
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			t.Fatalf("event %d is not JSON: %v: %q", i, err, ev.Data)
		}
		if ev.Event != e.Type {
			t.Errorf("event %d: event: %q but type %q", i, ev.Event, e.Type)
		}
		if i == 0 && e.Type != "message_start" {
			t.Errorf("first event is %q, want message_start", e.Type)
		}
		switch e.Type {
		case "message_start":
			if e.Message.Model != "test-model" {
				t.Errorf("message_start model: %s", ev.Data)
			}
			u := e.Message.Usage
			res.Usage = &Usage{InputTokens: u.InputTokens + u.CacheReadInputTokens + u.CacheCreation, CachedTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreation}
		case "ping":
			res.Pings++
		case "content_block_start":
			if open != -1 || e.Index != len(blocks) {
				t.Errorf("content_block_start %d while %d open, %d seen", e.Index, open, len(blocks))
			}
			open = e.Index
			b := &block{typ: e.ContentBlock.Type}
			if b.typ == "tool_use" {
				if string(e.ContentBlock.Input) != "{}" {
					t.Errorf("tool_use starts with input %s, want {}", e.ContentBlock.Input)
				}
				b.call = &ToolCall{ID: e.ContentBlock.ID, Name: e.ContentBlock.Name}
			}
			blocks[e.Index] = b
		case "content_block_delta":
			b := blocks[e.Index]
			if b == nil || e.Index != open {
				t.Fatalf("delta for block %d, open %d", e.Index, open)
			}
			switch e.Delta.Type {
			case "text_delta":
				res.Text += e.Delta.Text
				res.Deltas++
			case "thinking_delta":
				res.Reasoning += e.Delta.Thinking
				res.Deltas++
			case "signature_delta":
				res.Signature = e.Delta.Signature
			case "input_json_delta":
				if e.Delta.PartialJSON == nil || b.call == nil {
					t.Fatalf("bad input_json_delta: %s", ev.Data)
				}
				b.call.Arguments += *e.Delta.PartialJSON
				res.Deltas++
			default:
				t.Errorf("unknown delta %q", e.Delta.Type)
			}
		case "content_block_stop":
			if e.Index != open {
				t.Errorf("content_block_stop %d, open %d", e.Index, open)
			}
			open = -1
		case "message_delta":
			res.Stop = e.Delta.StopReason
			if res.Usage == nil {
				t.Fatal("message_delta before message_start")
			}
			res.Usage.OutputTokens = e.Usage.OutputTokens
		case "message_stop":
			res.Done = true
		case "error":
			res.ErrType = e.Error.Type
		default:
			t.Errorf("unknown event type %q", e.Type)
		}
	}
	for i := range len(blocks) {
		if b := blocks[i]; b.call != nil {
			if b.call.Arguments == "" {
				b.call.Arguments = "{}"
			}
			res.Calls = append(res.Calls, *b.call)
		}
	}
	return res
}
