package mrkdwn

import "github.com/slack-go/slack"

// Object is t as a Block Kit mrkdwn text object (verbatim off: Slack still
// links URLs and names, which t's escaping keeps from notifying anyone).
func Object(t Text) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, string(t), false, false)
}

// Plain is s as a Block Kit plain_text object (Slack escapes nothing in
// plain text, so s needs no escaping).
func Plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
}

// Section is a section block showing t.
func Section(id string, t Text) *slack.SectionBlock {
	return slack.NewSectionBlock(Object(t), nil, nil, slack.SectionBlockOptionBlockID(id))
}

// Context is a context block with t as its one element.
func Context(id string, t Text) *slack.ContextBlock {
	return slack.NewContextBlock(id, Object(t))
}

// Button is a button with a plain-text label; style may be "" (default),
// slack.StylePrimary or slack.StyleDanger.
func Button(action, value, label string, style slack.Style) *slack.ButtonBlockElement {
	b := slack.NewButtonBlockElement(action, value, Plain(label))
	if style != "" {
		b = b.WithStyle(style)
	}
	return b
}
