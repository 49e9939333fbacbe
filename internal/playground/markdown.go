package playground

import (
	"html"
	"strings"

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
	src := []byte(md)
	doc := markdownParser.Parse(gmtext.NewReader(src))
	return mdChildren(doc, src, names)
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
