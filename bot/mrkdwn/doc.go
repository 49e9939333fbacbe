// Package mrkdwn is Slack's escaped mrkdwn as a type. A Text is mrkdwn that
// is safe to send: only the constructors here produce one (Escape, Code,
// User, Channel, Date, Link, Join, Lit for constants, FromMarkdown), so model,
// tool or user output cannot reach a block as <!channel> by accident (the
// idea of html/template's template.HTML). It also converts the model's
// Markdown to mrkdwn (FromMarkdown, Live, Fallback), splits long answers
// within Slack's limits (Split) and builds the few Block Kit pieces that
// carry text (Section, Context, Button).
//
// It imports nothing of this module: bot and its feature packages import it.
// Of third-party code it uses goldmark (parsing Markdown) and slack-go (the
// Block Kit types only; it never calls the Web API).
package mrkdwn
