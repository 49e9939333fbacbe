package mcp

import (
	"strings"

	"github.com/bobbinbot/bobbin/agent"
)

// Markdown tables in a tool's text: GitHub's pipe tables (GFM), found
// anywhere in the text (with prose around them), outside fenced code. A
// header row, a delimiter row with as many cells (`---`, `:--`, `--:`,
// `:-:`) and the body rows after it, up to a blank line or a line with
// no pipe (stricter than GFM, which would take a following sentence as
// a row: tool output often has one). A pipe in a cell is written `\|`
// (in code spans too); a short row gets empty cells, a long one loses
// its extra cells, as GFM says. Cells become plain text: the table's and
// Markdown's backslash escapes resolved, code spans without their
// backticks, emphasis around the whole cell dropped; links and inline
// HTML stay as written.

// maxMarkdownTables bounds the tables taken from one result.
const maxMarkdownTables = 5

// markdownTables returns the tables of text, in order (at most
// maxMarkdownTables, each with at least one body row; N is left 0).
func markdownTables(tool, text string) []agent.ToolTable {
	if !strings.Contains(text, "|") || !strings.Contains(text, "-") {
		return nil
	}
	lines := strings.Split(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n"), "\n")
	var out []agent.ToolTable
	cells := 0
	fence := ""
	for i := 0; i < len(lines) && len(out) < maxMarkdownTables; i++ {
		line := lines[i]
		if fence != "" {
			if closesFence(line, fence) {
				fence = ""
			}
			continue
		}
		if f, ok := opensFence(line); ok {
			fence = f
			continue
		}
		if i+1 >= len(lines) || indent(line) > 3 {
			continue
		}
		head, ok := splitRow(line)
		if !ok {
			continue
		}
		align, ok := delimiterRow(lines[i+1])
		if !ok || len(align) != len(head) {
			continue
		}
		t := agent.ToolTable{Tool: tool, Markdown: true, Align: align}
		for _, c := range head {
			t.Columns = append(t.Columns, cellText(c))
		}
		j := i + 2
		for ; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "" {
				break
			}
			if _, ok := opensFence(lines[j]); ok {
				break
			}
			raw, ok := splitRow(lines[j])
			if !ok {
				break
			}
			row := make([]string, len(head))
			for k := range min(len(raw), len(head)) {
				row[k] = cellText(raw[k])
			}
			t.Rows = append(t.Rows, row)
		}
		i = j - 1
		cells += len(head) * (len(t.Rows) + 1)
		if cells > maxTableCells {
			break
		}
		if len(t.Rows) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// indent is the width of line's leading blanks (a tab to the next stop
// of 4).
func indent(line string) int {
	n := 0
	for _, r := range line {
		switch r {
		case ' ':
			n++
		case '\t':
			n += 4 - n%4
		default:
			return n
		}
	}
	return n
}

// opensFence reports whether line opens a fenced code block, and the
// fence (its character, as many times as it was written).
func opensFence(line string) (string, bool) {
	if indent(line) > 3 {
		return "", false
	}
	s := strings.TrimLeft(line, " \t")
	if s == "" || (s[0] != '`' && s[0] != '~') {
		return "", false
	}
	n := len(s) - len(strings.TrimLeft(s, s[:1]))
	if n < 3 || (s[0] == '`' && strings.Contains(s[n:], "`")) {
		return "", false
	}
	return s[:n], true
}

// closesFence reports whether line closes the block fence opened: the
// same character, at least as many times, nothing after but blanks.
func closesFence(line, fence string) bool {
	if indent(line) > 3 {
		return false
	}
	s := strings.TrimSpace(line)
	return len(s) >= len(fence) && strings.Trim(s, fence[:1]) == ""
}

// splitRow splits a table row into its raw cells (not trimmed, escapes
// kept) on the pipes not escaped by a backslash, without the optional
// leading and trailing pipe; false for a line with no such pipe.
func splitRow(line string) ([]string, bool) {
	s := strings.Trim(line, " \t")
	var cells []string
	start, last := 0, -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // the escaped character, whatever it is, stays in the cell
		case '|':
			cells = append(cells, s[start:i])
			start, last = i+1, i
		}
	}
	if last < 0 {
		return nil, false
	}
	cells = append(cells, s[start:])
	if s[0] == '|' {
		cells = cells[1:]
	}
	if last == len(s)-1 && len(cells) > 0 {
		cells = cells[:len(cells)-1]
	}
	return cells, len(cells) > 0
}

// delimiterRow reads a table's delimiter row: a pipe, and cells of one
// or more hyphens with an optional colon on either side. It returns each
// column's alignment.
func delimiterRow(line string) ([]string, bool) {
	if indent(line) > 3 {
		return nil, false
	}
	cells, ok := splitRow(line)
	if !ok {
		return nil, false
	}
	align := make([]string, len(cells))
	for i, c := range cells {
		c = strings.Trim(c, " \t")
		left, right := strings.HasPrefix(c, ":"), strings.HasSuffix(c, ":")
		c = strings.TrimSuffix(strings.TrimPrefix(c, ":"), ":")
		if c == "" || strings.Trim(c, "-") != "" {
			return nil, false
		}
		switch {
		case left && right:
			align[i] = "center"
		case left:
			align[i] = "left"
		case right:
			align[i] = "right"
		}
	}
	return align, true
}

// cellText is a raw cell as plain text: trimmed, the table's `\|`
// resolved (in code spans too, as GFM says), emphasis wrapping the whole
// cell dropped, code spans without backticks and Markdown's backslash
// escapes resolved outside them. No newline can be in a cell.
func cellText(raw string) string {
	s := strings.ReplaceAll(strings.Trim(raw, " \t"), `\|`, "|")
	s = unwrapEmphasis(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]):
			b.WriteByte(s[i+1])
			i += 2
		case c == '`':
			n := runLen(s, i, '`')
			end := closingRun(s, i+n, n)
			if end < 0 {
				b.WriteString(s[i : i+n]) // no closer: literal backticks
				i += n
				continue
			}
			code := s[i+n : end]
			if len(code) >= 2 && code[0] == ' ' && code[len(code)-1] == ' ' && strings.Trim(code, " ") != "" {
				code = code[1 : len(code)-1]
			}
			b.WriteString(code)
			i = end + n
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// unwrapEmphasis drops emphasis markers (**, __, ~~, *, _) that wrap all
// of s, as often as they do.
func unwrapEmphasis(s string) string {
	for {
		done := true
		for _, m := range []string{"**", "__", "~~", "*", "_"} {
			if len(s) <= 2*len(m) || !strings.HasPrefix(s, m) || !strings.HasSuffix(s, m) {
				continue
			}
			in := s[len(m) : len(s)-len(m)]
			if in[0] == ' ' || in[len(in)-1] == ' ' || in[len(in)-1] == '\\' || strings.Trim(in, m[:1]) == "" {
				continue
			}
			s, done = in, false
			break
		}
		if done {
			return s
		}
	}
}

// runLen is the length of the run of c at s[i:].
func runLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// closingRun is the index of the next run of exactly n backticks at or
// after from, or -1.
func closingRun(s string, from, n int) int {
	for i := from; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		m := runLen(s, i, '`')
		if m == n {
			return i
		}
		i += m
	}
	return -1
}

func isASCIIPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}
