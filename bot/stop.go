package bot

import (
	"context"
	"errors"
	"strings"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/session"
)

// stopClicked handles the Stop button. The same people may stop a turn as
// may approve its tool calls (people.MayStop); anyone else is told why nothing
// happened.
func (b *Bot) stopClicked(ctx context.Context, cb slack.InteractionCallback, value string) {
	k, ok := parseThreadKey(value)
	if !ok || k.Team != cb.Team.ID {
		return
	}
	user := cb.User.ID
	meta, requester, err := b.requesterOf(ctx, k)
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		b.log.Warn("bot: reading the session for a Stop click failed", append(threadAttrs(k.Team, k.Channel, k.ThreadTS), "err", err)...)
		b.tell(ctx, cb, k.ThreadTS, "I couldn't reach this answer's state just now, so nothing happened. Please try again in a moment.")
		return
	}
	if ok, why := b.people.MayStop(ctx, k.Team, user, cb.User.TeamID, requester); !ok {
		b.tell(ctx, cb, k.ThreadTS, why)
		return
	}
	if b.cancels.cancel(k, stopCause{user: user}) {
		return
	}
	// Not running here: the replica that runs it stops it (stopreq.go).
	b.log.Debug("bot: stop clicked for a turn not running here", threadAttrs(k.Team, k.Channel, k.ThreadTS)...)
	if err := b.requestStop(ctx, k, meta, user); err != nil {
		b.log.Warn("bot: recording a stop request failed", append(threadAttrs(k.Team, k.Channel, k.ThreadTS), "err", err)...)
		b.tell(ctx, cb, k.ThreadTS, "I couldn't stop this answer just now. Please try again in a moment.")
		return
	}
	b.ask.Withdraw(ctx, k, user) // prompts and questions the turn waits on elsewhere
}

// requesterOf returns the session's metadata and current requester. A
// Stop click is answered before its ack, so it reads the metadata alone
// (a long transcript is not needed for this).
func (b *Bot) requesterOf(ctx context.Context, k session.ThreadKey) (session.Meta, string, error) {
	meta, err := b.store.LoadMeta(ctx, k)
	return meta, meta.RequesterID, err
}

// parseThreadKey reads "team:channel:thread_ts" (session.ThreadKey.String).
func parseThreadKey(s string) (session.ThreadKey, bool) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return session.ThreadKey{}, false
	}
	return session.ThreadKey{Team: parts[0], Channel: parts[1], ThreadTS: parts[2]}, true
}
