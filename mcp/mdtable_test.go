package mcp

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/agent"
)

func TestMarkdownTables(t *testing.T) {
	md := func(cols []string, align []string, rows ...[]string) agent.ToolTable {
		return agent.ToolTable{Tool: "t", Markdown: true, Columns: cols, Align: align, Rows: rows}
	}
	for _, tc := range []struct {
		name, in string
		want     []agent.ToolTable
	}{
		{"plain", "| id | name |\n|----|------|\n| 1 | a |\n| 2 | b |",
			[]agent.ToolTable{md([]string{"id", "name"}, []string{"", ""}, []string{"1", "a"}, []string{"2", "b"})}},
		{"text around, no outer pipes, CRLF", "Found 2 orders:\r\nid | item\r\n:-- | --:\r\n7 | tea\r\n8 | cake\r\nThat is all.",
			[]agent.ToolTable{md([]string{"id", "item"}, []string{"left", "right"}, []string{"7", "tea"}, []string{"8", "cake"})}},
		{"alignment", "|a|b|c|d|\n|:-:|---:|:---|-|\n|1|2|3|4|",
			[]agent.ToolTable{md([]string{"a", "b", "c", "d"}, []string{"center", "right", "left", ""}, []string{"1", "2", "3", "4"})}},
		{"escaped pipes, in code too", "| expr | means |\n|---|---|\n| `a \\| b` | a or b |\n| x\\|y | pipe |",
			[]agent.ToolTable{md([]string{"expr", "means"}, []string{"", ""}, []string{"a | b", "a or b"}, []string{"x|y", "pipe"})}},
		{"ragged rows", "| a | b | c |\n|---|---|---|\n| 1 |\n| 1 | 2 | 3 | 4 | 5 |\n|  | | |",
			[]agent.ToolTable{md([]string{"a", "b", "c"}, []string{"", "", ""}, []string{"1", "", ""}, []string{"1", "2", "3"}, []string{"", "", ""})}},
		{"single column", "| name |\n| --- |\n| ann |",
			[]agent.ToolTable{md([]string{"name"}, []string{""}, []string{"ann"})}},
		{"formatting in cells", "| **Total** | `x` | \\*lit\\* | [docs](https://e.example) | a\\\\ |\n|---|---|---|---|---|\n| _7_ | ``a`b`` | ~~old~~ | **mid** x | \\` |",
			[]agent.ToolTable{md([]string{"Total", "x", "*lit*", "[docs](https://e.example)", "a\\"}, []string{"", "", "", "", ""},
				[]string{"7", "a`b", "old", "**mid** x", "`"})}},
		{"ends at a blank line; two tables", "| a |\n|---|\n| 1 |\n\n| b | c |\n|---|---|\n| 2 | 3 |",
			[]agent.ToolTable{md([]string{"a"}, []string{""}, []string{"1"}), md([]string{"b", "c"}, []string{"", ""}, []string{"2", "3"})}},
		{"fenced code is not a table", "```\n| a | b |\n|---|---|\n| 1 | 2 |\n```\n~~~~md\n| c |\n|---|\n| 3 |\n~~~~",
			nil},
		{"after a fence", "```go\nx := a | b\n```\n| a | b |\n|---|---|\n| 1 | 2 |",
			[]agent.ToolTable{md([]string{"a", "b"}, []string{"", ""}, []string{"1", "2"})}},
		{"header only", "| a | b |\n|---|---|\n", nil},
		{"delimiter count differs", "| a | b |\n|---|\n| 1 | 2 |", nil},
		{"bad delimiter", "| a | b |\n|---|-x-|\n| 1 | 2 |", nil},
		{"delimiter without a pipe", "a\n---\nb", nil},
		{"indented code", "    | a | b |\n    |---|---|\n    | 1 | 2 |", nil},
		{"no table", "a | b is an expression; so is c - d", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := markdownTables("t", tc.in)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("markdownTables(%q) (-want +got):\n%s", tc.in, d)
			}
		})
	}
}

// TestResultTables: JSON rows win; otherwise the Markdown tables of the
// text blocks (beside files too), numbered when several.
func TestResultTables(t *testing.T) {
	text := func(s string) mcp.Content { return &mcp.TextContent{Text: s} }
	one := "| a |\n|---|\n| 1 |"
	got := resultTables("t", &mcp.CallToolResult{Content: []mcp.Content{text(`[{"a":1}]`)}})
	if len(got) != 1 || got[0].Markdown || got[0].N != 0 {
		t.Errorf("JSON rows: %+v", got)
	}
	got = resultTables("t", &mcp.CallToolResult{Content: []mcp.Content{text("Report\n\n" + one), &mcp.ImageContent{Data: []byte{1}, MIMEType: "image/png"}}})
	if len(got) != 1 || !got[0].Markdown || got[0].N != 0 {
		t.Errorf("a Markdown table beside an image: %+v", got)
	}
	got = resultTables("t", &mcp.CallToolResult{Content: []mcp.Content{text(one), text(one + "\n\n" + one)}})
	if len(got) != 3 || got[0].N != 1 || got[2].N != 3 {
		t.Errorf("three tables in two blocks: %+v", got)
	}
	got = resultTables("t", &mcp.CallToolResult{Content: []mcp.Content{text(strings.Repeat(one+"\n\n", 9))}})
	if len(got) != maxMarkdownTables {
		t.Errorf("%d tables taken from 9, want %d", len(got), maxMarkdownTables)
	}
	if got := resultTables("t", &mcp.CallToolResult{Content: []mcp.Content{text("no table here")}}); len(got) != 0 {
		t.Errorf("plain text: %+v", got)
	}
}

// escapeCell writes s as a cell that reads back as s: every ASCII
// punctuation character backslash-escaped.
func escapeCell(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if isASCIIPunct(s[i]) {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// FuzzMarkdownTables: any text parses without panicking into tables
// whose rows all have one cell per column, whose cells hold no line
// break, and whose alignments are Slack's; and a table written out with
// its cells escaped (escapeCell) reads back as the same table.
func FuzzMarkdownTables(f *testing.F) {
	for _, s := range []string{
		"| a | b |\n|---|:-:|\n| 1 | 2 |",
		"x\n| `a\\|b` | **c** |\n| --: | :-- |\n| \\\\| |\n\n```\n| a |\n|---|\n```",
		"a|b\n-|-\n1|2|3\n|\n",
		"~~~\n| a |\n| - |\n| 1 |\n~~~~\n| b |\n| - |\n| 2 |",
		"|||\n|-|-|\n||\\|",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, tb := range markdownTables("t", in) {
			if len(tb.Columns) == 0 || len(tb.Rows) == 0 || len(tb.Align) != len(tb.Columns) || !tb.Markdown {
				t.Fatalf("table %+v of %q", tb, in)
			}
			for _, a := range tb.Align {
				if a != "" && a != "left" && a != "center" && a != "right" {
					t.Fatalf("alignment %q of %q", a, in)
				}
			}
			for _, r := range append([][]string{tb.Columns}, tb.Rows...) {
				if len(r) != len(tb.Columns) {
					t.Fatalf("row %q has %d cells, want %d (input %q)", r, len(r), len(tb.Columns), in)
				}
				for _, c := range r {
					if strings.ContainsAny(c, "\r\n") {
						t.Fatalf("cell %q holds a line break (input %q)", c, in)
					}
				}
			}
		}

		// Round trip: the input's lines as the cells of a table.
		var cells []string
		for _, l := range strings.Split(in, "\n") {
			if c := strings.Trim(strings.ReplaceAll(l, "\r", " "), " \t"); c != "" && utf8.ValidString(c) {
				cells = append(cells, c)
			}
		}
		if len(cells) < 2 {
			return
		}
		cols := min(len(cells)/2, 20)
		want := agent.ToolTable{Tool: "t", Markdown: true, Columns: cells[:cols], Align: make([]string, cols)}
		var b strings.Builder
		row := func(r []string) {
			for _, c := range r {
				b.WriteString("| " + escapeCell(c) + " ")
			}
			b.WriteString("|\n")
		}
		row(want.Columns)
		b.WriteString(strings.Repeat("|---", cols) + "|\n")
		for i := cols; i+cols <= len(cells); i += cols {
			want.Rows = append(want.Rows, cells[i:i+cols])
			row(cells[i : i+cols])
		}
		got := markdownTables("t", "Some text first.\n"+b.String()+"and after.")
		if len(got) != 1 {
			t.Fatalf("%d tables read back from\n%s", len(got), b.String())
		}
		if d := cmp.Diff(want, got[0]); d != "" {
			t.Fatalf("round trip of\n%s(-want +got):\n%s", b.String(), d)
		}
	})
}

// FuzzParseTable: JSON rows parse without panicking, every row with one
// cell per column.
func FuzzParseTable(f *testing.F) {
	f.Add(`[{"a":1,"b":"x"},{"b":null,"c":true}]`)
	f.Add(`[{"a":{"b":1}}]`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, in string) {
		tb, ok := parseTable("t", []byte(in))
		if !ok {
			return
		}
		if !json.Valid([]byte(in)) {
			t.Fatalf("invalid JSON %q read as a table", in)
		}
		for _, r := range tb.Rows {
			if len(r) != len(tb.Columns) {
				t.Fatalf("row %q has %d cells, want %d (input %q)", r, len(r), len(tb.Columns), in)
			}
		}
	})
}
