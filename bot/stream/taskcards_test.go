package stream

import (
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
