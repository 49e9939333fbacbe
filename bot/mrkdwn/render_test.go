package mrkdwn

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestEscapeText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"<!channel> hi", "&lt;!channel&gt; hi"},
		{"<!here> <!everyone> <@U123> <#C1|x> <!subteam^S1>", "&lt;!here&gt; &lt;!everyone&gt; &lt;@U123&gt; &lt;#C1|x&gt; &lt;!subteam^S1&gt;"},
		{"a & b", "a &amp; b"},
		{"&lt;", "&amp;lt;"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := EscapeText(tt.in); got != tt.want {
				t.Errorf("EscapeText(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := escapedLen(tt.in); got != len(tt.want) {
				t.Errorf("escapedLen(%q) = %d, want %d", tt.in, got, len(tt.want))
			}
		})
	}
}

func TestMrkdwn(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"bold italic", "**bold** and *it* and _it2_", "*bold* and _it_ and _it2_"},
		{"strike", "~~gone~~", "~gone~"},
		{"heading", "# Title\n\ntext", "*Title*\n\ntext"},
		{"link", "see [docs](https://example.com/a?b=1&c=2)", "see <https://example.com/a?b=1&amp;c=2|docs>"},
		{"autolink", "<https://example.com>", "<https://example.com>"},
		{"mention link inert", "[hi](<!channel>)", "hi (!channel)"},
		{"slack mention inert", "ping <!here> and <@U123>", "ping &lt;!here&gt; and &lt;@U123&gt;"},
		{"javascript link", "[x](javascript:alert(1))", "x (javascript:alert(1))"},
		{"code span", "run `a<b && c`", "run `a&lt;b &amp;&amp; c`"},
		{"fence", "```go\nx := <-ch\n```", "```\nx := &lt;-ch\n```"},
		{"bullets", "- one\n- two\n  - nested", "• one\n• two\n    • nested"},
		{"ordered", "3. a\n4. b", "3. a\n4. b"},
		{"quote", "> quoted\n> more", "> quoted\n> more"},
		{"table", "| a | bb |\n|---|---|\n| 1 | 2 |", "```\na | bb\n--+---\n1 | 2\n```"},
		{"html", "<b>x</b>", "&lt;b&gt;x&lt;/b&gt;"},
		{"image", "![cat](https://e.com/c.png)", "<https://e.com/c.png|cat>"},
		{"hr", "a\n\n---\n\nb", "a\n\n──────────\n\nb"},
		{"task", "- [x] done\n- [ ] todo", "• ☑ done\n• ☐ todo"},
		{"pipe in label", "[a|b](https://e.com)", "<https://e.com|a¦b>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Mrkdwn(tt.in)); diff != "" {
				t.Errorf("Mrkdwn(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestLive(t *testing.T) {
	tests := []struct{ in, want string }{
		{"text", "text"},
		{"a\n```go\nx := 1", "a\n```go\nx := 1\n```"},
		{"```\nx\n```\nafter", "```\nx\n```\nafter"},
		{"~~~~\ncode\n", "~~~~\ncode\n~~~~"},
	}
	for _, tt := range tests {
		if got := Live(tt.in); got != tt.want {
			t.Errorf("Live(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSplit(t *testing.T) {
	para := strings.Repeat("word ", 150) // 750 bytes
	long := strings.Join([]string{para, para, para, para, para, para}, "\n\n")
	code := "```python\n" + strings.Repeat("print('hello world')\n", 100) + "```"
	tests := []struct {
		name  string
		in    string
		limit int
		n     int
	}{
		{"short", "hello", 100, 1},
		{"empty", "\n\n", 100, 0},
		{"paragraphs", long, 1600, 3},
		{"code", code, 1000, 3},
		{"one long line", strings.Repeat("x", 250), 100, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.in, tt.limit)
			if len(got) != tt.n {
				t.Errorf("Split(%d bytes, %d) = %d pieces, want %d", len(tt.in), tt.limit, len(got), tt.n)
			}
			checkPieces(t, tt.in, got, tt.limit)
		})
	}
}

func TestSplitCodeReopened(t *testing.T) {
	code := "intro\n\n```python\n" + strings.Repeat("print('hello world')\n", 100) + "```\n\nouttro"
	got := Split(code, 1000)
	for i, p := range got {
		if _, open := openFence(p); open {
			t.Errorf("piece %d leaves a fence open:\n%s", i, p)
		}
		if i > 0 && i < len(got)-1 && !strings.HasPrefix(p, "```python\n") {
			t.Errorf("piece %d does not reopen the fence: %q", i, p[:20])
		}
	}
}

// checkPieces asserts the invariants of Split: sizes, valid UTF-8, and no
// text lost.
func checkPieces(t *testing.T, in string, pieces []string, limit int) {
	t.Helper()
	for i, p := range pieces {
		if n := escapedLen(p); n > limit {
			t.Errorf("piece %d has %d escaped bytes, limit %d", i, n, limit)
		}
		if strings.TrimSpace(p) == "" {
			t.Errorf("piece %d is empty", i)
		}
		if utf8.ValidString(in) && !utf8.ValidString(p) {
			t.Errorf("piece %d is not valid UTF-8: %q", i, p)
		}
	}
	if got, want := nonSpace(strings.Join(pieces, "")), nonSpace(in); !containsInOrder(got, want) {
		t.Errorf("pieces lost text:\n in: %q\nout: %q", in, pieces)
	}
}

func nonSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// containsInOrder reports whether want is a subsequence of got (Split may
// add fences, never drop text).
func containsInOrder(got, want string) bool {
	i := 0
	for j := 0; j < len(got) && i < len(want); j++ {
		if got[j] == want[i] {
			i++
		}
	}
	return i == len(want)
}

func FuzzEscapeText(f *testing.F) {
	for _, s := range []string{"<!channel>", "a&b", "<@U1|x>", "&amp;", "\xff<"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := EscapeText(s)
		if strings.ContainsAny(e, "<>") {
			t.Fatalf("EscapeText(%q) = %q keeps < or >", s, e)
		}
		if len(e) != escapedLen(s) {
			t.Fatalf("escapedLen(%q) = %d, len(EscapeText) = %d", s, escapedLen(s), len(e))
		}
		un := strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(e)
		if un != s {
			t.Fatalf("unescape(EscapeText(%q)) = %q", s, un)
		}
		if md := Markdown(s); strings.Contains(md, "<") || len(md) > escapedLen(s) {
			t.Fatalf("Markdown(%q) = %q keeps < or outgrows escapedLen", s, md)
		}
		m := Mrkdwn(s)
		for _, bad := range []string{"<!", "<@", "<#"} {
			if strings.Contains(m, bad) {
				t.Fatalf("Mrkdwn(%q) = %q contains %q", s, m, bad)
			}
		}
		if fb := Fallback(s); len(fb) > maxFallback {
			t.Fatalf("Fallback too long: %d", len(fb))
		}
	})
}

func FuzzSplit(f *testing.F) {
	f.Add("hello\n\nworld", 64)
	f.Add("```go\n"+strings.Repeat("x := <-ch\n", 30)+"```\n\ntext", 100)
	f.Add(strings.Repeat("é&<>", 100), 70)
	f.Add("~~~\nunclosed "+strings.Repeat("y", 300), 80)
	f.Add("| a | b |\n|---|---|\n"+strings.Repeat("| <x> | y&z |\n", 40), 90)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = 64 + (limit&0xfff)%2000
		checkPieces(t, s, Split(s, limit), limit)
	})
}

func TestMarkdown(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain **bold**", "plain **bold**"},
		{"ping <!here> & <@U1>", "ping &lt;!here&gt; &amp; &lt;@U1&gt;"},
		{"> quoted <!channel>\n>> nested\nnot > quote", "> quoted &lt;!channel&gt;\n>> nested\nnot &gt; quote"},
		{"```\nx := <-ch\n```", "```\nx := &lt;-ch\n```"},
	}
	for _, tt := range tests {
		if got := Markdown(tt.in); got != tt.want {
			t.Errorf("Markdown(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := Markdown(tt.in); len(got) > escapedLen(tt.in) {
			t.Errorf("Markdown(%q) is longer than escapedLen", tt.in)
		}
	}
}

// TestSplitTable: a table cut between pieces repeats its header and
// delimiter rows in every piece, and no row is lost or cut.
func TestSplitTable(t *testing.T) {
	var b strings.Builder
	b.WriteString("The results:\n\n| name | value |\n|:-----|------:|\n")
	for i := range 120 {
		fmt.Fprintf(&b, "| row %d | %d |\n", i, i*i)
	}
	b.WriteString("\nThat is all.")
	in := b.String()
	got := Split(in, 1000)
	if len(got) < 3 {
		t.Fatalf("%d pieces, want the table cut", len(got))
	}
	checkPieces(t, in, got, 1000)
	rows := 0
	for i, p := range got {
		lines := strings.Split(p, "\n")
		if i > 0 && (lines[0] != "| name | value |" || lines[1] != "|:-----|------:|") {
			t.Errorf("piece %d does not start with the table's header: %q", i, lines[:2])
		}
		for _, l := range lines {
			if strings.HasPrefix(l, "| row ") {
				rows++
				if !strings.HasSuffix(l, " |") {
					t.Errorf("row cut: %q", l)
				}
			}
		}
	}
	if rows != 120 {
		t.Errorf("%d rows in the pieces, want 120", rows)
	}
	if !strings.HasSuffix(got[len(got)-1], "That is all.") {
		t.Errorf("last piece %q", got[len(got)-1])
	}
	for _, s := range []string{"|---|---|", "--- | ---", "|:-:|", "| --- |"} {
		if !isDelimiterRow(s) {
			t.Errorf("isDelimiterRow(%q) = false", s)
		}
	}
	for _, s := range []string{"---", "| a | b |", "|-a-|", "text - more"} {
		if isDelimiterRow(s) {
			t.Errorf("isDelimiterRow(%q) = true", s)
		}
	}
}
