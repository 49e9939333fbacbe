package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// everyKind is a form with every field kind the MCP spec allows (SEP-1330
// enums titled and untitled, single and multi; SEP-1034 defaults) and a
// field that asks for a secret.
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

// askingServers starts a 2025-11-25 go-sdk server that asks with
// elicitation/create (a form of every kind, a page to open) and a
// 2026-07-28 stateless one that answers input_required, and returns an
// MCP_CONFIG file mounting both as trusted with policy auto (their tools
// run without an approval).
func askingServers(t *testing.T) string {
	t.Helper()
	ro := &mcpsdk.ToolAnnotations{ReadOnlyHint: true}
	legacy := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "asker", Version: "0.0.1"}, nil)
	mcpsdk.AddTool(legacy, &mcpsdk.Tool{Name: "form", Description: "Ask with a form", Annotations: ro},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcpsdk.ElicitParams{Message: "Tell me about you", RequestedSchema: json.RawMessage(everyKind)})
			if err != nil {
				return nil, nil, err
			}
			if tok, ok := res.Content["api_token"].(string); ok {
				res.Content["api_token"] = fmt.Sprintf("%d characters", len(tok)) // the server keeps it
			}
			b, _ := json.Marshal(res)
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: string(b)}}}, nil, nil
		})
	mcpsdk.AddTool(legacy, &mcpsdk.Tool{Name: "page", Description: "Ask to open a page", Annotations: ro},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcpsdk.ElicitParams{Mode: "url", Message: "Link your account",
				URL: "https://auth.example.com/link?x=1", ElicitationID: "el-1"})
			if err != nil {
				return nil, nil, err
			}
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "page " + res.Action}}}, nil, nil
		})
	ls := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return legacy }, nil))
	t.Cleanup(func() {
		for ss := range legacy.Sessions() {
			_ = ss.Close()
		}
		ls.Close()
	})

	modern := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "modern", Version: "0.0.1"},
		&mcpsdk.ServerOptions{SupportedProtocolVersions: []string{"2026-07-28"}})
	type in struct {
		Item string `json:"item"`
	}
	mcpsdk.AddTool(modern, &mcpsdk.Tool{Name: "confirm", Description: "Delete an item after asking", Annotations: ro},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, a in) (*mcpsdk.CallToolResult, any, error) {
			p := req.Params
			if len(p.InputResponses) == 0 {
				return &mcpsdk.CallToolResult{InputRequests: mcpsdk.InputRequestMap{"q": &mcpsdk.ElicitParams{
					Message:         "Really delete " + a.Item + "?",
					RequestedSchema: json.RawMessage(`{"type":"object","properties":{"confirmed":{"type":"boolean","title":"Yes, delete it","default":false}},"required":["confirmed"]}`),
				}}, RequestState: "state-for-" + a.Item}, nil, nil
			}
			if p.RequestState != "state-for-"+a.Item {
				return nil, nil, fmt.Errorf("request state %q does not belong to %s", p.RequestState, a.Item)
			}
			if r, ok := p.InputResponses["q"].(*mcpsdk.ElicitResult); ok && r.Action == "accept" && r.Content["confirmed"] == true {
				return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "deleted " + a.Item}}}, nil, nil
			}
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "kept " + a.Item}}}, nil, nil
		})
	ms := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return modern }, &mcpsdk.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ms.Close)

	// policy: auto, since a trusted read-only tool's default asks in
	// channels (auto-in-dm at most).
	cfg := fmt.Sprintf("servers:\n  - name: asker\n    url: %s\n    trusted: true\n    policy: auto\n  - name: modern\n    url: %s\n    trusted: true\n    policy: auto\n", ls.URL, ms.URL)
	path := filepath.Join(t.TempDir(), "mcp.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// openForm presses Answer on a question as user and returns the modal.
func (rs *replicaSet) openForm(user, questionTS string) slackemu.View {
	rs.t.Helper()
	before := len(rs.emu.Views(rs.team, user))
	rs.click(user, questionTS, "bobbin_q_answer")
	var v slackemu.View
	rs.waitFor("the form for "+user, func() bool {
		vs := rs.emu.Views(rs.team, user)
		for _, x := range vs[min(before, len(vs)):] {
			if x.CallbackID == "bobbin_question" && !x.Closed {
				v = x
				return true
			}
		}
		return false
	})
	return v
}

// submit submits a form and returns the ack's field errors.
func (rs *replicaSet) submit(user string, v slackemu.View, values map[string]any) map[string]string {
	rs.t.Helper()
	in, err := rs.emu.SubmitViewInputs(rs.team, user, v.ID, values)
	if err != nil {
		rs.t.Fatal(err)
	}
	ack, err := in.Wait(rs.ctx)
	if err != nil {
		rs.t.Fatalf("submission not acked: %v", err)
	}
	return ack.Errors
}

// words joins values with spaces.
func words(vs ...any) string { return strings.TrimSpace(fmt.Sprintln(vs...)) }

// inputBlock is an input block of a modal, decoded.
type inputBlock struct {
	BlockID  string `json:"block_id"`
	Optional bool   `json:"optional"`
	Label    struct {
		Text string `json:"text"`
	} `json:"label"`
	Element map[string]any `json:"element"`
}

// inputs are a modal's input blocks by label.
func inputs(t *testing.T, v slackemu.View) map[string]inputBlock {
	t.Helper()
	var bs []inputBlock
	if err := json.Unmarshal(v.Blocks, &bs); err != nil {
		t.Fatal(err)
	}
	out := map[string]inputBlock{}
	for _, b := range bs {
		if b.Element != nil {
			out[b.Label.Text] = b
		}
	}
	return out
}

// optionTexts lists the texts of an element's options (or of its initial
// options with key "initial_options").
func optionTexts(el map[string]any, key string) []string {
	var out []string
	list, _ := el[key].([]any)
	if o, ok := el[key].(map[string]any); ok {
		list = []any{o}
	}
	for _, o := range list {
		om, _ := o.(map[string]any)
		text, _ := om["text"].(map[string]any)
		s, _ := text["text"].(string)
		out = append(out, s)
	}
	return out
}

// TestQuestionsFromServersInSlack runs two replicas with a server that
// asks through elicitation/create and one that answers input_required:
// the form's modal has the right inputs and defaults, invalid answers get
// field errors, accept/decline/cancel reach the server, another person's
// click is refused, a double click is taken once, URL questions go to the
// requester alone, Stop withdraws a question, and two people's parallel
// calls each get their own question and answer.
func TestQuestionsFromServersInSlack(t *testing.T) {
	rs := newReplicaSet(t, map[string]string{"MCP_CONFIG": askingServers(t)})
	rs.start(2)
	alice, bob, admin := slackemu.UserAlice, slackemu.UserBob, slackemu.UserAdmin

	th := rs.mention(alice, "call asker__form")
	q := rs.buttonMessage(th, "bobbin_q_answer")
	msg := rs.threadText(th)
	for _, want := range []string{"asks <@" + alice + ">: Tell me about you", "looks like a password, token or key", `"action_id":"bobbin_q_decline"`, `"action_id":"bobbin_q_cancel"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("question message lacks %q:\n%s", want, msg)
		}
	}
	// Someone else may not answer.
	nb := len(rs.emu.Ephemerals(bob))
	rs.click(bob, q, "bobbin_q_answer")
	rs.ephemeral(bob, nb, "Only the person who asked", "bob's refused click")
	if vs := rs.emu.Views(rs.team, bob); len(vs) != 0 {
		t.Errorf("bob got a form: %+v", vs)
	}

	// The form: one input per field, defaults pre-filled.
	v := rs.openForm(alice, q)
	in := inputs(t, v)
	el := func(label string) map[string]any { return in[label].Element }
	checks := []struct {
		field, got, want string
	}{
		{"name", words(el("Your name")["type"], el("Your name")["initial_value"], el("Your name")["min_length"], el("Your name")["max_length"], in["Your name"].Optional), "plain_text_input Ada 2 20 false"},
		{"email", words(el("email")["type"], in["email"].Optional), "plain_text_input false"},
		{"age", words(el("age")["type"], el("age")["initial_value"], el("age")["min_value"], el("age")["max_value"], el("age")["is_decimal_allowed"]), "number_input 36 0 150 false"},
		{"ratio", words(el("ratio")["type"], el("ratio")["min_value"], el("ratio")["max_value"], el("ratio")["is_decimal_allowed"], in["ratio"].Optional), "number_input 0.5 2.5 true true"},
		{"subscribe", words(el("subscribe")["type"], optionTexts(el("subscribe"), "initial_options")), "checkboxes [Yes]"},
		{"color", words(el("color")["type"], optionTexts(el("color"), "options"), optionTexts(el("color"), "initial_option")), "static_select [red green] [green]"},
		{"size", words(el("size")["type"], optionTexts(el("size"), "options"), el("size")["initial_option"] == nil, in["size"].Optional), "static_select [Small Large] true false"},
		{"tags", words(el("tags")["type"], optionTexts(el("tags"), "initial_options"), el("tags")["max_selected_items"]), "multi_static_select [a] 2"},
		{"langs", words(el("langs")["type"], optionTexts(el("langs"), "options")), "multi_static_select [Go Rust]"},
		{"api_token", words(el("API token")["type"]), "plain_text_input"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s input = %q, want %q", c.field, c.got, c.want)
		}
	}
	block := func(label string) string { return in[label].BlockID }
	// Invalid answers come back as field errors; the form stays open.
	errs := rs.submit(alice, v, map[string]any{block("Your name"): "A", block("email"): "not-an-email"})
	for _, l := range []string{"Your name", "email", "size"} {
		if errs[block(l)] == "" {
			t.Errorf("no field error for %s: %v", l, errs)
		}
	}
	// A valid answer, the rest as pre-filled, reaches the server as accept.
	const secret = "tok-secret-9f2c1"
	if errs := rs.submit(alice, v, map[string]any{block("email"): "ada@example.com", block("size"): "1", block("API token"): secret}); len(errs) != 0 {
		t.Fatalf("valid answer refused: %v", errs)
	}
	rs.waitThread(th, `RESULT: {"action":"accept","content":{"age":36,"api_token":"16 characters","color":"green","email":"ada@example.com","name":"Ada","size":"l","subscribe":true,"tags":["a"]}}`)
	rs.waitThread(th, "Answer of <@"+alice+">")
	msg = rs.threadText(th)
	if !strings.Contains(msg, "*API token*: _hidden_") || !strings.Contains(msg, "*Your name*: Ada") || strings.Contains(msg, `"action_id":"bobbin_q_answer"`) {
		t.Errorf("answered message:\n%s", msg)
	}

	// Decline, clicked twice at once (the clicks may reach both replicas):
	// taken once. An admin may cancel someone's question.
	th = rs.mention(alice, "call asker__form")
	q = rs.buttonMessage(th, "bobbin_q_decline")
	c1, _ := rs.emu.Click(rs.team, alice, slackemu.ChannelGen, q, "bobbin_q_decline", "")
	c2, _ := rs.emu.Click(rs.team, alice, slackemu.ChannelGen, q, "bobbin_q_decline", "")
	for _, c := range []*slackemu.Interaction{c1, c2} {
		if _, err := c.Wait(rs.ctx); err != nil {
			t.Fatal(err)
		}
	}
	rs.waitThread(th, `RESULT: {"action":"decline"}`)
	th2 := rs.mention(alice, "call asker__form")
	rs.click(admin, rs.buttonMessage(th2, "bobbin_q_cancel"), "bobbin_q_cancel")
	rs.waitThread(th2, `RESULT: {"action":"cancel"}`)
	rs.waitThread(th2, "Cancelled by <@"+admin+">")

	// URL mode: the link goes to the requester alone, in full, host first.
	na := len(rs.emu.Ephemerals(alice))
	th = rs.mention(alice, "call asker__page")
	rs.waitThread(th, "to open a page on *auth.example.com*")
	if strings.Contains(rs.threadText(th), "link?x=1") {
		t.Errorf("the link is in the thread for everyone:\n%s", rs.threadText(th))
	}
	link := rs.ephemeral(alice, na, "bobbin_q_done", "alice's link")
	if u := buttonURL(t, link.Blocks, "bobbin_q_open"); u != "https://auth.example.com/link?x=1" || !strings.Contains(ephemeralText(link), "*auth.example.com*\\n`https://auth.example.com/link?x=1`") {
		t.Errorf("link message %s", ephemeralText(link))
	}
	rs.click(alice, link.TS, "bobbin_q_done")
	rs.waitThread(th, "RESULT: page accept")

	// Stop withdraws an open question.
	th = rs.mention(alice, "call asker__form")
	rs.buttonMessage(th, "bobbin_q_answer")
	rs.click(alice, rs.buttonMessage(th, "bobbin_stop"), "bobbin_stop")
	rs.waitThread(th, "Stopped by")
	rs.waitThread(th, "Withdrawn")

	// 2026-07-28: two people's calls at once, each with its own question,
	// state and answer.
	ta, tb := rs.mention(alice, `call modern__confirm {"item":"apples"}`), rs.mention(bob, `call modern__confirm {"item":"pears"}`)
	qa, qb := rs.buttonMessage(ta, "bobbin_q_answer"), rs.buttonMessage(tb, "bobbin_q_answer")
	if !strings.Contains(rs.threadText(ta), "asks <@"+alice+">: Really delete apples?") || !strings.Contains(rs.threadText(tb), "asks <@"+bob+">: Really delete pears?") {
		t.Fatalf("questions went to the wrong people:\n%s\n%s", rs.threadText(ta), rs.threadText(tb))
	}
	va, vb := rs.openForm(alice, qa), rs.openForm(bob, qb)
	if errs := rs.submit(alice, va, map[string]any{inputs(t, va)["Yes, delete it"].BlockID: []string{"true"}}); len(errs) != 0 {
		t.Fatal(errs)
	}
	if errs := rs.submit(bob, vb, nil); len(errs) != 0 {
		t.Fatal(errs)
	}
	rs.waitThread(ta, "RESULT: deleted apples")
	rs.waitThread(tb, "RESULT: kept pears")

	// Audit: questions and answers, each answer once, no values.
	answered := 0
	var asked []string
	for _, m := range rs.redis.XRange(rs.ctx, "bobbin:{w:"+rs.team+"}:audit", "-", "+").Val() {
		switch m.Values["event"] {
		case "elicitation_asked":
			asked = append(asked, fmt.Sprint(m.Values["question"]))
		case "elicitation_answered":
			if m.Values["decision"] == "decline" {
				answered++
			}
		}
	}
	if answered != 1 || len(asked) != 7 || slices.Contains(asked, "") {
		t.Errorf("audit: %d declines (want 1), questions %v (want 7)", answered, asked)
	}
	if where := rs.leaks(secret); len(where) > 0 {
		t.Errorf("a secret answer appears in %v", where)
	}
}

// TestQuestionTimesOut: nobody answers within APPROVAL_TIMEOUT: the
// server hears cancel and the message says so.
func TestQuestionTimesOut(t *testing.T) {
	rs := newReplicaSet(t, map[string]string{"MCP_CONFIG": askingServers(t), "APPROVAL_TIMEOUT": "2s"})
	rs.start(1)
	th := rs.mention(slackemu.UserAlice, "call asker__form")
	rs.waitThread(th, `RESULT: {"action":"cancel"}`)
	rs.waitThread(th, "Nobody answered in time")
}
