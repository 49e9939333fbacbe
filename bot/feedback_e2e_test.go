package bot_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestE2EFeedback: every final answer, streamed with edits or natively,
// carries 👍/👎; a click is counted by value, written to the audit stream,
// thanked to the clicker alone, and leaves the message as it was.
func TestE2EFeedback(t *testing.T) {
	for _, mode := range []string{bot.StreamEdit, bot.StreamNative} {
		t.Run(mode, func(t *testing.T) {
			m := bot.NewMetrics(nil)
			h := newHarness(t, harnessOpts{bot: func(o *bot.Options) {
				o.StreamMode = mode
				o.Metrics = m
			}})
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
			before, _ := messageText(reply)

			click := func(user string, positive bool) {
				t.Helper()
				in, err := h.emu.ClickFeedback(slackemu.TeamID, user, slackemu.ChannelGen, reply.TS, "", positive)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if _, err := in.Wait(ctx); err != nil {
					t.Fatalf("feedback click: %v", err)
				}
			}
			click(slackemu.UserAlice, true)
			click(slackemu.UserBob, false)
			h.wait("thanks to both", func() bool {
				return len(h.emu.Ephemerals(slackemu.UserAlice)) == 1 && len(h.emu.Ephemerals(slackemu.UserBob)) == 1
			})
			if e := h.emu.Ephemerals(slackemu.UserAlice)[0]; !strings.Contains(e.Text, "Thanks") || e.Channel != slackemu.ChannelGen {
				t.Errorf("alice's acknowledgement = %+v", e)
			}
			if got, want := counterValue(m.Feedback.WithLabelValues("positive")), 1.0; got != want {
				t.Errorf("bobbin_feedback_total{value=positive} = %v, want %v", got, want)
			}
			if got, want := counterValue(m.Feedback.WithLabelValues("negative")), 1.0; got != want {
				t.Errorf("bobbin_feedback_total{value=negative} = %v, want %v", got, want)
			}
			entries, err := h.store.RecentAudit(context.Background(), slackemu.TeamID, 10)
			if err != nil {
				t.Fatal(err)
			}
			votes := map[string]string{}
			for _, e := range entries {
				if e.Fields["event"] == "feedback" {
					votes[e.Fields["user"]] = e.Fields["value"]
					if e.Fields["message"] != reply.TS || e.Fields["thread"] != p.TS {
						t.Errorf("audit entry %v does not name the answer %s in thread %s", e.Fields, reply.TS, p.TS)
					}
				}
			}
			if votes[slackemu.UserAlice] != "positive" || votes[slackemu.UserBob] != "negative" {
				t.Errorf("audited votes = %v", votes)
			}
			after, _ := h.emu.MessageAt(slackemu.ChannelGen, reply.TS)
			if got, _ := messageText(after); got != before || !bytes.Equal(after.Blocks, reply.Blocks) {
				t.Errorf("the message changed after the clicks: %q → %q", before, got)
			}
		})
	}
}
