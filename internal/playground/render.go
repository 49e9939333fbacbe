package playground

import (
	"encoding/json"
	"strings"
)

// Block is a Block Kit block as the page draws it: its text already
// rendered into Nodes, its interactive elements reduced to what the page
// needs to show them and report a click.
type Block struct {
	// Type: section, markdown, header, divider, context, actions, input,
	// image, rich_text, task (a native stream's task or plan update), or
	// unsupported (Name says which).
	Type    string `json:"type"`
	BlockID string `json:"block_id,omitempty"`
	Name    string `json:"name,omitempty"`
	// Text of section, markdown, header, rich_text and task blocks.
	Text []Node `json:"text,omitempty"`
	// Fields of a section.
	Fields    [][]Node  `json:"fields,omitempty"`
	Accessory *Element  `json:"accessory,omitempty"`
	Elements  []Element `json:"elements,omitempty"`
	// Input blocks.
	Label    string   `json:"label,omitempty"`
	Hint     string   `json:"hint,omitempty"`
	Optional bool     `json:"optional,omitempty"`
	Input    *Element `json:"input,omitempty"`
	Error    string   `json:"error,omitempty"`
	// Image blocks: the page shows the alt text and a link, never the
	// image (it loads nothing from elsewhere).
	Alt string `json:"alt,omitempty"`
	URL string `json:"url,omitempty"`
}

// Element is an element of an actions, context or input block, or a
// section's accessory.
type Element struct {
	// Kind: button, text (a context block's text), image (its alt text),
	// text_input, select, multi_select, checkboxes, radio, number, date,
	// or unsupported.
	Kind     string `json:"kind"`
	ActionID string `json:"action_id,omitempty"`
	Value    string `json:"value,omitempty"`
	// Label is a button's or select's plain text.
	Label string `json:"label,omitempty"`
	// Style is "primary", "danger" or "".
	Style string `json:"style,omitempty"`
	// URL of a link button (opened in a new tab; the click is reported
	// too, as Slack does).
	URL     string   `json:"url,omitempty"`
	Confirm *Confirm `json:"confirm,omitempty"`
	Text    []Node   `json:"text,omitempty"`
	// Text inputs.
	Multiline   bool   `json:"multiline,omitempty"`
	Placeholder string `json:"placeholder,omitempty"`
	Initial     string `json:"initial,omitempty"`
	MaxLength   int    `json:"max_length,omitempty"`
	// Select, checkbox and radio options, and the values chosen
	// initially.
	Options  []Option `json:"options,omitempty"`
	Selected []string `json:"selected,omitempty"`
	// Number inputs.
	Min     string `json:"min,omitempty"`
	Max     string `json:"max,omitempty"`
	Decimal bool   `json:"decimal,omitempty"`
}

// Confirm is a button's confirmation dialog.
type Confirm struct {
	Title   string `json:"title"`
	Text    []Node `json:"text"`
	Confirm string `json:"confirm"`
	Deny    string `json:"deny"`
	Style   string `json:"style,omitempty"`
}

// Option is one choice of a select.
type Option struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// rawText is a Block Kit text object.
type rawText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (t *rawText) render(names Names) []Node {
	if t == nil {
		return nil
	}
	if t.Type == "mrkdwn" {
		return Mrkdwn(t.Text, names)
	}
	return Plain(t.Text)
}

func (t *rawText) plain() string {
	if t == nil {
		return ""
	}
	return t.Text
}

type rawConfirm struct {
	Title   *rawText `json:"title"`
	Text    *rawText `json:"text"`
	Confirm *rawText `json:"confirm"`
	Deny    *rawText `json:"deny"`
	Style   string   `json:"style"`
}

type rawOption struct {
	Text  *rawText `json:"text"`
	Value string   `json:"value"`
}

// Values the page gives the halves of a feedback_buttons element: a click
// with one of them presses that half (the emulator sends the button's own
// value).
const (
	FeedbackPositive = "feedback:positive"
	FeedbackNegative = "feedback:negative"
)

type rawFeedback struct {
	Type     string             `json:"type"`
	ActionID string             `json:"action_id"`
	Positive *rawFeedbackButton `json:"positive_button"`
	Negative *rawFeedbackButton `json:"negative_button"`
}

type rawFeedbackButton struct {
	Text  json.RawMessage `json:"text"`
	Value string          `json:"value"`
}

type rawElement struct {
	Type        string          `json:"type"`
	ActionID    string          `json:"action_id"`
	Value       string          `json:"value"`
	Style       string          `json:"style"`
	URL         string          `json:"url"`
	Confirm     *rawConfirm     `json:"confirm"`
	Text        json.RawMessage `json:"text"` // text object (button) or string (context mrkdwn is an object too)
	AltText     string          `json:"alt_text"`
	Multiline   bool            `json:"multiline"`
	Placeholder *rawText        `json:"placeholder"`
	Initial     string          `json:"initial_value"`
	MaxLength   int             `json:"max_length"`
	Options     []rawOption     `json:"options"`
	InitialOpt  *rawOption      `json:"initial_option"`
	InitialOpts []rawOption     `json:"initial_options"`
	InitialDate string          `json:"initial_date"`
	MinValue    string          `json:"min_value"`
	MaxValue    string          `json:"max_value"`
	IsDecimal   bool            `json:"is_decimal_allowed"`
}

type rawBlock struct {
	Type      string            `json:"type"`
	BlockID   string            `json:"block_id"`
	Text      json.RawMessage   `json:"text"` // text object, or a string (markdown block)
	Fields    []rawText         `json:"fields"`
	Accessory *rawElement       `json:"accessory"`
	Elements  []json.RawMessage `json:"elements"`
	Element   *rawElement       `json:"element"`
	Label     *rawText          `json:"label"`
	Hint      *rawText          `json:"hint"`
	Optional  bool              `json:"optional"`
	AltText   string            `json:"alt_text"`
	ImageURL  string            `json:"image_url"`
	// Title is an image's text object or a task card's bare string.
	Title  json.RawMessage `json:"title"`
	Status string          `json:"status"`
}

// textObject decodes a text field that is a text object.
func textObject(raw json.RawMessage) *rawText {
	if len(raw) == 0 {
		return nil
	}
	var t rawText
	if json.Unmarshal(raw, &t) != nil {
		return nil
	}
	return &t
}

// RenderBlocks turns a Block Kit blocks array into Blocks. errs are a
// view's field errors by block_id. Malformed JSON yields nil: the caller
// falls back to the message's text.
func RenderBlocks(raw json.RawMessage, names Names, errs map[string]string) []Block {
	if len(raw) == 0 {
		return nil
	}
	var bs []rawBlock
	if json.Unmarshal(raw, &bs) != nil {
		return nil
	}
	out := make([]Block, 0, len(bs))
	for _, b := range bs {
		out = append(out, renderBlock(b, names, errs))
	}
	return out
}

func renderBlock(b rawBlock, names Names, errs map[string]string) Block {
	out := Block{Type: b.Type, BlockID: b.BlockID}
	switch b.Type {
	case "section":
		out.Text = textObject(b.Text).render(names)
		for _, f := range b.Fields {
			out.Fields = append(out.Fields, f.render(names))
		}
		if b.Accessory != nil {
			el := renderElement(*b.Accessory, names)
			out.Accessory = &el
		}
	case "markdown":
		var s string
		_ = json.Unmarshal(b.Text, &s)
		out.Text = Markdown(s, names)
	case "header":
		out.Text = Plain(textObject(b.Text).plain())
	case "divider":
	case "context_actions":
		// Slack's message actions row: the feedback buttons (👍/👎) are
		// drawn as two buttons whose click presses that half.
		out.Type = "actions"
		for _, raw := range b.Elements {
			var fb rawFeedback
			if json.Unmarshal(raw, &fb) != nil || fb.Type != "feedback_buttons" {
				out.Elements = append(out.Elements, Element{Kind: "unsupported", Label: fb.Type})
				continue
			}
			for _, half := range []struct {
				btn  *rawFeedbackButton
				sign string
			}{{fb.Positive, FeedbackPositive}, {fb.Negative, FeedbackNegative}} {
				if half.btn != nil {
					out.Elements = append(out.Elements, Element{Kind: "button", ActionID: fb.ActionID, Value: half.sign, Label: textObject(half.btn.Text).plain()})
				}
			}
		}
	case "context", "actions":
		for _, raw := range b.Elements {
			var el rawElement
			if json.Unmarshal(raw, &el) != nil {
				continue
			}
			out.Elements = append(out.Elements, renderElement(el, names))
		}
	case "input":
		out.Label = b.Label.plain()
		out.Hint = b.Hint.plain()
		out.Optional = b.Optional
		out.Error = errs[b.BlockID]
		if b.Element != nil {
			el := renderElement(*b.Element, names)
			out.Input = &el
		}
	case "image":
		out.Alt = b.AltText
		out.URL = safeHref(b.ImageURL)
		if t := textObject(b.Title).plain(); t != "" {
			out.Label = t
		}
	case "rich_text":
		out.Text = richText(b.Elements, names)
	case "task_card":
		// A tool call's card in a message (after a native stream closed):
		// drawn like the stream's task_update chunk.
		var title string
		_ = json.Unmarshal(b.Title, &title)
		out.Type = "task"
		out.Text = Plain(strings.TrimSpace(title + " " + statusMark(b.Status)))
	default:
		out.Type, out.Name = "unsupported", b.Type
	}
	return out
}

func renderElement(e rawElement, names Names) Element {
	out := Element{Kind: e.Type, ActionID: e.ActionID, Value: e.Value}
	switch e.Type {
	case "button":
		out.Label = textObject(e.Text).plain()
		if e.Style == "primary" || e.Style == "danger" {
			out.Style = e.Style
		}
		out.URL = safeHref(e.URL)
		if c := e.Confirm; c != nil {
			out.Confirm = &Confirm{
				Title: c.Title.plain(), Text: c.Text.render(names),
				Confirm: cmpOr(c.Confirm.plain(), "Yes"), Deny: cmpOr(c.Deny.plain(), "Cancel"),
			}
			if c.Style == "primary" || c.Style == "danger" {
				out.Confirm.Style = c.Style
			}
		}
	case "mrkdwn", "plain_text":
		out.Kind = "text"
		var t rawText
		t.Type = e.Type
		_ = json.Unmarshal(e.Text, &t.Text)
		out.Text = t.render(names)
	case "image":
		out.Label = e.AltText
	case "plain_text_input":
		out.Kind = "text_input"
		out.Multiline, out.Initial, out.MaxLength = e.Multiline, e.Initial, e.MaxLength
		out.Placeholder = e.Placeholder.plain()
	case "static_select", "multi_static_select", "checkboxes", "radio_buttons":
		out.Kind = map[string]string{"static_select": "select", "multi_static_select": "multi_select",
			"checkboxes": "checkboxes", "radio_buttons": "radio"}[e.Type]
		out.Label = e.Placeholder.plain()
		for _, o := range e.Options {
			out.Options = append(out.Options, Option{Label: o.Text.plain(), Value: o.Value})
		}
		if e.InitialOpt != nil {
			out.Selected = []string{e.InitialOpt.Value}
		}
		for _, o := range e.InitialOpts {
			out.Selected = append(out.Selected, o.Value)
		}
	case "number_input":
		out.Kind = "number"
		out.Initial, out.Min, out.Max, out.Decimal = e.Initial, e.MinValue, e.MaxValue, e.IsDecimal
		out.Placeholder = e.Placeholder.plain()
	case "datepicker":
		out.Kind = "date"
		out.Initial = e.InitialDate
	case "email_text_input", "url_text_input":
		out.Kind = "text_input"
		out.Initial = e.Initial
		out.Placeholder = e.Placeholder.plain()
	default:
		out.Kind = "unsupported"
		out.Label = e.Type
	}
	return out
}

// richElement is an element of a rich_text block.
type richElement struct {
	Type      string            `json:"type"`
	Text      string            `json:"text"`
	UserID    string            `json:"user_id"`
	ChannelID string            `json:"channel_id"`
	URL       string            `json:"url"`
	Name      string            `json:"name"`
	Range     string            `json:"range"`
	Style     map[string]bool   `json:"style"`
	Elements  []json.RawMessage `json:"elements"`
}

// richText renders rich_text elements (sections, lists, quotes, code).
func richText(elems []json.RawMessage, names Names) []Node {
	var out []Node
	for _, raw := range elems {
		var e struct {
			Type     string            `json:"type"`
			Style    json.RawMessage   `json:"style"`
			Elements []json.RawMessage `json:"elements"`
		}
		if json.Unmarshal(raw, &e) != nil {
			continue
		}
		switch e.Type {
		case "rich_text_section":
			out = append(out, Node{Tag: "p", Kids: richInline(e.Elements, names)})
		case "rich_text_preformatted":
			var b strings.Builder
			for _, n := range richInline(e.Elements, names) {
				b.WriteString(flatText(n))
			}
			out = append(out, Node{Tag: "pre", Kids: []Node{text(b.String())}})
		case "rich_text_quote":
			out = append(out, Node{Tag: "quote", Kids: richInline(e.Elements, names)})
		case "rich_text_list":
			tag := "ul"
			if string(e.Style) == `"ordered"` {
				tag = "ol"
			}
			list := Node{Tag: tag}
			for _, item := range richText(e.Elements, names) {
				list.Kids = append(list.Kids, Node{Tag: "li", Kids: item.Kids})
			}
			out = append(out, list)
		}
	}
	return out
}

// richInline renders the leaves of a rich_text section.
func richInline(elems []json.RawMessage, names Names) []Node {
	var out []Node
	for _, raw := range elems {
		var e richElement
		if json.Unmarshal(raw, &e) != nil {
			continue
		}
		var n Node
		switch e.Type {
		case "text":
			n = styled(e.Style, lines(e.Text))
		case "user":
			n = Node{Tag: "mention", Kids: []Node{text("@" + names.user(e.UserID))}}
		case "channel":
			n = Node{Tag: "mention", Kids: []Node{text("#" + names.channel(e.ChannelID))}}
		case "broadcast":
			n = Node{Tag: "mention", Kids: []Node{text("@" + e.Range)}}
		case "link":
			label := e.Text
			if label == "" {
				label = e.URL
			}
			n = styled(e.Style, []Node{link(e.URL, []Node{text(label)})})
		case "emoji":
			n = text(emojiChar(e.Name))
		default:
			continue
		}
		out = append(out, n)
	}
	return out
}

// lines splits text at newlines into text and line breaks.
func lines(s string) []Node {
	var out []Node
	for i, l := range strings.Split(s, "\n") {
		if i > 0 {
			out = append(out, Node{Tag: "br"})
		}
		if l != "" {
			out = append(out, text(l))
		}
	}
	return out
}

// styled wraps nodes in rich_text styles.
func styled(style map[string]bool, kids []Node) Node {
	n := Node{Kids: kids}
	for _, s := range []struct{ key, tag string }{{"code", "code"}, {"strike", "s"}, {"italic", "i"}, {"bold", "b"}} {
		if style[s.key] {
			n = Node{Tag: s.tag, Kids: []Node{n}}
		}
	}
	return n
}

// flatText is a node's text without markup.
func flatText(n Node) string {
	if n.Tag == "br" {
		return "\n"
	}
	s := n.Text
	for _, k := range n.Kids {
		s += flatText(k)
	}
	return s
}

// renderChunks renders a native stream's non-text chunks (task and plan
// updates) as task blocks.
func renderChunks(chunks []json.RawMessage, names Names) []Block {
	var out []Block
	for _, raw := range chunks {
		var c struct {
			Type   string          `json:"type"`
			Title  string          `json:"title"`
			Status string          `json:"status"`
			Blocks json.RawMessage `json:"blocks"`
		}
		if json.Unmarshal(raw, &c) != nil {
			continue
		}
		switch c.Type {
		case "blocks":
			out = append(out, RenderBlocks(c.Blocks, names, nil)...)
		case "task_update", "plan_update":
			line := strings.TrimSpace(c.Title + " " + statusMark(c.Status))
			out = append(out, Block{Type: "task", Text: Plain(line)})
		}
	}
	return out
}

func statusMark(s string) string {
	switch s {
	case "complete":
		return "✓"
	case "in_progress":
		return "…"
	case "error":
		return "✗"
	}
	return s
}
