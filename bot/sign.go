package bot

import (
	"context"
	"errors"
	"slices"
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
// reply that shows nothing signDelay after the message arrived gets a
// sign, from budgets the answers do not compete for, each tried at once
// and in this order (the first with a token now goes up; only when every
// one is spent does the sign wait for whichever refills first):
//   - an :eyes: reaction on the person's message (reactions.add), taken
//     off again (reactions.remove, its own budget) once the reply shows;
//   - an ephemeral note to the person (chat.postEphemeral, Tier 4);
//   - a placeholder message in the thread (chat.postMessage: the
//     channel's posting budget, as a lossy call that leaves the answers a
//     token), deleted (chat.delete, its own budget) once the reply shows.
// Twenty mentions at once in one workspace need all three: Slack's bursts
// are about five reactions and ten notes.
// Assistant threads have their status line (assistant.threads.setStatus)
// instead. Where the workspace has agent sessions, the thread's session
// status ("processing", agents.sessions.setStatus, bot/stream) is a sign
// too: once Slack accepted it the reply counts as shown, so no other sign
// is spent on it and they stay for the threads that need them.

// signDelay is how long a reply may show nothing before the sign goes
// up: late enough that replies which show text at once spend no sign,
// early enough that a sign whose budgets are briefly spent still goes up
// within the second.
const signDelay = 600 * time.Millisecond

// signReaction is the reaction that says "seen, working on it" (the same
// the bot puts on queued messages).
const signReaction = "eyes"

// signNote is the ephemeral note when no reaction could be added, and the
// text of the placeholder message when neither could.
const signNote = "Working on it: the answer will appear in this thread."

// SignBlockID marks the placeholder message (the last kind of sign): it is
// deleted once the reply shows.
const SignBlockID = "bobbin_sign"

// The kinds of sign, cheapest to the person first (the metric's labels).
const (
	signKindReaction    = "reaction"
	signKindNote        = "note"
	signKindPlaceholder = "placeholder"
)

// lifeSign is one reply's sign of life.
type lifeSign struct {
	b         *Bot
	team      string
	channel   string
	ts        string // the person's message
	user      string
	thread    string
	shownOnce sync.Once
	shownC    chan struct{} // closed when the reply shows something or the turn is over
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
		shownC: make(chan struct{}),
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

// done ends the sign: the turn is over, whatever the reply showed
// (nil-safe). A sign not up yet stays down; one up comes off.
func (s *lifeSign) done() { s.shown() }

// signPatience bounds how long, after signDelay, a sign keeps trying for
// budget when every kind is spent; past it the answer is usually there.
const signPatience = 5 * time.Second

// signWork bounds putting the sign up.
const signWork = 30 * time.Second

// signTakeOff bounds taking the sign off once the reply shows: many signs
// may come off together (forty answers ending at once), each waiting its
// turn in its method's budget (Tier 3: about 45 a minute).
const signTakeOff = 2 * time.Minute

// signTryWait is how long one try waits for its budget: long enough to
// queue behind the other signs asking at the same moment (one round trip
// to the shared budget each), short enough that three kinds tried in turn
// still go up within the second.
const signTryWait = 60 * time.Millisecond

// signPoll bounds the pause between two rounds of tries when every
// budget is spent (the budgets say when they have a token again).
const (
	signPollMin = 20 * time.Millisecond
	signPollMax = 250 * time.Millisecond
)

func (s *lifeSign) run(ctx context.Context, received time.Time) {
	kind, posted := s.putUp(ctx, received)
	if kind == "" || kind == signKindNote {
		return // none went up, or an ephemeral note: it cannot be taken back
	}
	// However long the turn shows nothing: done (deferred by the turn)
	// closes shownC at the latest. (ctx carries values only: startSign
	// detached it from the turn's cancellation.)
	<-s.shownC
	tctx, cancel := context.WithTimeout(ctx, signTakeOff)
	defer cancel()
	s.takeOff(tctx, kind, posted)
}

// putUp puts the sign up once the reply has shown nothing for signDelay:
// the kind that went up ("" for none) and the placeholder's ts.
func (s *lifeSign) putUp(ctx context.Context, received time.Time) (kind, posted string) {
	ctx, cancel := context.WithTimeout(ctx, signWork)
	defer cancel()
	if !s.quietUntil(ctx, received.Add(signDelay)) {
		return "", ""
	}
	// Every kind is tried once, in order, waiting only for the signs
	// asking at the same moment: the first whose budget has a token goes
	// up. Only when all are spent does the sign wait, for whichever
	// budget has a token first.
	kinds := []string{signKindReaction, signKindNote, signKindPlaceholder}
	giveUp := time.Now().Add(signPatience)
	for {
		next := signPollMax
		for i := 0; i < len(kinds); i++ {
			ts, err := s.try(ctx, kinds[i])
			var be slackapi.BudgetError
			switch {
			case errors.Is(err, errShown):
				return "", ""
			case err == nil:
				s.b.m.Signs.WithLabelValues(kinds[i]).Inc()
				return kinds[i], ts
			case errors.As(err, &be):
				next = min(next, be.Wait)
			case errors.Is(err, slackapi.ErrDropped):
			default:
				// Slack refused this kind here (no reactions in the
				// channel, say): the next kind serves this mention.
				s.b.log.Debug("bot: a sign of life was refused", "kind", kinds[i], "err", err)
				kinds = slices.Delete(kinds, i, i+1)
				i--
			}
		}
		if len(kinds) == 0 || time.Now().After(giveUp) {
			s.b.log.Debug("bot: sign of life not shown: no budget in time")
			return "", ""
		}
		if !s.quietUntil(ctx, time.Now().Add(max(next, signPollMin))) {
			return "", ""
		}
	}
}

// quietUntil waits until t; false when the reply showed something (or
// the turn ended) or ctx ended first.
func (s *lifeSign) quietUntil(ctx context.Context, t time.Time) bool {
	tm := time.NewTimer(max(time.Until(t), 0))
	defer tm.Stop()
	select {
	case <-s.shownC:
		return false
	case <-ctx.Done():
		return false
	case <-tm.C:
	}
	select { // (a timer already due races the other cases)
	case <-s.shownC:
		return false
	default:
		return ctx.Err() == nil
	}
}

// errShown: the reply showed something before the sign went up.
var errShown = errors.New("bot: the reply showed before the sign")

// try puts up one kind of sign if its budget has a token within
// signTryWait (a lossy call): nil when it went up (ts is the
// placeholder's), slackapi.ErrDropped (a BudgetError when the budget
// said when) when the budget is spent, errShown when the reply showed
// meanwhile, or Slack's refusal.
func (s *lifeSign) try(ctx context.Context, kind string) (ts string, err error) {
	c := slackapi.Call{Team: s.team, Prio: slackapi.Lossy, Wait: signTryWait}
	var fn func(ctx context.Context, api *slack.Client) error
	switch kind {
	case signKindReaction:
		c.Method = slackapi.ReactionsAdd
		fn = func(ctx context.Context, api *slack.Client) error {
			err := api.AddReactionContext(ctx, signReaction, slack.NewRefToMessage(s.channel, s.ts))
			var se slack.SlackErrorResponse
			if errors.As(err, &se) && se.Err == "already_reacted" {
				return nil
			}
			return err
		}
	case signKindNote:
		c.Method = slackapi.ChatPostEphemeral
		msg := slackapi.Msg{Text: mrkdwn.Escape(signNote), Thread: s.thread}
		fn = func(ctx context.Context, api *slack.Client) error {
			_, err := api.PostEphemeralContext(ctx, s.channel, s.user, msg.Options()...)
			return err
		}
	default:
		// The placeholder spends the channel's posting budget, which the
		// answers use too; as a lossy call it leaves them a token.
		c.Method, c.Channel = slackapi.ChatPostMessage, s.channel
		msg := slackapi.Msg{Text: mrkdwn.Escape(signNote), Thread: s.thread, Blocks: []slack.Block{
			slack.NewContextBlock(SignBlockID, slack.NewTextBlockObject(slack.MarkdownType, "_"+mrkdwn.EscapeText(signNote)+"_", false, false)),
		}}
		fn = func(ctx context.Context, api *slack.Client) error {
			var err error
			_, ts, err = api.PostMessageContext(ctx, s.channel, msg.Options()...)
			return err
		}
	}
	err = s.b.slack.Do(ctx, c, func(ctx context.Context, api *slack.Client) error {
		select {
		case <-s.shownC: // shown meanwhile: no sign needed
			return errShown
		default:
		}
		return fn(ctx, api)
	})
	return ts, err
}

// takeOff removes a sign once the reply shows: the reaction
// (reactions.remove) or the placeholder message (chat.delete), each on
// its own budget.
func (s *lifeSign) takeOff(ctx context.Context, kind, posted string) {
	var err error
	switch kind {
	case signKindReaction:
		// Must-deliver, within ctx: reactions.remove is no answer's
		// budget, and a lossy call could be dropped and leave the sign.
		rc := slackapi.Call{Team: s.team, Method: slackapi.ReactionsRemove}
		err = s.b.slack.Do(ctx, rc, func(ctx context.Context, api *slack.Client) error {
			return api.RemoveReactionContext(ctx, signReaction, slack.NewRefToMessage(s.channel, s.ts))
		})
	case signKindPlaceholder:
		dc := slackapi.Call{Team: s.team, Method: slackapi.ChatDelete}
		err = s.b.slack.Do(ctx, dc, func(ctx context.Context, api *slack.Client) error {
			_, _, err := api.DeleteMessageContext(ctx, s.channel, posted)
			return err
		})
	}
	if err != nil {
		s.b.log.Debug("bot: sign of life not taken off", "kind", kind, "err", err)
	}
}
