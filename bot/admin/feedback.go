package admin

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/session"
)

// /bobbin feedback: the votes on answers (the buttons and the votes are
// the root's, feedback.go; the store keeps them, session/feedback.go).

// feedbackWindow is how far back /bobbin feedback looks (as the root's
// bobbin_feedback_votes does).
const feedbackWindow = 7 * 24 * time.Hour

// feedbackHelp is /bobbin feedback's line in /bobbin help.
const feedbackHelp = "• `/bobbin feedback`: 👍/👎 on my answers in the last 7 days, with the threads that went worst and why _(admins)_\n"

// feedbackThread is one thread of /bobbin feedback.
type feedbackThread struct {
	channel, thread, message string
	pos, neg                 int
	last                     time.Time
	reasons                  []session.Vote
}

// Bounds of /bobbin feedback.
const (
	feedbackWorst      = 5
	feedbackReasonsPer = 3
	feedbackReasonShow = 300
)

// feedbackReport is /bobbin feedback: the workspace's votes of the last 7
// days and the threads with the most 👎, with links and reasons (escaped:
// reasons are people's text).
func (a *Admin) feedbackReport(ctx context.Context, team string) string {
	votes, err := a.o.Store.VotesSince(ctx, team, time.Now().Add(-feedbackWindow))
	if err != nil {
		a.log.Warn("bot: reading feedback votes failed", "team", team, "err", err)
		return "I couldn't read the feedback just now. Please try again in a moment."
	}
	pos, neg := session.CountVotes(votes)
	var s strings.Builder
	fmt.Fprintf(&s, "*Feedback on my answers, last 7 days*\n👍 %d · 👎 %d\n", pos, neg)
	if len(votes) == 0 {
		s.WriteString("No votes yet. Every answer has 👍/👎 buttons under it.")
		return s.String()
	}
	byThread := map[string]*feedbackThread{}
	for _, v := range votes {
		thread := cmp.Or(v.ThreadTS, v.MessageTS)
		k := v.Channel + ":" + thread
		t := byThread[k]
		if t == nil {
			t = &feedbackThread{channel: v.Channel, thread: thread, message: v.MessageTS}
			byThread[k] = t
		}
		if v.Value == session.VoteNegative {
			t.neg++
			t.message = v.MessageTS
			if v.Reason != "" {
				t.reasons = append(t.reasons, v)
			}
		} else {
			t.pos++
		}
		if v.At.After(t.last) {
			t.last = v.At
		}
	}
	var worst []*feedbackThread
	for _, t := range byThread {
		if t.neg > 0 {
			worst = append(worst, t)
		}
	}
	slices.SortFunc(worst, func(x, y *feedbackThread) int {
		return cmp.Or(cmp.Compare(y.neg, x.neg), cmp.Compare(x.pos, y.pos), y.last.Compare(x.last))
	})
	if len(worst) == 0 {
		s.WriteString("No 👎 in this time.")
		return s.String()
	}
	if len(worst) > feedbackWorst {
		worst = worst[:feedbackWorst]
	}
	s.WriteString("*Threads with the most 👎*\n")
	for _, t := range worst {
		fmt.Fprintf(&s, "• <#%s> <%s|thread %s>: 👎 %d · 👍 %d\n", t.channel, feedbackLink(t.channel, t.thread, t.message),
			mrkdwn.EscapeText(t.thread), t.neg, t.pos)
		rs := t.reasons
		slices.SortFunc(rs, func(x, y session.Vote) int { return y.At.Compare(x.At) })
		if len(rs) > feedbackReasonsPer {
			rs = rs[:feedbackReasonsPer]
		}
		for _, r := range rs {
			reason := strings.Join(strings.Fields(mrkdwn.ClipRunes(r.Reason, feedbackReasonShow)), " ")
			fmt.Fprintf(&s, "    <@%s>: “%s”\n", r.User, mrkdwn.EscapeText(reason))
		}
	}
	return s.String()
}

// feedbackLink is a link to the answer voted on in its thread (Slack
// resolves slack.com/archives links to the workspace of whoever opens it).
func feedbackLink(channel, thread, message string) string {
	u := "https://slack.com/archives/" + url.PathEscape(channel) + "/p" + strings.ReplaceAll(message, ".", "")
	if thread != "" && thread != message {
		u += "?thread_ts=" + url.QueryEscape(thread) + "&cid=" + url.QueryEscape(channel)
	}
	return u
}
