package mrkdwn

import (
	"bytes"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// Slack size limits that shape rendering (slack.md §4).
const (
	// SplitLimit is the size, in escaped bytes, at which a long answer is
	// split into several messages.
	SplitLimit = 3500
	// maxFallback keeps the plain-text fallback under chat.update's 4 000
	// limit for text (msg_too_long).
	maxFallback = 3900
)

// EscapeText escapes the three characters Slack treats specially in every
// text field, so model or tool output such as <!channel>, <!here>,
// <!everyone>, <@U…>, <#C…> or <!subteam^…> shows literally and notifies
// nobody.
func EscapeText(s string) string {
	if !strings.ContainsAny(s, "&<>") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// escapedLen is len(EscapeText(s)) without building it.
func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&':
			n += 4
		case '<', '>':
			n += 3
		}
	}
	return n
}

// Markdown returns md as Slack's standard-Markdown representation
// (markdown_text or a markdown block): the text with &, < and > escaped,
// except the > markers that open a blockquote line (an escaped &gt; would
// not start a quote, and without a < nothing can form a mention).
func Markdown(md string) string {
	if !strings.ContainsAny(md, "&<>") {
		return md
	}
	var b strings.Builder
	b.Grow(len(md) + 16)
	for line := range strings.Lines(md) {
		i := 0
		for i < len(line) && (line[i] == ' ' || line[i] == '>') {
			i++
		}
		b.WriteString(line[:i])
		b.WriteString(EscapeText(line[i:]))
	}
	return b.String()
}

// Live prepares a partial answer for an intermediate edit: an open code
// fence is closed so the rest of the message does not render as code.
func Live(md string) string {
	if f, open := openFence(md); open {
		if !strings.HasSuffix(md, "\n") {
			md += "\n"
		}
		md += f
	}
	return md
}

// openFence reports whether md ends inside a fenced code block and, if so,
// the fence that closes it.
func openFence(md string) (string, bool) {
	var fence string
	for line := range strings.Lines(md) {
		line = strings.TrimRight(line, "\r\n")
		if fence == "" {
			if f, ok := fenceOpener(line); ok {
				fence = f
			}
		} else if isFenceCloser(line, fence) {
			fence = ""
		}
	}
	return fence, fence != ""
}

// fenceOpener reports whether line opens a fenced code block (up to three
// spaces of indent, then three or more backticks or tildes) and returns the
// bare fence (without the info string).
func fenceOpener(line string) (string, bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return "", false
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 || (t[0] == '`' && strings.Contains(t[n:], "`")) {
		return "", false
	}
	return t[:n], true
}

func isFenceCloser(line, fence string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return false
	}
	t = strings.TrimRight(t, " \t")
	if len(t) < len(fence) {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] != fence[0] {
			return false
		}
	}
	return true
}

// Mrkdwn converts standard Markdown from the model into Slack's mrkdwn for
// the plain text fallback and mrkdwn-only surfaces. It parses md (CommonMark
// plus GFM tables and strikethrough) and renders the tree; every piece of
// source text is escaped, so the result carries no mention or link the model
// did not write as a Markdown link to an http(s) or mailto URL.
func Mrkdwn(md string) string {
	src := []byte(md)
	doc := mdParser.Parser().Parse(text.NewReader(src))
	r := &mrkdwnRenderer{src: src}
	r.blocks(doc, "")
	return strings.TrimRight(r.b.String(), "\n ")
}

// mdParser is stateless after construction and safe for concurrent use.
var mdParser = goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.TaskList))

type mrkdwnRenderer struct {
	src []byte
	b   strings.Builder
}

// blocks renders the block children of n, each line prefixed by prefix
// (used for quotes and list indentation), separated by blank lines.
func (r *mrkdwnRenderer) blocks(n ast.Node, prefix string) {
	first := true
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if !first {
			r.b.WriteString(strings.TrimRight(prefix, " "))
			r.b.WriteString("\n")
		}
		first = false
		r.block(c, prefix)
	}
}

func (r *mrkdwnRenderer) block(n ast.Node, prefix string) {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		r.lines(prefix, r.inlineText(n))
	case *ast.Heading:
		r.lines(prefix, "*"+strings.TrimSpace(r.inlineText(n))+"*")
	case *ast.ThematicBreak:
		r.lines(prefix, "──────────")
	case *ast.FencedCodeBlock:
		r.code(prefix, n.Lines())
	case *ast.CodeBlock:
		r.code(prefix, n.Lines())
	case *ast.HTMLBlock:
		var s strings.Builder
		segs := n.Lines()
		for i := 0; i < segs.Len(); i++ {
			seg := segs.At(i)
			s.Write(seg.Value(r.src))
		}
		if n.HasClosure() {
			s.Write(n.ClosureLine.Value(r.src))
		}
		r.lines(prefix, EscapeText(strings.TrimRight(s.String(), "\n")))
	case *ast.Blockquote:
		r.blocks(n, prefix+"> ")
	case *ast.List:
		num := n.Start
		for item := n.FirstChild(); item != nil; item = item.NextSibling() {
			marker := "• "
			if n.IsOrdered() {
				marker = strconv.Itoa(num) + ". "
				num++
			}
			r.listItem(item, prefix, marker)
		}
	case *extast.Table:
		r.table(n, prefix)
	default:
		if n.Type() == ast.TypeBlock && n.HasChildren() {
			r.blocks(n, prefix)
		}
	}
}

// listItem renders one item: its first line after marker, later lines
// indented to line up under the text.
func (r *mrkdwnRenderer) listItem(item ast.Node, prefix, marker string) {
	var sub mrkdwnRenderer
	sub.src = r.src
	for c := item.FirstChild(); c != nil; c = c.NextSibling() {
		if c != item.FirstChild() {
			if _, ok := c.(*ast.List); !ok {
				sub.b.WriteString("\n")
			}
		}
		sub.block(c, "")
	}
	body := strings.TrimRight(sub.b.String(), "\n")
	indent := strings.Repeat(" ", 4)
	for i, line := range strings.Split(body, "\n") {
		if i == 0 {
			r.b.WriteString(prefix + marker + line + "\n")
			continue
		}
		if line == "" {
			r.b.WriteString(strings.TrimRight(prefix, " ") + "\n")
			continue
		}
		r.b.WriteString(prefix + indent + line + "\n")
	}
}

// lines writes s with every line prefixed.
func (r *mrkdwnRenderer) lines(prefix, s string) {
	for _, line := range strings.Split(s, "\n") {
		r.b.WriteString(prefix)
		r.b.WriteString(line)
		r.b.WriteString("\n")
	}
}

// code writes a code block; mrkdwn fences take no language.
func (r *mrkdwnRenderer) code(prefix string, segs *text.Segments) {
	var s strings.Builder
	for i := 0; i < segs.Len(); i++ {
		seg := segs.At(i)
		s.Write(seg.Value(r.src))
	}
	body := strings.TrimRight(s.String(), "\n")
	r.lines(prefix, "```\n"+EscapeText(body)+"\n```")
}

// table renders a GFM table as an aligned code block: mrkdwn has no tables.
func (r *mrkdwnRenderer) table(t *extast.Table, prefix string) {
	var rows [][]string
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
			cells = append(cells, plainText(cell, r.src))
		}
		rows = append(rows, cells)
	}
	var width []int
	for _, row := range rows {
		for i, c := range row {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var s strings.Builder
	for ri, row := range rows {
		for i, c := range row {
			if i > 0 {
				s.WriteString(" | ")
			}
			s.WriteString(c)
			if i < len(row)-1 {
				s.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)))
			}
		}
		s.WriteString("\n")
		if ri == 0 {
			for i, w := range width {
				if i > 0 {
					s.WriteString("-+-")
				}
				s.WriteString(strings.Repeat("-", w))
			}
			s.WriteString("\n")
		}
	}
	r.lines(prefix, "```\n"+EscapeText(strings.TrimRight(s.String(), "\n"))+"\n```")
}

// plainText is the unformatted text of an inline subtree.
func plainText(n ast.Node, src []byte) string {
	var b bytes.Buffer
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(src))
			if c.SoftLineBreak() || c.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		case *ast.AutoLink:
			b.Write(c.URL(src))
		case *ast.RawHTML:
			for i := 0; i < c.Segments.Len(); i++ {
				seg := c.Segments.At(i)
				b.Write(seg.Value(src))
			}
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// inlineText renders the inline children of n as mrkdwn.
func (r *mrkdwnRenderer) inlineText(n ast.Node) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.inline(&b, c)
	}
	return strings.TrimRight(b.String(), "\n")
}

func (r *mrkdwnRenderer) inline(b *strings.Builder, n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		b.WriteString(EscapeText(string(n.Segment.Value(r.src))))
		if n.SoftLineBreak() || n.HardLineBreak() {
			b.WriteString("\n")
		}
	case *ast.String:
		b.WriteString(EscapeText(string(n.Value)))
	case *ast.CodeSpan:
		b.WriteString("`" + EscapeText(plainText(n, r.src)) + "`")
	case *ast.Emphasis:
		mark := "_"
		if n.Level >= 2 {
			mark = "*"
		}
		b.WriteString(mark + r.inlineText(n) + mark)
	case *extast.Strikethrough:
		b.WriteString("~" + r.inlineText(n) + "~")
	case *ast.Link:
		b.WriteString(slackLink(string(n.Destination), r.inlineText(n)))
	case *ast.Image:
		alt := EscapeText(plainText(n, r.src))
		if alt == "" {
			alt = "image"
		}
		b.WriteString(slackLink(string(n.Destination), alt))
	case *ast.AutoLink:
		u := string(n.URL(r.src))
		if n.AutoLinkType == ast.AutoLinkEmail && !strings.HasPrefix(u, "mailto:") {
			u = "mailto:" + u
		}
		b.WriteString(slackLink(u, EscapeText(string(n.Label(r.src)))))
	case *ast.RawHTML:
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			b.WriteString(EscapeText(string(seg.Value(r.src))))
		}
	case *extast.TaskCheckBox:
		if n.IsChecked {
			b.WriteString("☑ ")
		} else {
			b.WriteString("☐ ")
		}
	default:
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			r.inline(b, c)
		}
	}
}

// slackLink renders a link as <url|label> when the URL is an absolute
// http(s) or mailto URL; anything else (including Slack's own <!…>, <@…>
// and <#…> forms) is shown as escaped text so it cannot mention anyone.
// label is already mrkdwn.
func slackLink(dest, label string) string {
	u, err := url.Parse(dest)
	ok := err == nil && (((u.Scheme == "http" || u.Scheme == "https") && u.Host != "") || (u.Scheme == "mailto" && u.Opaque != ""))
	if !ok || strings.ContainsAny(dest, "<>| \n\t") {
		if label == "" || label == EscapeText(dest) {
			return EscapeText(dest)
		}
		return label + " (" + EscapeText(dest) + ")"
	}
	// A label cannot contain '>' or '|' literally; '>' is already &gt;.
	label = strings.ReplaceAll(label, "|", "¦")
	label = strings.ReplaceAll(label, "\n", " ")
	d := strings.ReplaceAll(dest, "&", "&amp;")
	if label == "" || label == d {
		return "<" + d + ">"
	}
	return "<" + d + "|" + label + ">"
}

// Fallback returns the plain text fallback for md: mrkdwn, cut to Slack's
// text limit without breaking a rune or a <…> link.
func Fallback(md string) string {
	return Truncate(Mrkdwn(md), maxFallback)
}

// Truncate shortens mrkdwn s to at most n bytes, never inside a UTF-8 rune,
// an entity (&amp;) or a <…> link, ending with an ellipsis when cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	cut := n - len(ell)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if i := strings.LastIndexByte(s[:cut], '<'); i >= 0 && !strings.Contains(s[i:cut], ">") {
		cut = i
	}
	if i := strings.LastIndexByte(s[:cut], '&'); i >= 0 && !strings.Contains(s[i:cut], ";") {
		cut = i
	}
	return s[:cut] + ell
}
