package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/agent/access"
)

// everyKind is a form with every field kind the spec allows (SEP-1330
// enums, SEP-1034 defaults) and one that asks for a secret.
const everyKind = `{"type":"object","properties":{
 "name":{"type":"string","title":"Your name","minLength":2,"maxLength":20,"default":"Ada"},
 "email":{"type":"string","format":"email","description":"Where we write"},
 "age":{"type":"integer","minimum":0,"maximum":150,"default":36},
 "ratio":{"type":"number","minimum":0.5,"maximum":2.5},
 "subscribe":{"type":"boolean","default":true},
 "color":{"type":"string","enum":["red","green"],"default":"green"},
 "size":{"type":"string","oneOf":[{"const":"s","title":"Small"},{"const":"l","title":"Large"}]},
 "tags":{"type":"array","items":{"type":"string","enum":["a","b","c"]},"minItems":1,"maxItems":2,"default":["a"]},
 "langs":{"type":"array","items":{"anyOf":[{"const":"go","title":"Go"},{"const":"rs","title":"Rust"}]}},
 "api_token":{"type":"string","title":"API token"}
},"required":["name","email","size"]}`

func TestParseElicitSchemaEveryKind(t *testing.T) {
	s, err := ParseElicitSchema(json.RawMessage(everyKind))
	if err != nil {
		t.Fatal(err)
	}
	two, one, zero, half, max := 2, 1, 0.0, 0.5, 150.0
	twenty := 20
	want := []ElicitField{
		{Name: "name", Title: "Your name", Kind: FieldString, Required: true, Default: "Ada", MinLength: &two, MaxLength: &twenty},
		{Name: "email", Description: "Where we write", Kind: FieldString, Format: "email", Required: true},
		{Name: "age", Kind: FieldInteger, Default: float64(36), Minimum: &zero, Maximum: &max},
		{Name: "ratio", Kind: FieldNumber, Minimum: &half, Maximum: ptr(2.5)},
		{Name: "subscribe", Kind: FieldBoolean, Default: true},
		{Name: "color", Kind: FieldEnum, Default: "green", Options: []ElicitOption{{Value: "red"}, {Value: "green"}}},
		{Name: "size", Kind: FieldEnum, Required: true, Options: []ElicitOption{{Value: "s", Title: "Small"}, {Value: "l", Title: "Large"}}},
		{Name: "tags", Kind: FieldMultiEnum, Default: []string{"a"}, MinItems: &one, MaxItems: &two,
			Options: []ElicitOption{{Value: "a"}, {Value: "b"}, {Value: "c"}}},
		{Name: "langs", Kind: FieldMultiEnum, Options: []ElicitOption{{Value: "go", Title: "Go"}, {Value: "rs", Title: "Rust"}}},
		{Name: "api_token", Title: "API token", Kind: FieldString, Sensitive: true},
	}
	if !reflect.DeepEqual(s.Fields, want) {
		for i := range want {
			if i < len(s.Fields) && !reflect.DeepEqual(s.Fields[i], want[i]) {
				t.Errorf("field %d:\n got %+v\nwant %+v", i, s.Fields[i], want[i])
			}
		}
		t.Fatalf("%d fields, want %d", len(s.Fields), len(want))
	}
	if !s.AsksForSecret {
		t.Error("a form asking for an API token is not flagged")
	}

	ok := map[string]any{"name": "Grace", "email": "grace@example.com", "size": "l", "age": int64(40),
		"ratio": 1.5, "subscribe": false, "color": "red", "tags": []string{"a", "c"}, "langs": []any{"go"}}
	if errs := ValidateElicitContent(s, ok); len(errs) != 0 {
		t.Fatalf("valid answer refused: %v", errs)
	}
	bad := map[string]any{"name": "G", "email": "not-an-email", "size": "xl", "age": 3.5, "ratio": 9.0,
		"subscribe": "yes", "tags": []string{"a", "b", "c"}, "extra": 1}
	errs := ValidateElicitContent(s, bad)
	for _, f := range []string{"name", "email", "size", "age", "ratio", "subscribe", "tags", ""} {
		if errs[f] == "" {
			t.Errorf("no error for %q (errors %v)", f, errs)
		}
	}
	if errs := ValidateElicitContent(s, map[string]any{"name": "Grace"}); errs["email"] == "" || errs["size"] == "" {
		t.Errorf("missing required fields not reported: %v", errs)
	}
	for _, c := range []struct {
		kind, in string
		want     any
		bad      bool
	}{{FieldInteger, "42", int64(42), false}, {FieldInteger, "4.2", nil, true}, {FieldNumber, "4.5", 4.5, false},
		{FieldNumber, "x", nil, true}, {FieldBoolean, "yes", true, false}, {FieldString, " hi ", "hi", false}, {FieldString, "", nil, false}} {
		got, err := ParseElicitValue(ElicitField{Kind: c.kind}, c.in)
		if (err != nil) != c.bad || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseElicitValue(%s, %q) = %v, %v", c.kind, c.in, got, err)
		}
	}
	for _, bad := range []string{`{"type":"array"}`, `{"type":"object","properties":{"x":{"type":"object","properties":{}}}}`,
		`{"type":"object","properties":{"x":{"type":"string","format":"ipv4"}}}`,
		`{"type":"object","properties":{"x":{"type":"integer","default":"ten"}}}`,
		`{"type":"object","properties":{"x":{"type":"array","items":{"type":"string"}}}}`} {
		if _, err := ParseElicitSchema(json.RawMessage(bad)); err == nil {
			t.Errorf("schema accepted: %s", bad)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// elicitor is the bot's modal: it records each question and answers with
// the test's function.
type elicitor struct {
	mu     sync.Mutex
	asked  []Elicitation
	answer func(q Elicitation) (ElicitAnswer, error)
}

func (e *elicitor) Elicit(ctx context.Context, q Elicitation) (ElicitAnswer, error) {
	e.mu.Lock()
	e.asked = append(e.asked, q)
	e.mu.Unlock()
	return e.answer(q)
}

func (e *elicitor) questions() []Elicitation {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Elicitation(nil), e.asked...)
}

// legacyElicitingServer asks through elicitation/create (2025-11-25).
func legacyElicitingServer(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "0.0.1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "form", Description: "Ask with a form"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Tell me about you", RequestedSchema: json.RawMessage(everyKind)})
			if err != nil {
				return nil, nil, err
			}
			b, _ := json.Marshal(res)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "page", Description: "Ask to open a page"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: "Link your account",
				URL: "https://auth.example.com/link?x=1", ElicitationID: "el-1"})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil, nil
		})
	var linked sync.Map
	mcp.AddTool(s, &mcp.Tool{Name: "needs_link", Description: "Fails with -32042 until the page was opened"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if _, ok := linked.Load(req.Session.ID()); ok {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "linked"}}}, nil, nil
			}
			linked.Store(req.Session.ID(), true) // the page "completes" once shown
			data, _ := json.Marshal(map[string]any{"elicitations": []map[string]any{{"mode": "url", "message": "Link first",
				"url": "https://auth.example.com/connect", "elicitationId": "el-2"}}})
			return nil, nil, &jsonrpc.Error{Code: mcp.CodeURLElicitationRequired, Message: "link your account", Data: data}
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
		srv.Close()
	})
	return srv.URL
}

func TestElicitationLegacyFormAndURL(t *testing.T) {
	url := legacyElicitingServer(t)
	el := &elicitor{}
	m := newTestManager(t, &Config{Servers: []ServerConfig{{Name: "asker", URL: url}}}, func(o *Options) { o.Elicitor = el })
	ctx := reqCtx(t, "UALICE")
	tools, err := m.Tools(ctx, "T1")
	if err != nil {
		t.Fatal(err)
	}
	form := toolByName(t, tools, "asker__form")
	for _, c := range []struct {
		answer ElicitAnswer
		err    error
		want   string
	}{
		// The person submits the pre-filled form with the required fields.
		{ElicitAnswer{Action: ActionAccept, Content: map[string]any{"name": "Ada", "email": "ada@example.com", "size": "s", "tags": []string{"b"}}},
			nil, `"action":"accept","content":{"age":36,"color":"green","email":"ada@example.com","name":"Ada","size":"s","subscribe":true,"tags":["b"]}`},
		{ElicitAnswer{Action: ActionDecline}, nil, `"action":"decline"`},
		{ElicitAnswer{}, context.DeadlineExceeded, `"action":"cancel"`}, // timed out
		// An answer that does not fit the schema is never sent as accept.
		{ElicitAnswer{Action: ActionAccept, Content: map[string]any{"name": 7}}, nil, `"action":"cancel"`},
	} {
		el.answer = func(Elicitation) (ElicitAnswer, error) { return c.answer, c.err }
		out, err := form.Call(ctx, nil)
		if err != nil || !strings.Contains(out, c.want) {
			t.Fatalf("answer %+v: got %q, %v; want it to contain %s", c.answer, out, err, c.want)
		}
	}
	q := el.questions()[0]
	if q.Caller != (access.Caller{Team: "T1", User: "UALICE", Channel: "C1", Thread: "1700000000.000100"}) || q.Server != "asker" || q.Mode != ElicitForm ||
		q.Message != "Tell me about you" || q.Schema == nil || len(q.Schema.Fields) != 10 || !q.Schema.AsksForSecret {
		t.Fatalf("question %+v", q)
	}

	el.answer = func(q Elicitation) (ElicitAnswer, error) {
		if q.Mode != ElicitURL || q.URL != "https://auth.example.com/link?x=1" || q.ElicitationID != "el-1" || q.Schema != nil {
			t.Errorf("url question %+v", q)
		}
		return ElicitAnswer{Action: ActionAccept}, nil
	}
	if out, err := toolByName(t, tools, "asker__page").Call(ctx, nil); err != nil || out != "accept" {
		t.Fatalf("url mode: %q, %v", out, err)
	}
	// -32042: the call is sent again once the person opened the page.
	el.answer = func(q Elicitation) (ElicitAnswer, error) {
		if q.Mode != ElicitURL || q.URL != "https://auth.example.com/connect" || q.Message != "Link first" {
			t.Errorf("-32042 question %+v", q)
		}
		return ElicitAnswer{Action: ActionAccept}, nil
	}
	if out, err := toolByName(t, tools, "asker__needs_link").Call(ctx, nil); err != nil || out != "linked" {
		t.Fatalf("-32042: %q, %v", out, err)
	}
}

func TestElicitationWaitDoesNotCountAgainstCallTimeout(t *testing.T) {
	url := legacyElicitingServer(t)
	el := &elicitor{answer: func(Elicitation) (ElicitAnswer, error) {
		time.Sleep(700 * time.Millisecond) // a person typing, longer than the call timeout
		return ElicitAnswer{Action: ActionDecline}, nil
	}}
	m := newTestManager(t, &Config{Servers: []ServerConfig{{Name: "asker", URL: url, Timeout: 400 * time.Millisecond}}},
		func(o *Options) { o.Elicitor = el })
	ctx := reqCtx(t, "UALICE")
	tools, err := m.Tools(ctx, "T1")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := toolByName(t, tools, "asker__form").Call(ctx, nil); err != nil || !strings.Contains(out, "decline") {
		t.Fatalf("got %q, %v", out, err)
	}
}

func TestElicitationNotDeclaredWithoutElicitor(t *testing.T) {
	url := legacyElicitingServer(t)
	m := newTestManager(t, &Config{Servers: []ServerConfig{{Name: "asker", URL: url}}}, nil)
	ctx := reqCtx(t, "UALICE")
	tools, err := m.Tools(ctx, "T1")
	if err != nil {
		t.Fatal(err)
	}
	out, err := toolByName(t, tools, "asker__form").Call(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "does not support elicitation") {
		t.Fatalf("got %q, %v", out, err)
	}
}

// modernAskingServer (2026-07-28, stateless) answers input_required with
// a requestState bound to the call's argument, and checks the retry echoes
// exactly that state and answers the question it asked.
func modernAskingServer(t *testing.T, seen *sync.Map) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "modern-asker", Version: "0.0.1"},
		&mcp.ServerOptions{SupportedProtocolVersions: []string{"2026-07-28"}})
	type in struct {
		Item string `json:"item"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "confirm", Description: "Confirm an item"},
		func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			p := req.Params
			if len(p.InputResponses) == 0 {
				if p.RequestState != "" {
					return nil, nil, errors.New("state sent without input responses")
				}
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"q": &mcp.ElicitParams{
					Message:         "Really delete " + a.Item + "?",
					RequestedSchema: json.RawMessage(`{"type":"object","properties":{"confirmed":{"type":"boolean","default":false}},"required":["confirmed"]}`),
				}}, RequestState: "state-for-" + a.Item}, nil, nil
			}
			seen.Store(a.Item, p.RequestState)
			if p.RequestState != "state-for-"+a.Item {
				return nil, nil, fmt.Errorf("request state %q does not belong to %s", p.RequestState, a.Item)
			}
			r, ok := p.InputResponses["q"].(*mcp.ElicitResult)
			if !ok || r.Action != "accept" || r.Content["confirmed"] != true {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "kept " + a.Item}}}, nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + a.Item}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "stateless_ask", Description: "Ask without state"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			p := req.Params
			if p.RequestState != "" {
				return nil, nil, errors.New("a result without state was re-sent with one")
			}
			if len(p.InputResponses) == 0 {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"q": &mcp.ElicitParams{Message: "Name?",
					RequestedSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"string"}}}`)}}}, nil, nil
			}
			r, _ := p.InputResponses["q"].(*mcp.ElicitResult)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint("hello ", r.Content["n"])}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestElicitationInputRequiredParallelCallsIsolated(t *testing.T) {
	var seen sync.Map
	url := modernAskingServer(t, &seen)
	el := &elicitor{answer: func(q Elicitation) (ElicitAnswer, error) {
		switch {
		case strings.Contains(q.Message, "apples"):
			return ElicitAnswer{Action: ActionAccept, Content: map[string]any{"confirmed": true}}, nil
		case strings.Contains(q.Message, "pears"):
			return ElicitAnswer{Action: ActionAccept, Content: map[string]any{"confirmed": false}}, nil
		case q.Message == "Name?":
			return ElicitAnswer{Action: ActionAccept, Content: map[string]any{"n": "Ada"}}, nil
		}
		return ElicitAnswer{Action: ActionCancel}, nil
	}}
	m := newTestManager(t, &Config{Servers: []ServerConfig{{Name: "modern", URL: url}}}, func(o *Options) { o.Elicitor = el })
	tools, err := m.Tools(reqCtx(t, "UALICE"), "T1")
	if err != nil {
		t.Fatal(err)
	}
	confirm := toolByName(t, tools, "modern__confirm")
	var wg sync.WaitGroup
	for _, c := range []struct{ user, item, want string }{{"UALICE", "apples", "deleted apples"}, {"UBOB", "pears", "kept pears"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := reqCtx(t, c.user)
			out, err := confirm.Call(ctx, json.RawMessage(`{"item":"`+c.item+`"}`))
			if err != nil || out != c.want {
				t.Errorf("%s: %q, %v; want %q", c.item, out, err, c.want)
			}
		}()
	}
	wg.Wait()
	for _, q := range el.questions() {
		wantUser := map[string]string{"Really delete apples?": "UALICE", "Really delete pears?": "UBOB"}[q.Message]
		if q.Caller.User != wantUser || q.Server != "modern" || q.Mode != ElicitForm {
			t.Errorf("question %q went to %s (want %s)", q.Message, q.Caller.User, wantUser)
		}
	}
	if out, err := toolByName(t, tools, "modern__stateless_ask").Call(reqCtx(t, "UALICE"), nil); err != nil || out != "hello Ada" {
		t.Fatalf("stateless ask: %q, %v", out, err)
	}
}

// TestElicitationLegacySharedConnectionNeverAsksTheWrongPerson: two
// people's calls are in flight on one shared (auth none) connection when
// the server asks through elicitation/create, which carries no link to a
// call: the question is cancelled rather than shown to either of them.
func TestElicitationLegacySharedConnectionNeverAsksTheWrongPerson(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "0.0.1"}, nil)
	both := make(chan struct{})
	var n sync.WaitGroup
	n.Add(2)
	go func() { n.Wait(); close(both) }()
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "Ask the caller"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Who string `json:"who"`
		}) (*mcp.CallToolResult, any, error) {
			n.Done()
			select { // both calls are in flight before either asks
			case <-both:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "question for " + in.Who,
				RequestedSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(func() {
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
		srv.Close()
	})
	el := &elicitor{answer: func(q Elicitation) (ElicitAnswer, error) {
		return ElicitAnswer{Action: ActionAccept, Content: map[string]any{"x": "y"}}, nil
	}}
	m := newTestManager(t, &Config{Servers: []ServerConfig{{Name: "asker", URL: srv.URL}}}, func(o *Options) { o.Elicitor = el })
	tools, err := m.Tools(reqCtx(t, "UALICE"), "T1")
	if err != nil {
		t.Fatal(err)
	}
	ask := toolByName(t, tools, "asker__ask")
	var wg sync.WaitGroup
	outs := make(chan string, 2)
	for _, who := range []string{"UALICE", "UBOB"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := ask.Call(reqCtx(t, who), json.RawMessage(`{"who":"`+who+`"}`))
			if err != nil {
				t.Errorf("%s: %v", who, err)
			}
			outs <- out
		}()
	}
	wg.Wait()
	close(outs)
	cancels := 0
	for o := range outs {
		if o == ActionCancel {
			cancels++
		}
	}
	for _, q := range el.questions() {
		if q.Message != "question for "+q.Caller.User {
			t.Errorf("%q was shown to %s", q.Message, q.Caller.User)
		}
	}
	if cancels == 0 {
		t.Fatal("no question was cancelled although two people's calls were in flight")
	}
}
