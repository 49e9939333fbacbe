package bot

import (
	"context"

	"github.com/slack-go/slack"
)

// Feedback on every answer (reference slack-agents-2026.md §4): the final
// message of a reply carries a context_actions block with Slack's
// feedback_buttons (👍/👎). A click is a block_actions like any button:
// it is counted (bobbin_feedback_total{value}), written to the audit
// stream, and acknowledged to the clicker alone; the message is left as
// it is (the client shows the pressed state itself). Slack sends the same
// payload for a second press of the same button (an un-vote) as for the
// first, so every press is recorded as a vote. The model never sees them.

// actionFeedback is the action id of the feedback buttons.
const actionFeedback = "bobbin_feedback"

// Values of the feedback buttons (bobbin_feedback_total's label).
const (
	feedbackPositive = "positive"
	feedbackNegative = "negative"
)

// auditFeedback is the audit event of a feedback click.
const auditFeedback = "feedback"

// feedbackBlock is the context_actions block with the 👍/👎 buttons.
func feedbackBlock() slack.Block {
	up := slack.NewFeedbackButton(slack.NewTextBlockObject(slack.PlainTextType, "👍", true, false), feedbackPositive).
		WithAccessibilityLabel("Good answer")
	down := slack.NewFeedbackButton(slack.NewTextBlockObject(slack.PlainTextType, "👎", true, false), feedbackNegative).
		WithAccessibilityLabel("Bad answer")
	return slack.NewContextActionsBlock("bobbin_feedback", slack.NewFeedbackButtonsBlockElement(actionFeedback, up, down))
}

// feedbackFor reports whether a piece of the reply gets the feedback
// buttons: the last piece of the final answer, in a message with blocks
// (a native stream's message, edited with markdown_text, cannot carry
// them; its stopStream does, stream_native.go).
func (r *streamer) feedbackFor(content string, live, markdownText bool) bool {
	return !live && !markdownText && r.finalPiece != "" && content == r.finalPiece
}

// feedbackClicked records a 👍/👎 click and thanks the clicker (only they
// see it).
func (b *Bot) feedbackClicked(ctx context.Context, cb slack.InteractionCallback, a *slack.BlockAction) {
	value := a.Value
	if value != feedbackPositive && value != feedbackNegative {
		return
	}
	team := cmpOr(cb.Team.ID, cb.User.TeamID)
	channel := cmpOr(cb.Channel.ID, cb.Container.ChannelID)
	thread := cmpOr(cb.Container.ThreadTs, cb.Message.ThreadTimestamp)
	b.m.Feedback.WithLabelValues(value).Inc()
	b.audit(ctx, team, map[string]string{
		"event": auditFeedback, "user": cb.User.ID, "channel": channel, "thread": thread,
		"message": cmpOr(cb.Container.MessageTs, cb.Message.Timestamp), "value": value,
	})
	text := "Thanks for the feedback."
	if value == feedbackNegative {
		text = "Thanks for telling me. I've noted that this answer missed the mark."
	}
	b.tell(ctx, cb, thread, text)
}
