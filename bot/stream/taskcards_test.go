package stream

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// TestEscClip: the escaped text never exceeds the clip and never ends in
// a cut entity.
func TestEscClip(t *testing.T) {
	for _, s := range []string{"plain", strings.Repeat("<&>", 60), strings.Repeat("é", 200), "a<b"} {
		for _, n := range []int{1, 5, 50, 120} {
			e := escClip(s, n)
			if utf8.RuneCountInString(e) > n {
				t.Errorf("escClip(%.20q, %d) has %d runes", s, n, utf8.RuneCountInString(e))
			}
			if i := strings.LastIndexByte(e, '&'); i >= 0 && !strings.Contains(e[i:], ";") {
				t.Errorf("escClip(%.20q, %d) = %q cuts an entity", s, n, e)
			}
		}
	}
}

func TestArgsSummary(t *testing.T) {
	for in, want := range map[string]string{
		"":                       "",
		"{}":                     "",
		"null":                   "",
		"{\n  \"q\": \"a<b\"\n}": `{"q":"a&lt;b"}`,
		"not json   at\nall":     "not json at all",
	} {
		if got := argsSummary(in); got != want {
			t.Errorf("argsSummary(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTaskProgress: a native reply queues a task card per tool event and
// a plan title from the second call; an edit reply queues none.
func TestTaskProgress(t *testing.T) {
	k := session.ThreadKey{Team: "T", Channel: "C", ThreadTS: "1"}
	r := New(Options{Thread: k, Mode: Native})
	call := func(id string) provider.ToolCall {
		return provider.ToolCall{ID: id, Name: "search", Arguments: `{"q":"x"}`}
	}
	r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: call("a")})
	r.Observe(agent.Event{Kind: agent.EventToolFinished, Call: call("a"), IsError: true, Text: "boom"})
	r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: call("b")})
	var kinds []string
	for _, c := range r.tasks {
		switch c := c.(type) {
		case slack.TaskUpdateChunk:
			kinds = append(kinds, string(c.Status)+":"+c.Output)
		case *slack.TaskUpdateChunk:
			kinds = append(kinds, string(c.Status)+":"+c.Output)
		default:
			kinds = append(kinds, "plan")
		}
	}
	if got := strings.Join(kinds, " "); got != "in_progress: error:boom plan in_progress:" {
		t.Errorf("task chunks %q", got)
	}
	e := New(Options{Thread: k, Mode: Edit})
	e.Observe(agent.Event{Kind: agent.EventToolStarted, Call: call("a")})
	if len(e.tasks) != 0 {
		t.Errorf("an edit reply queued %d task chunks", len(e.tasks))
	}
}

// TestTaskSourcesChunk: a completed call's task_update carries its
// result's links as sources (JSON objects' url and title, Markdown links,
// bare URLs; each once, capped, titles escaped; no other schemes); a
// failed call and an in-progress one carry none.
func TestTaskSourcesChunk(t *testing.T) {
	k := session.ThreadKey{Team: "T", Channel: "C", ThreadTS: "1"}
	r := New(Options{Thread: k, Mode: Native})
	call := provider.ToolCall{ID: "a", Name: "search"}
	result := `[{"title":"Go <b>& you</b>","url":"https://go.dev/doc/"},` +
		`{"name":"dup","link":"https://go.dev/doc/"},{"url":"javascript:alert(1)","title":"no"},` +
		`{"text":"see [the spec](https://go.dev/ref/spec) and https://example.com/a/b. or ftp://x.org"}]`
	r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: call})
	r.Observe(agent.Event{Kind: agent.EventToolFinished, Call: call, Result: result})
	r.Observe(agent.Event{Kind: agent.EventToolFinished, Call: provider.ToolCall{ID: "b", Name: "x"}, IsError: true, Result: "https://err.example"})
	got, err := json.Marshal(r.tasks[1])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"task_update","id":"a","title":"search","status":"complete","sources":[` +
		`{"type":"url","url":"https://go.dev/doc/","text":"Go \u0026lt;b\u0026gt;\u0026amp; you\u0026lt;/b\u0026gt;"},` +
		`{"type":"url","url":"https://go.dev/ref/spec","text":"the spec"},` +
		`{"type":"url","url":"https://example.com/a/b","text":"example.com/a/b"}]}`
	if string(got) != want {
		t.Errorf("task chunk\n got %s\nwant %s", got, want)
	}
	for _, c := range r.tasks {
		if b, _ := json.Marshal(c); strings.Contains(string(b), `"id":"b"`) && strings.Contains(string(b), "sources") {
			t.Errorf("failed call with sources: %s", b)
		}
	}
	var many strings.Builder
	for i := range 20 {
		fmt.Fprintf(&many, "https://example.com/%d\n", i)
	}
	if s := resultSources(many.String()); len(s) != maxTaskSources || s[0].URL != "https://example.com/0" {
		t.Errorf("%d sources (first %+v), want the first %d", len(s), s[0], maxTaskSources)
	}
	if s := resultSources("no links here"); s != nil {
		t.Errorf("sources %+v of a result without links", s)
	}
}
