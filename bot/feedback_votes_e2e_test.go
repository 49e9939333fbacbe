package bot_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/session"
)

// TestE2EFeedbackVotes: votes are stored one per person per answer (the
// last click wins), a 👎 opens the "What went wrong?" form whose text is
// kept with the vote, /bobbin feedback shows admins the counts and the
// worst thread with its escaped reason, /metrics agrees, and others are
// refused.
func TestE2EFeedbackVotes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := bot.NewMetrics(reg)
	h := newHarness(t, harnessOpts{bot: func(o *bot.Options) { o.Metrics = m }})
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "rate this answer", "")
	var reply slackemu.Message
	h.wait("an answer with feedback buttons", func() bool {
		_, _, done := h.replyText(slackemu.ChannelGen, p.TS)
		r := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
		if !done || len(r) == 0 {
			return false
		}
		reply = r[len(r)-1]
		return bytes.Contains(reply.Blocks, []byte(`"feedback_buttons"`))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	click := func(user string, positive bool) {
		t.Helper()
		in, err := h.emu.ClickFeedback(slackemu.TeamID, user, slackemu.ChannelGen, reply.TS, "", positive)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.Wait(ctx); err != nil {
			t.Fatalf("feedback click: %v", err)
		}
	}
	votes := func() map[string]session.Vote {
		t.Helper()
		vs, err := h.store.VotesSince(ctx, slackemu.TeamID, time.Now().Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]session.Vote{}
		for _, v := range vs {
			if _, dup := out[v.User]; dup {
				t.Errorf("two votes of %s stored: %+v", v.User, vs)
			}
			out[v.User] = v
		}
		return out
	}

	click(slackemu.UserAlice, true)
	if views := h.emu.Views(slackemu.TeamID, slackemu.UserAlice); len(views) != 0 {
		t.Errorf("a 👍 opened %d views, want none", len(views))
	}
	click(slackemu.UserAlice, false)
	click(slackemu.UserBob, true)
	got := votes()
	if len(got) != 2 || got[slackemu.UserAlice].Value != "negative" || got[slackemu.UserBob].Value != "positive" {
		t.Fatalf("after 👍 then 👎 by alice and 👍 by bob, stored votes = %+v; want alice negative, bob positive", got)
	}
	if v := got[slackemu.UserAlice]; v.MessageTS != reply.TS || v.ThreadTS != p.TS || v.Channel != slackemu.ChannelGen {
		t.Errorf("alice's vote = %+v, want answer %s in thread %s", v, reply.TS, p.TS)
	}

	views := h.emu.Views(slackemu.TeamID, slackemu.UserAlice)
	if len(views) != 1 || views[0].CallbackID != "bobbin_feedback_reason" {
		t.Fatalf("after alice's 👎: views %+v, want the feedback form", views)
	}
	const reason = "<!channel> the *numbers* were wrong & <https://evil.example|click>"
	sub, err := h.emu.SubmitView(slackemu.TeamID, slackemu.UserAlice, views[0].ID, map[string]map[string]string{
		"feedback_reason": {"reason": reason},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sub.Wait(ctx); err != nil || res.ResponseAction != "" {
		t.Fatalf("form submission: %+v, %v; want it closed", res, err)
	}
	if v := votes()[slackemu.UserAlice]; v.Reason != reason {
		t.Errorf("stored reason = %q, want %q", v.Reason, reason)
	}

	slash := func(user, text string) string {
		t.Helper()
		in := h.emu.SlashCommand(slackemu.TeamID, slackemu.ChannelGen, user, "/bobbin", text)
		res, err := in.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res.Text
	}
	report := slash(slackemu.UserAdmin, "feedback")
	for _, want := range []string{"👍 1 · 👎 1", "&lt;!channel&gt; the *numbers* were wrong &amp; &lt;https://evil.example|click&gt;",
		"https://slack.com/archives/" + slackemu.ChannelGen + "/p" + strings.ReplaceAll(reply.TS, ".", ""), "<@" + slackemu.UserAlice + ">"} {
		if !strings.Contains(report, want) {
			t.Errorf("/bobbin feedback = %q, want it to contain %q", report, want)
		}
	}
	if strings.Contains(report, "<!channel>") || strings.Contains(report, "<https://evil") {
		t.Errorf("/bobbin feedback shows the reason unescaped: %q", report)
	}
	if r := slash(slackemu.UserBob, "feedback"); !strings.Contains(r, "Only workspace admins") {
		t.Errorf("/bobbin feedback by a member = %q, want the admin-only refusal", r)
	}
	if r := slash(slackemu.UserAlice, "help"); !strings.Contains(r, "/bobbin feedback") {
		t.Errorf("/bobbin help does not list /bobbin feedback: %q", r)
	}

	gauge := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "bobbin_feedback_votes" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "value" {
					gauge[l.GetValue()] = mt.GetGauge().GetValue()
				}
			}
		}
	}
	if gauge["positive"] != 1 || gauge["negative"] != 1 {
		t.Errorf("bobbin_feedback_votes = %v, want positive 1 and negative 1 as /bobbin feedback shows", gauge)
	}

	// A later 👍 replaces alice's 👎 and drops its reason.
	click(slackemu.UserAlice, true)
	if v := votes()[slackemu.UserAlice]; v.Value != "positive" || v.Reason != "" {
		t.Errorf("after alice's 👍: her vote = %+v, want positive without a reason", v)
	}
	if r := slash(slackemu.UserAdmin, "feedback"); !strings.Contains(r, "👍 2 · 👎 0") {
		t.Errorf("/bobbin feedback after the change = %q, want 👍 2 · 👎 0", r)
	}
}
