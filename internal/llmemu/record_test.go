package llmemu

import (
	"bytes"
	"net/http"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestRecordAnthropic(t *testing.T) {
	// A real follow-up request (testdata/SOURCES.md) plus a system prompt
	// as cacheable blocks, a thinking block and an error result.
	body, err := os.ReadFile("testdata/anthropic-tool-use.turn2.request.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		body []byte
		want []Message
	}{
		{
			name: "recorded turn 2",
			body: body,
			want: []Message{
				{Role: "user", Text: "Weather in SF in fahrenheit?"},
				{Role: "assistant", Text: "I'll get the current weather in San Francisco for you in Fahrenheit.",
					ToolCalls: []ToolCall{{ID: "toolu_01RaX2WYWRWCbaeFHssmGJXG", Name: "get_weather", Arguments: `{"city":"San Francisco","units":"fahrenheit"}`}}},
				{Role: "tool", ToolCallID: "toolu_01RaX2WYWRWCbaeFHssmGJXG", Text: "The weather in San Francisco is 68 degrees fahrenheit."},
			},
		},
		{
			name: "system blocks, thinking, error result with text",
			body: []byte(`{"model":"m","max_tokens":10,"stream":true,
				"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
				"messages":[
				 {"role":"user","content":"hi"},
				 {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"c2ln"},{"type":"tool_use","id":"t1","name":"x","input":{}}]},
				 {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"boom","is_error":true},{"type":"text","text":"[summary] earlier talk"}]}
				]}`),
			want: []Message{
				{Role: "system", Text: "Be brief."},
				{Role: "user", Text: "hi"},
				{Role: "assistant", Reasoning: "hmm", ToolCalls: []ToolCall{{ID: "t1", Name: "x", Arguments: "{}"}}},
				{Role: "tool", ToolCallID: "t1", Text: "boom", IsError: true},
				{Role: "user", Text: "[summary] earlier talk"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, Options{})
			req := newRequest(t.Context(), t, s, Anthropic, tt.body)
			req.Header.Set("X-Custom", "kept")
			resp, err := newClient(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			reqs := s.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests recorded", len(reqs))
			}
			r := reqs[0]
			if diff := cmp.Diff(tt.want, r.Messages); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if r.Protocol != Anthropic || r.Method != "POST" || r.Path != "/v1/messages" || !bytes.Equal(r.Body, tt.body) || r.JSON == nil || !r.Stream {
				t.Errorf("recorded %s %s %s stream=%v json=%v", r.Protocol, r.Method, r.Path, r.Stream, r.JSON != nil)
			}
			if got := r.Header.Get("X-Api-Key"); got != "[redacted]" {
				t.Errorf("x-api-key recorded as %q", got)
			}
			if r.Header.Get("X-Custom") != "kept" || r.Header.Get("Anthropic-Version") != "2023-06-01" {
				t.Errorf("headers not kept: %v", r.Header)
			}
		})
	}
	t.Run("tools and max_tokens", func(t *testing.T) {
		s := newServer(t, Options{})
		resp := post(t.Context(), t, newClient(t), s, Anthropic, body)
		resp.Body.Close()
		r := s.Requests()[0]
		if diff := cmp.Diff([]string{"get_weather"}, r.Tools); diff != "" || r.MaxTokens != 512 || r.Model != "claude-3-7-sonnet-latest" {
			t.Errorf("tools %v (diff %s), max_tokens %d, model %q", r.Tools, diff, r.MaxTokens, r.Model)
		}
	})
}

func TestRecordOpenAI(t *testing.T) {
	body := []byte(`{"model":"deepseek-chat","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":99,
		"messages":[
		 {"role":"system","content":"You are Bobbin."},
		 {"role":"user","content":[{"type":"text","text":"look"},{"type":"text","text":"up"}]},
		 {"role":"assistant","content":null,"reasoning_content":"need a tool","tool_calls":[{"id":"call_a","type":"function","function":{"name":"search","arguments":"{\"q\":\"go\"}"}}]},
		 {"role":"tool","tool_call_id":"call_a","content":"found"},
		 {"role":"system","content":"summary of earlier turns"}
		],
		"tools":[{"type":"function","function":{"name":"search","parameters":{}}},{"type":"function","function":{"name":"fetch"}}]}`)
	s := newServer(t, Options{})
	resp := post(t.Context(), t, newClient(t), s, OpenAI, body)
	resp.Body.Close()
	r := s.Requests()[0]
	want := []Message{
		{Role: "system", Text: "You are Bobbin."},
		{Role: "user", Text: "look\nup"},
		{Role: "assistant", Reasoning: "need a tool", ToolCalls: []ToolCall{{ID: "call_a", Name: "search", Arguments: `{"q":"go"}`}}},
		{Role: "tool", ToolCallID: "call_a", Text: "found"},
		{Role: "system", Text: "summary of earlier turns"},
	}
	if diff := cmp.Diff(want, r.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"search", "fetch"}, r.Tools); diff != "" {
		t.Errorf("tools: %s", diff)
	}
	if r.MaxTokens != 99 || !r.IncludeUsage || r.Model != "deepseek-chat" || r.LastUserText() != "look\nup" {
		t.Errorf("max %d include_usage %v model %q last user %q", r.MaxTokens, r.IncludeUsage, r.Model, r.LastUserText())
	}
	if got := r.Header.Get("Authorization"); got != "[redacted]" {
		t.Errorf("Authorization recorded as %q", got)
	}
	if strings.Contains(string(r.Header.Get("Authorization")), testKey) {
		t.Error("key recorded")
	}
}

func TestTokens(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello, world!", []string{"Hello,", " world!"}},
		{"internationalization", []string{"inte", "rnat", "iona", "liza", "tion"}},
		{"日本語のテキストです", []string{"日本語の", "テキストです"}},
		{"a\n\n        b", []string{"a", "\n\n        ", "b"}},
		{"  x  ", []string{"  x", "  "}},
		{"emoji 👋🏽 ok", []string{"emoji", " 👋🏽", " ok"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Tokens(tt.in)); diff != "" {
			t.Errorf("Tokens(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// FuzzTokens checks that deltas and argument fragments are never empty,
// never split a UTF-8 sequence of valid input, and concatenate back.
func FuzzTokens(f *testing.F) {
	for _, s := range []string{"", "Hello, world!", "日本語のテキストです", "a\n\n        b", `{"city": "Zürich"}`, "\xff\xfeabc", "👋🏽👋🏽👋🏽👋🏽"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, pieces := range map[string][]string{"Tokens": Tokens(s), "fragments": fragments(s)} {
			if strings.Join(pieces, "") != s {
				t.Fatalf("%s(%q) = %q does not concatenate back", name, s, pieces)
			}
			for _, p := range pieces {
				if p == "" || (utf8.ValidString(s) && !utf8.ValidString(p)) {
					t.Fatalf("%s(%q): bad piece %q", name, s, p)
				}
			}
		}
	})
}
