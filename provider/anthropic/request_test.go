package anthropic

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bobbinbot/bobbin/provider"
)

// asJSONValue decodes JSON text into plain Go values so two bodies compare
// independent of key order and spacing.
func asJSONValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return v
}

func shapeJSON(t *testing.T, req provider.Request, caching bool, log *slog.Logger) any {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b, err := json.Marshal(buildRequest(req, 4096, caching, log))
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return asJSONValue(t, b)
}

var weatherTool = provider.ToolSpec{
	Name:        "get_weather",
	Description: "Get weather",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"units":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}`),
}

// TestRequestMatchesRecordedTurn2 rebuilds the recorded follow-up request of
// a real tool-use exchange from the normalized conversation.
func TestRequestMatchesRecordedTurn2(t *testing.T) {
	for _, tc := range []struct {
		file string
		msgs []provider.Message
	}{
		{"testdata/anthropic-tool-use.turn1.request.json", []provider.Message{
			{Role: provider.RoleUser, Content: "Weather in SF in fahrenheit?"},
		}},
		{"testdata/anthropic-tool-use.turn2.request.json", []provider.Message{
			{Role: provider.RoleUser, Content: "Weather in SF in fahrenheit?"},
			{Role: provider.RoleAssistant, Content: "I'll get the current weather in San Francisco for you in Fahrenheit.",
				ToolCalls: []provider.ToolCall{{ID: "toolu_01RaX2WYWRWCbaeFHssmGJXG", Name: "get_weather", Arguments: `{"city": "San Francisco", "units": "fahrenheit"}`}}},
			{Role: provider.RoleTool, ToolCallID: "toolu_01RaX2WYWRWCbaeFHssmGJXG", ToolName: "get_weather", Content: "The weather in San Francisco is 68 degrees fahrenheit."},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			want, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			req := provider.Request{Model: "claude-3-7-sonnet-latest", MaxTokens: 512, Messages: tc.msgs, Tools: []provider.ToolSpec{weatherTool}}
			got := shapeJSON(t, req, false, nil)
			if d := cmp.Diff(asJSONValue(t, want), got); d != "" {
				t.Errorf("request body mismatch (-recorded +built):\n%s", d)
			}
		})
	}
}

func TestRequestShaping(t *testing.T) {
	sys := provider.Message{Role: provider.RoleSystem, Content: "You are Bobbin."}
	user := func(s string) provider.Message { return provider.Message{Role: provider.RoleUser, Content: s} }
	call := func(id string) provider.ToolCall {
		return provider.ToolCall{ID: id, Name: "get_weather", Arguments: `{"city":"Paris"}`}
	}
	result := func(id, s string) provider.Message {
		return provider.Message{Role: provider.RoleTool, ToolCallID: id, ToolName: "get_weather", Content: s}
	}
	tests := []struct {
		name    string
		req     provider.Request
		caching bool
		want    string
	}{{
		name:    "system and tools cached",
		caching: true,
		req: provider.Request{Model: "m", Messages: []provider.Message{sys, {Role: provider.RoleSystem, Content: "Be brief."}, user("hi")},
			Tools: []provider.ToolSpec{{Name: "a"}, weatherTool}},
		want: `{"model":"m","max_tokens":4096,"stream":true,
			"system":[{"type":"text","text":"You are Bobbin."},{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
			"tools":[{"name":"a","input_schema":{"type":"object"}},
				{"name":"get_weather","description":"Get weather","input_schema":{"type":"object","properties":{"city":{"type":"string"},"units":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]},"cache_control":{"type":"ephemeral"}}],
			"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`,
	}, {
		// Only the closing block carries the conversation breakpoint, so
		// the next step reads this whole prefix from the cache.
		name:    "conversation cached at its last block",
		caching: true,
		req: provider.Request{Model: "m", Messages: []provider.Message{user("q"),
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call("t1")}}, result("t1", "sunny")}},
		want: `{"model":"m","max_tokens":4096,"stream":true,
			"messages":[
				{"role":"user","content":[{"type":"text","text":"q"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Paris"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"sunny"}],"cache_control":{"type":"ephemeral"}}]}]}`,
	}, {
		name: "caching off, max tokens and temperature from the request",
		req:  provider.Request{Model: "m", MaxTokens: 100, Temperature: new(0.5), Messages: []provider.Message{sys, user("hi")}},
		want: `{"model":"m","max_tokens":100,"temperature":0.5,"stream":true,
			"system":[{"type":"text","text":"You are Bobbin."}],
			"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
	}, {
		name: "summary and later system messages become user text merged with adjacent user text",
		req: provider.Request{Model: "m", Messages: []provider.Message{sys,
			{Role: provider.RoleSystem, Content: "Summary of earlier talk.", Summary: true},
			user("go on"),
			{Role: provider.RoleAssistant, Content: "ok"},
			{Role: provider.RoleSystem, Content: "Later summary."},
		}},
		want: `{"model":"m","max_tokens":4096,"stream":true,
			"system":[{"type":"text","text":"You are Bobbin."}],
			"messages":[
				{"role":"user","content":[{"type":"text","text":"Summary of earlier talk."},{"type":"text","text":"go on"}]},
				{"role":"assistant","content":[{"type":"text","text":"ok"}]},
				{"role":"user","content":[{"type":"text","text":"Later summary."}]}]}`,
	}, {
		name: "summary after user is merged into that user message; messages start with user",
		req: provider.Request{Model: "m", Messages: []provider.Message{
			{Role: provider.RoleAssistant, Content: "earlier answer"},
			user("q"),
			{Role: provider.RoleSystem, Content: "note"},
			user("q2"),
		}},
		want: `{"model":"m","max_tokens":4096,"stream":true,
			"messages":[
				{"role":"user","content":[{"type":"text","text":"(continuing the conversation)"}]},
				{"role":"assistant","content":[{"type":"text","text":"earlier answer"}]},
				{"role":"user","content":[{"type":"text","text":"q"},{"type":"text","text":"note"},{"type":"text","text":"q2"}]}]}`,
	}, {
		name: "speaker prefix and consecutive users merged",
		req: provider.Request{Model: "m", Messages: []provider.Message{
			{Role: provider.RoleUser, UserName: "Alice", UserID: "U123", Content: "hello"},
			{Role: provider.RoleUser, UserName: "Bob", Content: "hi"},
			{Role: provider.RoleUser, UserID: "U9", Content: "yo"},
			{Role: provider.RoleUser, Content: ""},
		}},
		want: `{"model":"m","max_tokens":4096,"stream":true,
			"messages":[{"role":"user","content":[
				{"type":"text","text":"[Alice (U123)] hello"},{"type":"text","text":"[Bob] hi"},{"type":"text","text":"[U9] yo"}]}]}`,
	}, {
		name: "parallel results in one user message in call order, then user text",
		req: provider.Request{Model: "m", Messages: []provider.Message{
			user("weather?"),
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call("t1"), call("t2")}},
			result("t2", "rain"),
			{Role: provider.RoleTool, ToolCallID: "t1", Content: "boom", IsError: true},
			user("thanks"),
		}},
		want: `{"model":"m","max_tokens":4096,"stream":true,"messages":[
			{"role":"user","content":[{"type":"text","text":"weather?"}]},
			{"role":"assistant","content":[
				{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Paris"}},
				{"type":"tool_use","id":"t2","name":"get_weather","input":{"city":"Paris"}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"boom"}],"is_error":true},
				{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"rain"}]},
				{"type":"text","text":"thanks"}]}]}`,
	}, {
		name: "aborted tool_use gets a synthesized error result; orphan result dropped",
		req: provider.Request{Model: "m", Messages: []provider.Message{
			user("weather?"),
			{Role: provider.RoleAssistant, Content: "checking", ToolCalls: []provider.ToolCall{call("t1")}, Interrupted: true},
			user("never mind"),
			result("t9", "stray"),
		}},
		want: `{"model":"m","max_tokens":4096,"stream":true,"messages":[
			{"role":"user","content":[{"type":"text","text":"weather?"}]},
			{"role":"assistant","content":[{"type":"text","text":"checking"},
				{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Paris"}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"The tool call was not completed (the run was interrupted before it returned)."}],"is_error":true},
				{"type":"text","text":"never mind"}]}]}`,
	}, {
		name: "thinking blocks first and unmodified, unsigned reasoning dropped",
		req: provider.Request{Model: "m", Messages: []provider.Message{
			user("925/5?"),
			{Role: provider.RoleAssistant, Content: "Let me compute.",
				Reasoning: []provider.Reasoning{
					{Text: "The previous result was 925.", Signature: "EvQBCkYI"},
					{Redacted: "EmwKAhgBEgy3va"},
					{Text: "deepseek reasoning without signature"},
					{Text: "", Signature: "sig2"},
				},
				ToolCalls: []provider.ToolCall{{ID: "t1", Name: "calc", Arguments: ""}}},
			result("t1", "185"),
		}},
		want: `{"model":"m","max_tokens":4096,"stream":true,"messages":[
			{"role":"user","content":[{"type":"text","text":"925/5?"}]},
			{"role":"assistant","content":[
				{"type":"thinking","thinking":"The previous result was 925.","signature":"EvQBCkYI"},
				{"type":"redacted_thinking","data":"EmwKAhgBEgy3va"},
				{"type":"thinking","thinking":"","signature":"sig2"},
				{"type":"text","text":"Let me compute."},
				{"type":"tool_use","id":"t1","name":"calc","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"185"}]}]}]}`,
	}, {
		name: "consecutive assistants merged, empty tool result has no content",
		req: provider.Request{Model: "m", Messages: []provider.Message{
			user("q"),
			{Role: provider.RoleAssistant, Content: "a"},
			{Role: provider.RoleAssistant, Content: "b", ToolCalls: []provider.ToolCall{call("t1")}},
			result("t1", ""),
		}},
		want: `{"model":"m","max_tokens":4096,"stream":true,"messages":[
			{"role":"user","content":[{"type":"text","text":"q"}]},
			{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"text","text":"b"},
				{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Paris"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]}]}`,
	}, {
		name: "no messages",
		req:  provider.Request{Model: "m", Messages: []provider.Message{sys}},
		want: `{"model":"m","max_tokens":4096,"stream":true,"system":[{"type":"text","text":"You are Bobbin."}],"messages":[]}`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := shapeJSON(t, tc.req, tc.caching, nil)
			if d := cmp.Diff(asJSONValue(t, []byte(tc.want)), got); d != "" {
				t.Errorf("body mismatch (-want +got):\n%s", d)
			}
		})
	}
}

func TestToolInputNotAnObject(t *testing.T) {
	for _, args := range []string{`{"city":`, `[1,2]`, `null`, `"x"`, `{"a":1} trailing`} {
		t.Run(args, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			req := provider.Request{Model: "m", Messages: []provider.Message{
				{Role: provider.RoleUser, Content: "q"},
				{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "t1", Name: "f", Arguments: args}}},
				{Role: provider.RoleTool, ToolCallID: "t1", Content: "r"},
			}}
			got := shapeJSON(t, req, false, log)
			msgs := got.(map[string]any)["messages"].([]any)
			use := msgs[1].(map[string]any)["content"].([]any)[0].(map[string]any)
			if d := cmp.Diff(map[string]any{}, use["input"]); d != "" {
				t.Errorf("input for arguments %q (-want +got):\n%s", args, d)
			}
			if !strings.Contains(logs.String(), "not a JSON object") {
				t.Errorf("no log line for arguments %q; logs: %s", args, logs.String())
			}
		})
	}
}
