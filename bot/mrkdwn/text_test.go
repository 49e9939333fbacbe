package mrkdwn

import (
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

func TestImports(t *testing.T) {
	// mrkdwn is a leaf: nothing of this module, no Redis, no MCP.
	importcheck.Forbid(t, ".", importcheck.Module, importcheck.GoRedis, importcheck.MCPSDK)
}

func TestTextConstructors(t *testing.T) {
	when := time.Date(2026, 12, 2, 9, 5, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		got  Text
		want string
	}{
		{"escape", Escape("hi <!channel> & <@U1>"), "hi &lt;!channel&gt; &amp; &lt;@U1&gt;"},
		{"code", Code("a`b<c>"), "`a'b&lt;c&gt;`"},
		{"user", User("U123"), "<@U123>"},
		{"user escaped", User("U1><!here"), "<@U1&gt;&lt;!here>"},
		{"channel", Channel("C9"), "<#C9>"},
		{"date", Date(when), "<!date^1796202300^{date_short_pretty} {time}|2026-12-02 09:05 UTC>"},
		{"link", Link("https://example.com/a?b=1&c=2", "the <page>"), "<https://example.com/a?b=1&amp;c=2|the &lt;page&gt;>"},
		{"link refused", Link("javascript:alert(1)", "x"), "x (javascript:alert(1))"},
		{"join", Join([]Text{Lit("*a*"), Escape("<b>")}, Lit(", ")), "*a*, &lt;b&gt;"},
		{"markdown", FromMarkdown("**bold** <!here>"), "*bold* &lt;!here&gt;"},
		{"truncate", Escape("abcdef").Truncate(5), "ab…"},
	} {
		if string(tc.got) != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestBlocks(t *testing.T) {
	s := Section("b1", Escape("<x>"))
	if s.BlockID != "b1" || s.Text.Text != "&lt;x&gt;" || s.Text.Type != "mrkdwn" {
		t.Errorf("Section: got %+v %+v", s, s.Text)
	}
	c := Context("c1", Lit("_note_"))
	if c.BlockID != "c1" || len(c.ContextElements.Elements) != 1 {
		t.Errorf("Context: got %+v", c)
	}
	b := Button("act", "v", "Approve", "primary")
	if b.ActionID != "act" || b.Value != "v" || b.Text.Text != "Approve" || b.Text.Type != "plain_text" || b.Style != "primary" {
		t.Errorf("Button: got %+v", b)
	}
}
