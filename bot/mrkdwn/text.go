package mrkdwn

import (
	"strings"
	"time"
)

// Text is escaped mrkdwn: &, < and > in it are entities unless a constructor
// put them there on purpose (a mention, a date, a link). Build a Text with
// the constructors in this package; a conversion mrkdwn.Text(s) asserts s
// is already safe mrkdwn (the bot's own wording built with them) and wants
// a comment saying so, like template.HTML(s).
type Text string

// String returns t as the mrkdwn Slack receives.
func (t Text) String() string { return string(t) }

// literal is the type of Lit's argument: an untyped string constant converts
// to it, a string variable does not, so Lit cannot wrap run-time input.
type literal string

// Lit is a compile-time constant taken as mrkdwn as written, for the bot's
// own wording (which may use *bold*, _italics_ and emoji codes).
func Lit(s literal) Text { return Text(s) }

// Escape makes plain text safe in mrkdwn: <!channel>, <@U…> and the like in
// it show literally and notify nobody.
func Escape(plain string) Text { return Text(EscapeText(plain)) }

// Code is s as inline code: escaped, backticks replaced, between backticks.
func Code(s string) Text { return Text("`" + InlineCode(s) + "`") }

// User is a mention of the Slack user id.
func User(id string) Text { return Text("<@" + EscapeText(id) + ">") }

// Channel is a link to the Slack channel id.
func Channel(id string) Text { return Text("<#" + EscapeText(id) + ">") }

// Date is t in each reader's time zone, with a UTC fallback (now if t is
// zero).
func Date(t time.Time) Text { return Text(DateString(t)) }

// Link is a link to an absolute http(s) or mailto URL with the plain label
// as its text; anything else shows escaped, so it cannot mention anyone.
func Link(u, label string) Text { return Text(slackLink(u, EscapeText(label))) }

// Join concatenates parts with sep between them.
func Join(parts []Text, sep Text) Text {
	ss := make([]string, len(parts))
	for i, p := range parts {
		ss[i] = string(p)
	}
	return Text(strings.Join(ss, string(sep)))
}

// FromMarkdown converts the model's Markdown to mrkdwn (see Mrkdwn).
func FromMarkdown(md string) Text { return Text(Mrkdwn(md)) }

// Truncate shortens t to at most n bytes without breaking a rune, an entity
// or a link, ending with an ellipsis when cut.
func (t Text) Truncate(n int) Text { return Text(Truncate(string(t), n)) }
