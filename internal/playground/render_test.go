package playground

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var testNames = Names{
	User:    func(id string) string { return map[string]string{"U1": "alice", "UX": "<b>eve</b>"}[id] },
	Channel: func(id string) string { return map[string]string{"C1": "general"}[id] },
}

// checkNodes fails on a tag outside the allowed list or a link that is
// not http(s) or mailto.
func checkNodes(t *testing.T, where string, ns []Node) {
	t.Helper()
	for _, n := range ns {
		if n.Tag != "" && !allowedTags[n.Tag] {
			t.Errorf("%s: tag %q is not allowed", where, n.Tag)
		}
		if n.Href != "" && !(strings.HasPrefix(n.Href, "http://") || strings.HasPrefix(n.Href, "https://") || strings.HasPrefix(n.Href, "mailto:")) {
			t.Errorf("%s: link to %q", where, n.Href)
		}
		if n.Tag != "a" && n.Href != "" {
			t.Errorf("%s: %q carries a link", where, n.Tag)
		}
		checkNodes(t, where, n.Kids)
	}
}

func checkBlocks(t *testing.T, where string, bs []Block) {
	t.Helper()
	for _, b := range bs {
		checkNodes(t, where, b.Text)
		for _, f := range b.Fields {
			checkNodes(t, where, f)
		}
		els := b.Elements
		if b.Accessory != nil {
			els = append(els, *b.Accessory)
		}
		for _, e := range els {
			checkNodes(t, where, e.Text)
			if e.URL != "" && safeHref(e.URL) != e.URL {
				t.Errorf("%s: button URL %q", where, e.URL)
			}
			if e.Confirm != nil {
				checkNodes(t, where, e.Confirm.Text)
			}
		}
		if b.URL != "" && safeHref(b.URL) != b.URL {
			t.Errorf("%s: image URL %q", where, b.URL)
		}
	}
}

// plainText flattens nodes.
func plainText(ns []Node) string {
	var b strings.Builder
	for _, n := range ns {
		b.WriteString(flatText(n))
	}
	return b.String()
}

func TestMrkdwn(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Node
	}{
		{"*bold* _it_ ~gone~ `x<y`", []Node{{Tag: "b", Kids: []Node{text("bold")}}, text(" "), {Tag: "i", Kids: []Node{text("it")}}, text(" "),
			{Tag: "s", Kids: []Node{text("gone")}}, text(" "), {Tag: "code", Kids: []Node{text("x<y")}}}},
		{"hi <@U1> in <#C1>", []Node{text("hi "), {Tag: "mention", Kids: []Node{text("@alice")}}, text(" in "), {Tag: "mention", Kids: []Node{text("#general")}}}},
		{"<https://example.com/a?b=1&amp;c=2|the &lt;site&gt;>", []Node{{Tag: "a", Href: "https://example.com/a?b=1&c=2", Kids: []Node{text("the <site>")}}}},
		{"<javascript:alert(1)|click>", []Node{{Kids: []Node{text("click")}}}},
		{"&lt;script&gt;alert(1)&lt;/script&gt;", []Node{text("<script>alert(1)</script>")}},
		{"a*b*c snake_case_name", []Node{text("a*b*c snake_case_name")}},
		{"```\n<b>code</b>\n```", []Node{{Tag: "pre", Kids: []Node{text("<b>code</b>")}}}},
		{"&gt; quoted\nnext", []Node{{Tag: "quote", Kids: []Node{text("quoted")}}, text("next")}},
		{":lock: ok :nope:", []Node{text("🔒 ok :nope:")}},
		{"<!here> <@UX>", []Node{{Tag: "mention", Kids: []Node{text("@here")}}, text(" "), {Tag: "mention", Kids: []Node{text("@<b>eve</b>")}}}},
	} {
		got := Mrkdwn(tc.in, testNames)
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("Mrkdwn(%q) (-want +got):\n%s", tc.in, d)
		}
		checkNodes(t, tc.in, got)
	}
}

func TestMarkdown(t *testing.T) {
	in := "# Title\n\n**bold** and *it* and ~~gone~~, `code`, [ok](https://example.com) [bad](javascript:alert(1)) " +
		"<script>alert(1)</script> ![img](https://example.com/x.png)\n\n- one\n- two\n\n```go\nx := 1 < 2\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
	got := Markdown(in, testNames)
	checkNodes(t, "markdown", got)
	js, _ := json.Marshal(got)
	for _, want := range []string{`"t":"h"`, `"t":"b"`, `"t":"i"`, `"t":"s"`, `"t":"code"`, `"t":"ul"`, `"t":"pre"`, `"t":"table"`, `"h":"https://example.com"`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("Markdown lacks %s: %s", want, js)
		}
	}
	if txt := plainText(got); !strings.Contains(txt, "<script>alert(1)</script>") || !strings.Contains(txt, "x := 1 < 2") {
		t.Errorf("raw HTML or code was not kept as text: %q", txt)
	}
	if strings.Contains(string(js), "javascript") && strings.Contains(string(js), `"h":"javascript`) {
		t.Errorf("a javascript: link survived: %s", js)
	}
}

// TestRenderBlocks: Block Kit the model or a tool shaped (through the bot)
// renders into the allowed elements only; hostile text stays text.
func TestRenderBlocks(t *testing.T) {
	raw := `[
	 {"type":"header","text":{"type":"plain_text","text":"<script>alert(1)</script>"}},
	 {"type":"section","block_id":"s","text":{"type":"mrkdwn","text":"*Approve* <javascript:alert(1)|me>"},
	  "fields":[{"type":"mrkdwn","text":"<img src=x onerror=alert(1)>"}],
	  "accessory":{"type":"button","action_id":"go","text":{"type":"plain_text","text":"Go"},"url":"javascript:alert(1)"}},
	 {"type":"markdown","text":"<iframe src=//evil></iframe> **fine**"},
	 {"type":"divider"},
	 {"type":"context","elements":[{"type":"mrkdwn","text":"by <@U1>"},{"type":"image","image_url":"https://x","alt_text":"pic"}]},
	 {"type":"actions","elements":[
	   {"type":"button","action_id":"a1","value":"v","style":"primary","text":{"type":"plain_text","text":"Allow once"}},
	   {"type":"button","action_id":"a2","style":"<bad>","text":{"type":"plain_text","text":"Deny"},
	    "confirm":{"title":{"type":"plain_text","text":"Sure?"},"text":{"type":"mrkdwn","text":"*really* <https://ok.example|ok>"},
	               "confirm":{"type":"plain_text","text":"Yes"},"deny":{"type":"plain_text","text":"No"},"style":"danger"}}]},
	 {"type":"input","block_id":"name","label":{"type":"plain_text","text":"Name"},"hint":{"type":"plain_text","text":"1–32 letters"},
	  "element":{"type":"plain_text_input","action_id":"n","placeholder":{"type":"plain_text","text":"github"}}},
	 {"type":"image","image_url":"data:text/html,<script>","alt_text":"x"},
	 {"type":"video","title":{"type":"plain_text","text":"v"}}
	]`
	bs := RenderBlocks(json.RawMessage(raw), testNames, map[string]string{"name": "<b>bad</b> name"})
	checkBlocks(t, "blocks", bs)
	types := []string{}
	for _, b := range bs {
		types = append(types, b.Type)
	}
	if d := cmp.Diff([]string{"header", "section", "markdown", "divider", "context", "actions", "input", "image", "unsupported"}, types); d != "" {
		t.Errorf("block types (-want +got):\n%s", d)
	}
	if got := plainText(bs[0].Text); got != "<script>alert(1)</script>" {
		t.Errorf("header text = %q, want it literally", got)
	}
	if bs[1].Accessory == nil || bs[1].Accessory.URL != "" || bs[1].Accessory.Label != "Go" {
		t.Errorf("accessory = %+v: a javascript: URL must be dropped", bs[1].Accessory)
	}
	acts := bs[5].Elements
	if acts[0].Style != "primary" || acts[1].Style != "" || acts[1].Confirm == nil || acts[1].Confirm.Style != "danger" || acts[1].Confirm.Deny != "No" {
		t.Errorf("buttons = %+v", acts)
	}
	if bs[6].Error != "<b>bad</b> name" || bs[6].Input == nil || bs[6].Input.Placeholder != "github" || bs[6].Hint != "1–32 letters" {
		t.Errorf("input = %+v", bs[6])
	}
	if bs[7].URL != "" {
		t.Errorf("image URL %q: want data: dropped", bs[7].URL)
	}
	if RenderBlocks(json.RawMessage(`{not json`), testNames, nil) != nil {
		t.Error("malformed blocks rendered")
	}
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{"*a* _b_ <https://x|y> <@U1> ```c```", "# h\n\n[x](javascript:y) <b>", "&lt;&gt;&amp; :lock:", "> q\n- l"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkNodes(t, "mrkdwn", Mrkdwn(s, testNames))
		checkNodes(t, "markdown", Markdown(s, testNames))
		blocks, _ := json.Marshal([]any{map[string]any{"type": "section", "text": map[string]string{"type": "mrkdwn", "text": s}},
			map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "button", "url": s, "text": map[string]string{"type": "plain_text", "text": s}}}}})
		checkBlocks(t, "blocks", RenderBlocks(blocks, testNames, nil))
	})
}

// Slack's syntax inside a markdown block renders as mrkdwn would; inside
// code it stays as written.
func TestMarkdownSlackSyntax(t *testing.T) {
	got := Markdown("_Stopped by <@U1>._ See <#C1> and <https://example.com/a|the docs> :tada:\n\n`<@U1>`", testNames)
	checkNodes(t, "markdown", got)
	want := []Node{
		{Tag: "p", Kids: []Node{
			{Tag: "i", Kids: []Node{text("Stopped by "), {Tag: "mention", Kids: []Node{text("@alice")}}, text(".")}},
			text(" See "), {Tag: "mention", Kids: []Node{text("#general")}}, text(" and "),
			{Tag: "a", Href: "https://example.com/a", Kids: []Node{text("the docs")}}, text(" 🎉"),
		}},
		{Tag: "p", Kids: []Node{{Tag: "code", Kids: []Node{text("<@U1>")}}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestRenderFeedbackButtons: Slack's context_actions row with
// feedback_buttons is drawn as two buttons whose values say which half a
// click presses.
func TestRenderFeedbackButtons(t *testing.T) {
	raw := json.RawMessage(`[{"type":"context_actions","block_id":"fb","elements":[{"type":"feedback_buttons","action_id":"bobbin_feedback",
		"positive_button":{"text":{"type":"plain_text","text":"👍"},"value":"positive"},
		"negative_button":{"text":{"type":"plain_text","text":"👎"},"value":"negative"}}]}]`)
	got := RenderBlocks(raw, testNames, nil)
	want := []Block{{Type: "actions", BlockID: "fb", Elements: []Element{
		{Kind: "button", ActionID: "bobbin_feedback", Value: FeedbackPositive, Label: "👍"},
		{Kind: "button", ActionID: "bobbin_feedback", Value: FeedbackNegative, Label: "👎"},
	}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("feedback row (-want +got):\n%s", d)
	}
}

// A message edited after its native stream closed carries the tool calls
// as task_card blocks (bot/stream): drawn as the stream's cards are, and
// the message's other blocks still render (a card's bare-string title
// once made the whole array undecodable).
func TestRenderTaskCardBlocks(t *testing.T) {
	raw := json.RawMessage(`[{"type":"markdown","text":"Done."},
		{"type":"task_card","task_id":"call_1","title":"demo/add_note","status":"complete"},
		{"type":"task_card","task_id":"call_2","title":"demo/list_notes","status":"error"},
		{"type":"image","image_url":"https://example.com/a.png","alt_text":"chart","title":{"type":"plain_text","text":"Chart"}}]`)
	got := RenderBlocks(raw, testNames, nil)
	if len(got) != 4 {
		t.Fatalf("got %d blocks, want 4: %+v", len(got), got)
	}
	for i, want := range []string{"demo/add_note ✓", "demo/list_notes ✗"} {
		b := got[i+1]
		text := ""
		for _, n := range b.Text {
			text += flatText(n)
		}
		if b.Type != "task" || text != want {
			t.Errorf("card %d = %q %q, want task %q", i, b.Type, text, want)
		}
	}
	if got[3].Label != "Chart" {
		t.Errorf("image title = %q, want Chart", got[3].Label)
	}
}
