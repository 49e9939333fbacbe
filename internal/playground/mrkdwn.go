package playground

import (
	"html"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Node is one piece of rendered text sent to the page: either plain text
// (Text, set through textContent) or an element from a fixed list (Tag)
// with children. The page maps each tag to one DOM element of its own
// choosing and ignores tags it does not know, so nothing in a message can
// make it create a script, a style, an event handler or an iframe.
type Node struct {
	// Tag is "" for a text node, else one of: b, i, s, code, pre, quote,
	// p, h, ul, ol, li, a, br, hr, mention, table, tr, th, td.
	Tag  string `json:"t,omitempty"`
	Text string `json:"x,omitempty"`
	// Href is a link's target, only ever http, https or mailto.
	Href string `json:"h,omitempty"`
	Kids []Node `json:"c,omitempty"`
}

// Tags a Node may carry; everything else is dropped (render_test.go
// checks every node the renderers make against it).
var allowedTags = map[string]bool{
	"b": true, "i": true, "s": true, "code": true, "pre": true, "quote": true, "p": true, "h": true,
	"ul": true, "ol": true, "li": true, "a": true, "br": true, "hr": true, "mention": true,
	"table": true, "tr": true, "th": true, "td": true,
}

func text(s string) Node { return Node{Text: s} }

// safeHref returns u when it is an absolute http(s) or mailto URL, else
// "" (javascript:, data:, relative and malformed URLs are not links).
func safeHref(u string) string {
	u = strings.TrimSpace(u)
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	switch strings.ToLower(p.Scheme) {
	case "http", "https":
		if p.Host == "" {
			return ""
		}
		return p.String()
	case "mailto":
		return p.String()
	}
	return ""
}

// link makes a link node, or plain text when the URL is not safe.
func link(href string, label []Node) Node {
	if h := safeHref(href); h != "" {
		return Node{Tag: "a", Href: h, Kids: label}
	}
	return Node{Kids: label}
}

// Names resolves the ids Slack text refers to.
type Names struct {
	User    func(id string) string // "" when unknown
	Channel func(id string) string
}

func (n Names) user(id string) string {
	if n.User != nil {
		if s := n.User(id); s != "" {
			return s
		}
	}
	return id
}

func (n Names) channel(id string) string {
	if n.Channel != nil {
		if s := n.Channel(id); s != "" {
			return s
		}
	}
	return id
}

// Mrkdwn renders Slack's mrkdwn (the text of messages, section and
// context blocks): *bold*, _italic_, ~strike~, `code`, ```blocks```,
// > quotes, <links|labels>, <@user> and <#channel> mentions, <!here>,
// and the &amp; &lt; &gt; escapes.
func Mrkdwn(s string, names Names) []Node {
	var out []Node
	var para []string
	flush := func() {
		if len(para) == 0 {
			return
		}
		out = append(out, inlineLines(para, names)...)
		para = nil
	}
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "```"):
			// A code block runs to the next ``` (on the same line or later).
			flush()
			rest := strings.TrimSpace(line)[3:]
			var code []string
			closed := false
			for {
				if j := strings.Index(rest, "```"); j >= 0 {
					code = append(code, rest[:j])
					closed = true
					if tail := strings.TrimSpace(rest[j+3:]); tail != "" {
						lines[i] = tail
						i--
					}
					break
				}
				code = append(code, rest)
				i++
				if i >= len(lines) {
					break
				}
				rest = lines[i]
			}
			body := strings.Join(code, "\n")
			if !closed {
				body = "```" + body
			}
			out = append(out, Node{Tag: "pre", Kids: []Node{text(html.UnescapeString(strings.Trim(body, "\n")))}})
		case strings.HasPrefix(line, "&gt;") || strings.HasPrefix(line, ">"):
			flush()
			var quoted []string
			for i < len(lines) && (strings.HasPrefix(lines[i], "&gt;") || strings.HasPrefix(lines[i], ">")) {
				q := strings.TrimPrefix(strings.TrimPrefix(lines[i], "&gt;"), ">")
				quoted = append(quoted, strings.TrimPrefix(q, " "))
				i++
			}
			i--
			out = append(out, Node{Tag: "quote", Kids: inlineLines(quoted, names)})
		default:
			para = append(para, line)
		}
	}
	flush()
	return out
}

// inlineLines renders lines of inline mrkdwn joined by line breaks.
func inlineLines(lines []string, names Names) []Node {
	var out []Node
	for i, l := range lines {
		if i > 0 {
			out = append(out, Node{Tag: "br"})
		}
		out = append(out, inline(l, names)...)
	}
	return out
}

// inline renders one line of mrkdwn.
func inline(s string, names Names) []Node {
	var out []Node
	var plain strings.Builder
	emit := func() {
		if plain.Len() > 0 {
			out = append(out, text(withEmoji(html.UnescapeString(plain.String()))))
			plain.Reset()
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '<':
			if j := strings.IndexByte(s[i+1:], '>'); j >= 0 && !strings.ContainsRune(s[i+1:i+1+j], '<') {
				emit()
				out = append(out, special(s[i+1:i+1+j], names))
				i += j + 2
				continue
			}
		case c == '`':
			if j := strings.IndexByte(s[i+1:], '`'); j > 0 {
				emit()
				out = append(out, Node{Tag: "code", Kids: []Node{text(html.UnescapeString(s[i+1 : i+1+j]))}})
				i += j + 2
				continue
			}
		case c == '*' || c == '_' || c == '~':
			if j := closing(s, i); j > 0 {
				emit()
				tag := map[byte]string{'*': "b", '_': "i", '~': "s"}[c]
				out = append(out, Node{Tag: tag, Kids: inline(s[i+1:j], names)})
				i = j + 1
				continue
			}
		}
		plain.WriteByte(c)
		i++
	}
	emit()
	return out
}

// closing finds the marker closing the one at s[i], following Slack's
// rule: the opener follows a start or a non-word character and precedes
// a non-space; the closer follows a non-space and precedes an end or a
// non-word character. -1 when there is none.
func closing(s string, i int) int {
	m := s[i]
	if i > 0 {
		r, _ := utf8.DecodeLastRuneInString(s[:i])
		if isWord(r) {
			return -1
		}
	}
	if i+1 >= len(s) || s[i+1] == ' ' || s[i+1] == m {
		return -1
	}
	for j := i + 2; j < len(s); j++ {
		if s[j] != m || s[j-1] == ' ' {
			continue
		}
		if j+1 < len(s) {
			r, _ := utf8.DecodeRuneInString(s[j+1:])
			if isWord(r) {
				continue
			}
		}
		return j
	}
	return -1
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// special renders what stands between < and >: a mention, a channel, a
// special mention, a date, or a link with an optional label.
func special(inner string, names Names) Node {
	target, label, hasLabel := strings.Cut(inner, "|")
	label = html.UnescapeString(label)
	switch {
	case strings.HasPrefix(target, "@"):
		name := names.user(target[1:])
		return Node{Tag: "mention", Kids: []Node{text("@" + name)}}
	case strings.HasPrefix(target, "#"):
		name := label
		if !hasLabel {
			name = names.channel(target[1:])
		}
		return Node{Tag: "mention", Kids: []Node{text("#" + name)}}
	case strings.HasPrefix(target, "!subteam^"):
		return Node{Tag: "mention", Kids: []Node{text(cmpOr(label, "@group"))}}
	case strings.HasPrefix(target, "!date^"):
		return text(label)
	case strings.HasPrefix(target, "!"):
		return Node{Tag: "mention", Kids: []Node{text("@" + strings.TrimPrefix(target, "!"))}}
	}
	href := html.UnescapeString(target)
	shown := href
	if hasLabel {
		shown = label
	}
	return link(href, []Node{text(shown)})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Plain renders a plain_text object: the text as it is.
func Plain(s string) []Node {
	if s == "" {
		return nil
	}
	return []Node{text(s)}
}
