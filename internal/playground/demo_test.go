package playground_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/playground"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/openai"
)

// The demo model against the product's own OpenAI-compatible client: it
// streams a reply, asks for a memory tool when one is offered, reports
// the tool's result, and says what it is.

func demoClient(t *testing.T, key string) *openai.Client {
	t.Helper()
	hs := httptest.NewServer(playground.NewDemo("sk-demo-test", time.Millisecond))
	t.Cleanup(hs.Close)
	usage := true
	return openai.New(openai.Options{ClientOptions: provider.ClientOptions{BaseURL: hs.URL + "/v1", APIKey: key}, IncludeUsage: &usage})
}

func stream(t *testing.T, c *openai.Client, req provider.Request) (deltas int, done provider.Event, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ev, err := range c.Stream(ctx, req) {
		if err != nil {
			return deltas, done, err
		}
		switch ev.Type {
		case provider.EventTextDelta:
			deltas++
		case provider.EventDone:
			done = ev
		}
	}
	return deltas, done, nil
}

func TestDemoModel(t *testing.T) {
	c := demoClient(t, "sk-demo-test")
	user := provider.Message{Role: provider.RoleUser, Content: "[alice (U0ALICE)] hello <there>"}
	tools := []provider.ToolSpec{
		{Name: "everything__echo", InputSchema: []byte(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`)},
		{Name: "memory__read_graph", InputSchema: []byte(`{"type":"object"}`)},
	}

	// No tools: an answer that says it is a demo and how to add a server.
	deltas, done, err := stream(t, c, provider.Request{Model: playground.DemoModelName, Messages: []provider.Message{user}})
	if err != nil {
		t.Fatal(err)
	}
	text := done.Message.Content
	if deltas < 5 || done.StopReason != provider.StopEndTurn || !done.Usage.Known {
		t.Errorf("deltas %d, stop %v, usage %+v", deltas, done.StopReason, done.Usage)
	}
	for _, want := range []string{"demo model", "hello <there>", "MCP_CONFIG", "LLM_PROVIDER"} {
		if !strings.Contains(text, want) {
			t.Errorf("answer lacks %q: %s", want, text)
		}
	}
	if strings.Contains(text, "U0ALICE") {
		t.Errorf("answer repeats the speaker prefix: %s", text)
	}

	// Tools: the first question asks for memory's read_graph.
	_, done, err = stream(t, c, provider.Request{Model: playground.DemoModelName, Messages: []provider.Message{user}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if done.StopReason != provider.StopToolUse || len(done.Message.ToolCalls) != 1 || done.Message.ToolCalls[0].Name != "memory__read_graph" ||
		done.Message.ToolCalls[0].Arguments != "{}" {
		t.Fatalf("done = %+v", done.Message)
	}
	call := done.Message.ToolCalls[0]

	// After the result: it reports it and stops.
	msgs := []provider.Message{user, *done.Message, {Role: provider.RoleTool, ToolCallID: call.ID, ToolName: call.Name, Content: `{"entities":["x-4711"]}`}}
	_, done, err = stream(t, c, provider.Request{Model: playground.DemoModelName, Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if done.StopReason != provider.StopEndTurn || !strings.Contains(done.Message.Content, "x-4711") || !strings.Contains(done.Message.Content, "`memory/read_graph`") {
		t.Errorf("after the tool: %+v", done.Message)
	}

	// A later question calls no tool unless it asks for one; then the
	// required arguments get placeholders of their type.
	later := append(msgs, *done.Message, provider.Message{Role: provider.RoleUser, Content: "thanks"})
	if _, done, _ = stream(t, c, provider.Request{Model: playground.DemoModelName, Messages: later, Tools: tools}); len(done.Message.ToolCalls) != 0 {
		t.Errorf("a plain follow-up called %v", done.Message.ToolCalls)
	}
	echoOnly := []provider.ToolSpec{tools[0]}
	later[len(later)-1].Content = "use a tool please"
	if _, done, _ = stream(t, c, provider.Request{Model: playground.DemoModelName, Messages: later, Tools: echoOnly}); len(done.Message.ToolCalls) != 1 ||
		done.Message.ToolCalls[0].Arguments != `{"message":"demo"}` {
		t.Errorf("asked for a tool: %+v", done.Message.ToolCalls)
	}
}

// With the playground's built-in notes server: the first question is
// saved as a note (a writing tool, so an approval), and asking for notes
// later lists them.
func TestDemoModelNotes(t *testing.T) {
	c := demoClient(t, "sk-demo-test")
	user := provider.Message{Role: provider.RoleUser, Content: "[alice (U0ALICE)] hello <there>"}
	tools := []provider.ToolSpec{
		{Name: "demo__add_note", InputSchema: []byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		{Name: "demo__list_notes", InputSchema: []byte(`{"type":"object"}`)},
	}
	_, done, err := stream(t, c, provider.Request{Model: playground.DemoModelName, Messages: []provider.Message{user}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if len(done.Message.ToolCalls) != 1 || done.Message.ToolCalls[0].Name != "demo__add_note" ||
		done.Message.ToolCalls[0].Arguments != `{"text":"hello \u003cthere\u003e"}` {
		t.Fatalf("first answer: %+v", done.Message)
	}
	if !strings.Contains(done.Message.Content, "`demo/add_note`") || strings.Contains(done.Message.Content, "__") {
		t.Errorf("the tool is not named as people see it: %s", done.Message.Content)
	}
	call := done.Message.ToolCalls[0]
	msgs := []provider.Message{user, *done.Message, {Role: provider.RoleTool, ToolCallID: call.ID, ToolName: call.Name, Content: "Saved note 1"},
		{Role: provider.RoleAssistant, Content: "done"}, {Role: provider.RoleUser, Content: "show my notes"}}
	if _, done, _ = stream(t, c, provider.Request{Model: playground.DemoModelName, Messages: msgs, Tools: tools}); len(done.Message.ToolCalls) != 1 ||
		done.Message.ToolCalls[0].Name != "demo__list_notes" {
		t.Errorf("asked for notes: %+v", done.Message)
	}
}

func TestDemoModelRefusesOtherKeys(t *testing.T) {
	c := demoClient(t, "sk-wrong")
	if _, _, err := stream(t, c, provider.Request{Model: playground.DemoModelName, Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}}); err == nil {
		t.Error("a wrong key was accepted")
	}
	rec := httptest.NewRecorder()
	playground.NewDemo("k", 0).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("no key: %d", rec.Code)
	}
}
