package playground

import (
	"html"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	gmtext "github.com/yuin/goldmark/text"
)

// markdownParser parses standard Markdown (markdown blocks and
// markdown_text) with GitHub's extensions, as Slack renders them. It is
// stateless once built.
var markdownParser = goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser()

// Markdown renders standard Markdown into Nodes. Raw HTML stays text: the
// page never interprets markup from a message.
func Markdown(md string, names Names) []Node {
	// Slack's own syntax (<@U…>, <#C…>, <!here>, <https://…|label>)
	// works inside markdown too: each is swapped for a private-use rune
	// before parsing and rendered as mrkdwn would after.
	specials := slackSpecialRE.FindAllString(md, maxSpecials)
	if len(specials) > 0 {
		i := 0
		md = slackSpecialRE.ReplaceAllStringFunc(md, func(m string) string {
			if i >= maxSpecials {
				return m
			}
			i++
			return string(rune(specialBase + i - 1))
		})
	}
	src := []byte(md)
	doc := markdownParser.Parse(gmtext.NewReader(src))
	out := mdChildren(doc, src, names)
	if len(specials) > 0 {
		out = restoreSpecials(out, specials, names)
	}
	return out
}

// Slack syntax inside markdown, and the private-use runes standing for it.
var slackSpecialRE = regexp.MustCompile(`<(?:[@#!][^<>\s|]+|(?:https?|mailto):[^<>\s|]+)(?:\|[^<>\n]*)?>`)

const (
	specialBase = 0xF0000 // Supplementary Private Use Area-A
	maxSpecials = 4096
)

// restoreSpecials puts the Slack syntax back into the rendered nodes: as
// mentions and links in text, as written inside code.
func restoreSpecials(nodes []Node, specials []string, names Names) []Node {
	var out []Node
	for _, n := range nodes {
		if n.Tag != "" {
			if n.Tag == "code" || n.Tag == "pre" {
				n.Kids = literalSpecials(n.Kids, specials)
			} else {
				n.Kids = restoreSpecials(n.Kids, specials, names)
			}
			out = append(out, n)
			continue
		}
		start := 0
		for i, r := range n.Text {
			k := int(r) - specialBase
			if k < 0 || k >= len(specials) {
				continue
			}
			if i > start {
				out = append(out, text(n.Text[start:i]))
			}
			inner := specials[k]
			out = append(out, special(inner[1:len(inner)-1], names))
			start = i + utf8.RuneLen(r)
		}
		if start < len(n.Text) {
			out = append(out, text(n.Text[start:]))
		}
	}
	return out
}

func literalSpecials(nodes []Node, specials []string) []Node {
	for i := range nodes {
		if nodes[i].Tag != "" {
			nodes[i].Kids = literalSpecials(nodes[i].Kids, specials)
			continue
		}
		var b strings.Builder
		for _, r := range nodes[i].Text {
			if k := int(r) - specialBase; k >= 0 && k < len(specials) {
				b.WriteString(specials[k])
				continue
			}
			b.WriteRune(r)
		}
		nodes[i].Text = b.String()
	}
	return nodes
}

func mdChildren(n ast.Node, src []byte, names Names) []Node {
	var out []Node
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		out = append(out, mdNode(c, src, names)...)
	}
	return out
}

// linesText joins a block's raw lines.
func linesText(n ast.Node, src []byte) string {
	var b strings.Builder
	ls := n.Lines()
	for i := range ls.Len() {
		seg := ls.At(i)
		b.Write(seg.Value(src))
	}
	return b.String()
}

func mdNode(n ast.Node, src []byte, names Names) []Node {
	kids := func() []Node { return mdChildren(n, src, names) }
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		if _, ok := n.(*ast.TextBlock); ok {
			return kids() // tight list items: no paragraph
		}
		return []Node{{Tag: "p", Kids: kids()}}
	case *ast.Heading:
		return []Node{{Tag: "h", Kids: kids()}}
	case *ast.ThematicBreak:
		return []Node{{Tag: "hr"}}
	case *ast.Blockquote:
		return []Node{{Tag: "quote", Kids: kids()}}
	case *ast.List:
		tag := "ul"
		if n.IsOrdered() {
			tag = "ol"
		}
		return []Node{{Tag: tag, Kids: kids()}}
	case *ast.ListItem:
		return []Node{{Tag: "li", Kids: kids()}}
	case *ast.FencedCodeBlock, *ast.CodeBlock:
		return []Node{{Tag: "pre", Kids: []Node{text(html.UnescapeString(strings.TrimRight(linesText(n, src), "\n")))}}}
	case *ast.HTMLBlock:
		raw := linesText(n, src)
		if n.HasClosure() {
			raw += string(n.ClosureLine.Value(src))
		}
		return []Node{{Tag: "p", Kids: []Node{text(html.UnescapeString(raw))}}}
	case *extast.Table:
		return []Node{{Tag: "table", Kids: kids()}}
	case *extast.TableHeader:
		row := Node{Tag: "tr"}
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			row.Kids = append(row.Kids, Node{Tag: "th", Kids: mdChildren(c, src, names)})
		}
		return []Node{row}
	case *extast.TableRow:
		return []Node{{Tag: "tr", Kids: kids()}}
	case *extast.TableCell:
		return []Node{{Tag: "td", Kids: kids()}}
	case *extast.TaskCheckBox:
		if n.IsChecked {
			return []Node{text("☑ ")}
		}
		return []Node{text("☐ ")}
	case *ast.Text:
		out := []Node{text(withEmoji(html.UnescapeString(string(n.Value(src)))))}
		switch {
		case n.HardLineBreak():
			out = append(out, Node{Tag: "br"})
		case n.SoftLineBreak():
			out = append(out, text("\n"))
		}
		return out
	case *ast.String:
		return []Node{text(html.UnescapeString(string(n.Value)))}
	case *ast.CodeSpan:
		var b strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if t, ok := c.(*ast.Text); ok {
				b.Write(t.Value(src))
			}
		}
		return []Node{{Tag: "code", Kids: []Node{text(html.UnescapeString(b.String()))}}}
	case *ast.Emphasis:
		tag := "i"
		if n.Level >= 2 {
			tag = "b"
		}
		return []Node{{Tag: tag, Kids: kids()}}
	case *extast.Strikethrough:
		return []Node{{Tag: "s", Kids: kids()}}
	case *ast.Link:
		return []Node{link(html.UnescapeString(string(n.Destination)), kids())}
	case *ast.AutoLink:
		u := html.UnescapeString(string(n.URL(src)))
		if n.AutoLinkType == ast.AutoLinkEmail && !strings.HasPrefix(u, "mailto:") {
			u = "mailto:" + u
		}
		return []Node{link(u, []Node{text(html.UnescapeString(string(n.Label(src))))})}
	case *ast.Image:
		// Images from a message are not loaded (the page's policy allows
		// none from elsewhere): the alt text links to them.
		return []Node{link(html.UnescapeString(string(n.Destination)), append([]Node{text("🖼 ")}, kids()...))}
	case *ast.RawHTML:
		var b strings.Builder
		for i := range n.Segments.Len() {
			seg := n.Segments.At(i)
			b.Write(seg.Value(src))
		}
		return []Node{text(html.UnescapeString(b.String()))}
	}
	return kids()
}
