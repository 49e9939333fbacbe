package openai

import (
	"encoding/json"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/google/go-cmp/cmp"
)

// bodyOf sends req through a recording server and returns the request JSON
// decoded into generic values.
func bodyOf(t *testing.T, o Options, req provider.Request) map[string]any {
	t.Helper()
	srv := serveSSE(t, chunkLine(`{"content":"a"}`, "stop")+done)
	if _, err := collect(t, newTestClient(srv.URL, o), req); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(srv.bodies[0], &m); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, srv.bodies[0])
	}
	return m
}

// j decodes a JSON literal for expectations.
func j(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad expectation %s: %v", s, err)
	}
	return v
}

func TestRequestTopLevel(t *testing.T) {
	temp := 0.2
	no := false
	tests := []struct {
		name string
		opts Options
		req  provider.Request
		want string
	}{
		{
			name: "defaults",
			req:  provider.Request{Model: "gpt-4o", Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}},
			want: `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
		},
		{
			name: "tools, max tokens, temperature",
			req: provider.Request{Model: "m", MaxTokens: 100, Temperature: &temp,
				Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}},
				Tools: []provider.ToolSpec{
					{Name: "get_weather", Description: "Weather for a city", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
					{Name: "now"},
				}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},
				"max_tokens":100,"temperature":0.2,
				"tools":[
					{"type":"function","function":{"name":"get_weather","description":"Weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
					{"type":"function","function":{"name":"now","parameters":{"type":"object","properties":{}}}}]}`,
		},
		{
			name: "max_completion_tokens, no usage option",
			opts: Options{MaxCompletionTokens: true, IncludeUsage: &no},
			req:  provider.Request{Model: "o3", MaxTokens: 50, Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}},
			want: `{"model":"o3","messages":[{"role":"user","content":"hi"}],"stream":true,"max_completion_tokens":50}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bodyOf(t, tt.opts, tt.req)
			if diff := cmp.Diff(j(t, tt.want), any(got)); diff != "" {
				t.Errorf("request body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequestMessages(t *testing.T) {
	calls := []provider.ToolCall{
		{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
		{ID: "call_2", Name: "now", Arguments: ""},
	}
	tests := []struct {
		name string
		opts Options
		msgs []provider.Message
		want string
	}{
		{
			name: "system placement: leading joined, summary and later one become user",
			msgs: []provider.Message{
				{Role: provider.RoleSystem, Content: "You are Bobbin."},
				{Role: provider.RoleSystem, Content: "Be brief."},
				{Role: provider.RoleSystem, Content: "Summary of earlier turns.", Summary: true},
				{Role: provider.RoleUser, Content: "hi"},
				{Role: provider.RoleSystem, Content: "Summary: the user said hi."},
				{Role: provider.RoleUser, Content: "and?"},
			},
			want: `[{"role":"system","content":"You are Bobbin.\n\nBe brief."},
				{"role":"user","content":"Summary of earlier turns."},
				{"role":"user","content":"hi"},{"role":"user","content":"Summary: the user said hi."},{"role":"user","content":"and?"}]`,
		},
		{
			// The agent puts its compaction summary right after the system
			// prompt; a second system message there is a 400 on Qwen-style
			// templates.
			name: "compaction summary after the prompt is user text by default",
			msgs: []provider.Message{
				{Role: provider.RoleSystem, Content: "You are Bobbin."},
				{Role: provider.RoleSystem, Content: "Summary.", Summary: true},
				{Role: provider.RoleUser, Content: "go on"},
			},
			want: `[{"role":"system","content":"You are Bobbin."},{"role":"user","content":"Summary."},{"role":"user","content":"go on"}]`,
		},
		{
			name: "compaction summary after the prompt stays system where accepted",
			opts: Options{MidConversationSystem: true},
			msgs: []provider.Message{
				{Role: provider.RoleSystem, Content: "You are Bobbin."},
				{Role: provider.RoleSystem, Content: "Summary.", Summary: true},
				{Role: provider.RoleUser, Content: "go on"},
			},
			want: `[{"role":"system","content":"You are Bobbin."},{"role":"system","content":"Summary."},{"role":"user","content":"go on"}]`,
		},
		{
			name: "empty assistant message dropped",
			msgs: []provider.Message{{Role: provider.RoleUser, Content: "hi"}, {Role: provider.RoleAssistant, Interrupted: true}, {Role: provider.RoleUser, Content: "again"}},
			want: `[{"role":"user","content":"hi"},{"role":"user","content":"again"}]`,
		},
		{
			name: "mid-conversation system kept where accepted",
			opts: Options{MidConversationSystem: true},
			msgs: []provider.Message{{Role: provider.RoleUser, Content: "hi"}, {Role: provider.RoleSystem, Content: "Summary."}},
			want: `[{"role":"user","content":"hi"},{"role":"system","content":"Summary."}]`,
		},
		{
			name: "speaker prefixes",
			msgs: []provider.Message{
				{Role: provider.RoleUser, Content: "one", UserName: "Alice", UserID: "U123"},
				{Role: provider.RoleUser, Content: "two", UserName: "Bob"},
				{Role: provider.RoleUser, Content: "three", UserID: "U9"},
			},
			want: `[{"role":"user","content":"[Alice (U123)] one"},{"role":"user","content":"[Bob] two"},{"role":"user","content":"[U9] three"}]`,
		},
		{
			name: "tool calls: reasoning_content always present, one tool message per result",
			msgs: []provider.Message{
				{Role: provider.RoleUser, Content: "weather?"},
				{Role: provider.RoleAssistant, ToolCalls: calls},
				{Role: provider.RoleTool, ToolCallID: "call_1", ToolName: "get_weather", Content: "sunny"},
				{Role: provider.RoleTool, ToolCallID: "call_2", ToolName: "now", Content: "boom", IsError: true},
				{Role: provider.RoleAssistant, Content: "Sunny.", Reasoning: []provider.Reasoning{{Text: "done thinking"}}},
			},
			want: `[{"role":"user","content":"weather?"},
				{"role":"assistant","content":null,"reasoning_content":"","tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
					{"id":"call_2","type":"function","function":{"name":"now","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"sunny"},
				{"role":"tool","tool_call_id":"call_2","content":"Error: boom"},
				{"role":"assistant","content":"Sunny."}]`,
		},
		{
			name: "an error result the agent already prefixed is not prefixed twice",
			msgs: []provider.Message{
				{Role: provider.RoleUser, Content: "now?"},
				{Role: provider.RoleAssistant, ToolCalls: calls[1:]},
				{Role: provider.RoleTool, ToolCallID: "call_2", ToolName: "now", Content: "Error: clock unreachable", IsError: true},
			},
			want: `[{"role":"user","content":"now?"},
				{"role":"assistant","content":null,"reasoning_content":"","tool_calls":[
					{"id":"call_2","type":"function","function":{"name":"now","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"call_2","content":"Error: clock unreachable"}]`,
		},
		{
			name: "deepseek reasoning passed back only with tool calls",
			msgs: []provider.Message{
				{Role: provider.RoleUser, Content: "weather?"},
				{Role: provider.RoleAssistant, Content: "Let me check.", Reasoning: []provider.Reasoning{{Text: "The user "}, {Text: "wants weather."}}, ToolCalls: calls[:1]},
				{Role: provider.RoleTool, ToolCallID: "call_1", Content: "sunny"},
			},
			want: `[{"role":"user","content":"weather?"},
				{"role":"assistant","content":"Let me check.","reasoning_content":"The user wants weather.","tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"sunny"}]`,
		},
		{
			name: "unanswered call gets a synthesized result; orphan result becomes user text",
			msgs: []provider.Message{
				{Role: provider.RoleUser, Content: "go"},
				{Role: provider.RoleAssistant, ToolCalls: calls},
				{Role: provider.RoleTool, ToolCallID: "call_2", Content: "12:00"},
				{Role: provider.RoleUser, Content: "stop"},
				{Role: provider.RoleTool, ToolCallID: "call_9", ToolName: "ghost", Content: "late"},
			},
			want: `[{"role":"user","content":"go"},
				{"role":"assistant","content":null,"reasoning_content":"","tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
					{"id":"call_2","type":"function","function":{"name":"now","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"call_2","content":"12:00"},
				{"role":"tool","tool_call_id":"call_1","content":"Error: the tool call was not run (interrupted)."},
				{"role":"user","content":"stop"},
				{"role":"user","content":"[result of ghost] late"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bodyOf(t, tt.opts, provider.Request{Model: "m", Messages: tt.msgs})
			if diff := cmp.Diff(j(t, tt.want), got["messages"]); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}
