package bot

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// A sign of life for every mention within a second, at any load (issue
// 23). Under load most replies hold no live slot: they are posted once,
// complete, when the answer is done, and showed nothing until then. Now a
// reply that shows nothing signDelay after the message arrived puts an
// :eyes: reaction on the person's message (reactions.add: a budget the
// answers do not use), taken off again (reactions.remove, its own budget)
// as soon as the reply shows something. When the reactions budget cannot
// serve the sign in time, the person gets a short ephemeral note instead
// (chat.postEphemeral, Tier 4, also not the answers' budget). Assistant
// threads have their status line (assistant.threads.setStatus) instead.
// Where the workspace has agent sessions, the thread's session status
// ("processing", agents.sessions.setStatus, bot/stream) is a sign too:
// once Slack accepted it the reply counts as shown, so no reaction or
// note is spent on it and they stay for the threads that need them.

// signDelay is how long a reply may show nothing before the sign goes
// up: early enough that the sign (after at most signReactWait for the
// reaction's budget) is visible within a second.
const signDelay = 600 * time.Millisecond

// signReaction is the reaction that says "seen, working on it" (the same
// the bot puts on queued messages).
const signReaction = "eyes"

// signNote is the ephemeral note when no reaction could be added in time.
const signNote = "Working on it: the answer will appear in this thread."

// lifeSign is one reply's sign of life.
type lifeSign struct {
	b         *Bot
	team      string
	channel   string
	ts        string // the person's message
	user      string
	thread    string
	shownOnce sync.Once
	shownC    chan struct{} // closed when the reply shows something
	doneC     chan struct{} // closed when the turn is over
	doneOnce  sync.Once
}

// startSign arms the sign for the reply to m in thread k; the reply
// calls shown when it first posts (newReply). It returns nil when m needs
// none (assistant threads show their status line; no message ts).
func (b *Bot) startSign(ctx context.Context, k session.ThreadKey, m inbound) *lifeSign {
	if strings.HasPrefix(k.Channel, "D") || m.TS == "" || m.Channel == "" {
		return nil
	}
	s := &lifeSign{
		b: b, team: k.Team, channel: m.Channel, ts: m.TS, user: m.User, thread: k.ThreadTS,
		shownC: make(chan struct{}), doneC: make(chan struct{}),
	}
	received := m.Received
	if received.IsZero() {
		received = time.Now()
	}
	b.workers.Go(func() { s.run(context.WithoutCancel(ctx), received) })
	return s
}

// shown notes that the reply shows something (nil-safe).
func (s *lifeSign) shown() {
	if s != nil {
		s.shownOnce.Do(func() { close(s.shownC) })
	}
}

// done ends the sign: the reply is complete (nil-safe).
func (s *lifeSign) done() {
	if s != nil {
		s.shown()
		s.doneOnce.Do(func() { close(s.doneC) })
	}
}

// signReactWait bounds how long the reaction waits for budget before the
// note goes instead.
const signReactWait = 250 * time.Millisecond

// signNoteWait bounds how long the ephemeral note waits for budget.
const signNoteWait = 5 * time.Second

// signWork bounds the sign's calls, the reaction's removal included.
const signWork = 30 * time.Second

func (s *lifeSign) run(ctx context.Context, received time.Time) {
	ctx, cancel := context.WithTimeout(ctx, signWork)
	defer cancel()
	t := time.NewTimer(max(time.Until(received.Add(signDelay)), 0))
	defer t.Stop()
	select {
	case <-s.shownC:
		return
	case <-s.doneC:
		return
	case <-ctx.Done():
		return
	case <-t.C:
	}
	// The reaction waits for budget only briefly: when the reactions
	// budget has no token now, the ephemeral note goes at once instead
	// (its own budget), unless the reply shows by then.
	due := time.Now().Add(signReactWait)
	rctx, rcancel := context.WithDeadline(ctx, due)
	c := slackapi.Call{Team: s.team, Method: slackapi.ReactionsAdd}
	err := s.b.slack.Do(rctx, c, func(ctx context.Context, api *slack.Client) error {
		return api.AddReactionContext(ctx, signReaction, slack.NewRefToMessage(s.channel, s.ts))
	})
	rcancel()
	var se slack.SlackErrorResponse
	reacted := err == nil || errors.As(err, &se) && se.Err == "already_reacted"
	if !reacted {
		nctx, ncancel := context.WithTimeout(ctx, signNoteWait)
		defer ncancel()
		nc := slackapi.Call{Team: s.team, Method: slackapi.ChatPostEphemeral}
		msg := slackapi.Msg{Text: mrkdwn.Escape(signNote), Thread: s.thread}
		sent := false
		err := s.b.slack.Do(nctx, nc, func(ctx context.Context, api *slack.Client) error {
			select {
			case <-s.shownC: // shown meanwhile: no note needed
				return nil
			default:
			}
			sent = true
			_, err := api.PostEphemeralContext(ctx, s.channel, s.user, msg.Options()...)
			return err
		})
		switch {
		case err != nil:
			s.b.log.Debug("bot: sign of life not shown", "err", err)
		case sent:
			s.b.m.Signs.WithLabelValues("note").Inc()
		}
		return
	}
	s.b.m.Signs.WithLabelValues("reaction").Inc()
	select {
	case <-s.shownC:
	case <-ctx.Done():
		return
	}
	rc := slackapi.Call{Team: s.team, Method: slackapi.ReactionsRemove, Prio: slackapi.Lossy,
		Merge: s.channel + ":" + s.ts + ":-" + signReaction, Wait: signWork / 2}
	err = s.b.slack.Do(ctx, rc, func(ctx context.Context, api *slack.Client) error {
		return api.RemoveReactionContext(ctx, signReaction, slack.NewRefToMessage(s.channel, s.ts))
	})
	if err != nil {
		s.b.log.Debug("bot: sign of life not taken off", "err", err)
	}
}
