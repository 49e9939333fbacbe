package bot

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// Feedback on every answer (reference slack-agents-2026.md §4): the final
// message of a reply carries a context_actions block with Slack's
// feedback_buttons (👍/👎). A click is a block_actions like any button:
// it is counted (bobbin_feedback_total{value}), stored as the clicker's
// vote on that answer (session/feedback.go: one per person per answer,
// the last click wins), written to the audit stream, and acknowledged to
// the clicker alone; the message is left as it is (the client shows the
// pressed state itself). A 👎 also opens an optional "What went wrong?"
// modal whose text is kept with the vote. Slack sends the same payload for
// a second press of the same button (an un-vote) as for the first, so
// every press is recorded as a vote. /bobbin feedback shows admins the
// last 7 days and bobbin_feedback_votes{value} counts the same votes. The
// model never sees them.

// actionFeedback is the action id of the feedback buttons.
const actionFeedback = "bobbin_feedback"

// Values of the feedback buttons (bobbin_feedback_total's label).
const (
	feedbackPositive = session.VotePositive
	feedbackNegative = session.VoteNegative
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

// feedbackStore is the store side of feedback votes (session/feedback.go).
type feedbackStore interface {
	Vote(ctx context.Context, team string, v session.Vote) error
	VoteReason(ctx context.Context, team, channel, messageTS, user, reason string) (bool, error)
	VotesSince(ctx context.Context, team string, since time.Time) ([]session.Vote, error)
	VotingTeams(ctx context.Context, since time.Time) ([]string, error)
}

// feedbackWindow is how far back bobbin_feedback_votes (and
// /bobbin feedback, bot/admin) look.
const feedbackWindow = 7 * 24 * time.Hour

// The "What went wrong?" modal.
const (
	callbackFeedbackReason = "bobbin_feedback_reason"
	blockFeedbackReason    = "feedback_reason"
	actionFeedbackReason   = "reason"
	auditFeedbackReason    = "feedback_reason"
)

// feedbackTarget is the modal's private_metadata: the answer voted on.
type feedbackTarget struct {
	Channel string `json:"c"`
	Message string `json:"m"`
	Thread  string `json:"t,omitempty"`
}

// feedbackClicked records a 👍/👎 click as the clicker's vote, thanks
// them (only they see it) and, for a 👎, asks what went wrong.
func (b *Bot) feedbackClicked(ctx context.Context, cb slack.InteractionCallback, a *slack.BlockAction) {
	value := a.Value
	if value != feedbackPositive && value != feedbackNegative {
		return
	}
	team := cmpOr(cb.Team.ID, cb.User.TeamID)
	channel := cmpOr(cb.Channel.ID, cb.Container.ChannelID)
	thread := cmpOr(cb.Container.ThreadTs, cb.Message.ThreadTimestamp)
	message := cmpOr(cb.Container.MessageTs, cb.Message.Timestamp)
	b.m.Feedback.WithLabelValues(value).Inc()
	if err := b.store.Vote(ctx, team, session.Vote{
		Channel: channel, MessageTS: message, User: cb.User.ID, ThreadTS: thread, Value: value,
	}); err != nil {
		b.log.Warn("bot: storing a feedback vote failed", append(threadAttrs(team, channel, thread), "err", err)...)
	}
	b.audit(ctx, team, map[string]string{
		"event": auditFeedback, "user": cb.User.ID, "channel": channel, "thread": thread,
		"message": message, "value": value,
	})
	if value == feedbackNegative && cb.TriggerID != "" {
		meta, _ := json.Marshal(feedbackTarget{Channel: channel, Message: message, Thread: thread})
		err := b.slack.Do(ctx, slackapi.Call{Team: team, Method: slackapi.ViewsOpen}, func(ctx context.Context, api *slack.Client) error {
			_, err := api.OpenViewContext(ctx, cb.TriggerID, feedbackModal(string(meta)))
			return err
		})
		if err != nil {
			b.log.Warn("bot: opening the feedback form failed", append(threadAttrs(team, channel, thread), "err", err)...)
		}
	}
	text := "Thanks for the feedback."
	if value == feedbackNegative {
		text = "Thanks for telling me. I've noted that this answer missed the mark."
	}
	b.tell(ctx, cb, thread, text)
}

// feedbackModal asks what went wrong; the answer is optional.
func feedbackModal(meta string) slack.ModalViewRequest {
	pt := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
	}
	in := slack.NewPlainTextInputBlockElement(pt("The answer was wrong, incomplete, too long…"), actionFeedbackReason)
	in.Multiline = true
	in.MaxLength = session.FeedbackReasonMax
	block := slack.NewInputBlock(blockFeedbackReason, pt("What went wrong?"), pt("Optional. Admins see it in /bobbin feedback; I don't."), in)
	block.Optional = true
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		CallbackID:      callbackFeedbackReason,
		Title:           pt("Feedback"),
		Submit:          pt("Send"),
		Close:           pt("Skip"),
		PrivateMetadata: meta,
		Blocks:          slack.Blocks{BlockSet: []slack.Block{block}},
	}
}

// feedbackReasonSubmitted keeps the modal's text with the person's 👎 and
// closes the modal (an empty ack).
func (b *Bot) feedbackReasonSubmitted(ctx context.Context, cb slack.InteractionCallback) any {
	var to feedbackTarget
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &to); err != nil || to.Channel == "" || to.Message == "" {
		b.log.Warn("bot: malformed feedback form metadata")
		return nil
	}
	reason := ""
	if cb.View.State != nil {
		reason = strings.TrimSpace(cb.View.State.Values[blockFeedbackReason][actionFeedbackReason].Value)
	}
	if reason == "" {
		return nil
	}
	team := cmpOr(cb.Team.ID, cb.User.TeamID)
	ok, err := b.store.VoteReason(ctx, team, to.Channel, to.Message, cb.User.ID, reason)
	if err != nil {
		b.log.Warn("bot: storing a feedback reason failed", append(threadAttrs(team, to.Channel, to.Thread), "err", err)...)
		return nil
	}
	if ok {
		b.audit(ctx, team, map[string]string{
			"event": auditFeedbackReason, "user": cb.User.ID, "channel": to.Channel, "thread": to.Thread,
			"message": to.Message, "chars": strconv.Itoa(len([]rune(reason))),
		})
	}
	return nil
}

// feedbackTotals counts the current votes of the last 7 days over every
// workspace (bobbin_feedback_votes).
func (b *Bot) feedbackTotals(ctx context.Context) (pos, neg int, err error) {
	since := time.Now().Add(-feedbackWindow)
	teams, err := b.store.VotingTeams(ctx, since)
	if err != nil {
		return 0, 0, err
	}
	for _, team := range teams {
		votes, err := b.store.VotesSince(ctx, team, since)
		if err != nil {
			return 0, 0, err
		}
		p, n := session.CountVotes(votes)
		pos, neg = pos+p, neg+n
	}
	return pos, neg, nil
}

// feedbackVotes is bobbin_feedback_votes{value}: the current votes of the
// last 7 days, read from the store at each scrape so every replica reports
// what /bobbin feedback shows.
type feedbackVotes struct {
	desc *prometheus.Desc
	src  atomic.Pointer[func(context.Context) (pos, neg int, err error)]
}

func newFeedbackVotes() *feedbackVotes {
	return &feedbackVotes{desc: prometheus.NewDesc("bobbin_feedback_votes",
		"Current 👍/👎 votes on answers of the last 7 days over all workspaces, by value (positive or negative); one per person per answer.",
		[]string{"value"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *feedbackVotes) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector. A store error leaves the
// series out of this scrape (the bot logs it) rather than failing it.
func (c *feedbackVotes) Collect(ch chan<- prometheus.Metric) {
	f := c.src.Load()
	if f == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	pos, neg, err := (*f)(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(pos), feedbackPositive)
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(neg), feedbackNegative)
}

// collectFeedbackVotes makes the gauge read b's store.
func (b *Bot) collectFeedbackVotes() {
	f := func(ctx context.Context) (int, int, error) {
		pos, neg, err := b.feedbackTotals(ctx)
		if err != nil {
			b.log.Warn("bot: counting feedback votes for /metrics failed", "err", err)
		}
		return pos, neg, err
	}
	b.m.FeedbackVotes.src.Store(&f)
}
