package bot

import (
	"context"
	"time"

	"github.com/bobbinbot/bobbin/bot/stream"
	"github.com/bobbinbot/bobbin/session"
)

// newReply is the renderer of the reply to who in the thread of lease
// (bot/stream), guarded by the lease: it checks the lease before every
// Slack write (a Redis round trip only when the turn's own renewals have
// not vouched for it lately: session.Lease.Check) and records the reply's
// ts as soon as it is posted, so a replica that lost the thread (paused
// past its TTL, partitioned) stops writing at its first attempt, and the
// next holder finds the message to finish (takeover.go). sign (nil for
// none) learns when the reply first shows something; existing is a reply
// message to finish ("" for none).
func (b *Bot) newReply(lease *session.Lease, turnID string, who inbound, sign *lifeSign, existing string) *stream.Reply {
	k, fence := lease.Key(), lease.Token()
	ts := b.store
	return stream.New(stream.Options{
		API:            b.slack,
		Budget:         b.gov,
		Sessions:       &b.agents,
		Thread:         k,
		Requester:      who.User,
		Title:          threadTitle(who.Text),
		Mode:           stream.Mode(b.opts.StreamMode),
		EditInterval:   b.opts.EditInterval,
		StreamLifetime: b.opts.StreamLifetime,
		APIURL:         b.opts.APIURL,
		Feedback:       feedbackBlock(), // feedback.go
		Existing:       existing,
		Guard:          lease.Check,
		OnPost: func(ctx context.Context, msgTS string) {
			sign.shown()
			if err := ts.SaveReply(ctx, k, fence, turnID, msgTS); err != nil {
				b.log.Debug("bot: recording the reply ts failed", append(threadAttrs(k.Team, k.Channel, k.ThreadTS), "err", err)...)
			}
		},
		// Slack shows the thread working: that is the sign of life.
		OnWorking: sign.shown,
		// The person pressed Slack's own stop on a native stream.
		UserStopped: func() { b.cancels.cancel(k, stopCause{user: who.User}) },
		ToolCall:    func(decision, result string) { b.m.ToolCalls.WithLabelValues(decision, result).Inc() },
		FirstText:   func(d time.Duration) { b.m.FirstText.Observe(d.Seconds()) },
		Logger:      b.log,
	})
}
