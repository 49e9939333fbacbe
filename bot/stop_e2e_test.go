package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/session"
)

// TestE2EStopOnAnotherReplica: a Stop click that reaches a replica not
// running the turn stops it on the replica that does, through Redis. To
// route the click deterministically, the second replica has a Slack of its
// own (same workspace data, same Redis): the turn runs on the first, the
// click reaches only the second.
func TestE2EStopOnAnotherReplica(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	release := h.llm.Hold(3)
	defer release()

	emu2 := slackemu.New(slackemu.Options{NoRateLimits: true})
	t.Cleanup(emu2.Close)
	opts := h.opts
	opts.APIURL = emu2.APIURL()
	second, err := bot.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- second.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := emu2.WaitFor(ctx, func() bool { return second.Ready(context.Background()) == nil }); err != nil {
		t.Fatal(err)
	}

	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "a very long answer please", "")
	replyTS := h.waitLiveReply(slackemu.ChannelGen, p.TS)
	k := session.ThreadKey{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, ThreadTS: p.TS}
	click := func(user string) {
		t.Helper()
		in := emu2.ClickRaw(slackemu.TeamID, user, slackemu.ChannelGen, replyTS,
			map[string]any{"type": "button", "block_id": "stop", "action_id": "bobbin_stop", "value": k.String()})
		wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer wcancel()
		if _, err := in.Wait(wctx); err != nil {
			t.Fatalf("click by %s: %v", user, err)
		}
	}

	// Someone who may not stop it is refused there, and the turn goes on.
	click(slackemu.UserBob)
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	if err := emu2.WaitFor(wctx, func() bool { return len(emu2.Ephemerals(slackemu.UserBob)) > 0 }); err != nil {
		t.Fatalf("waiting for an explanation for bob: %v", err)
	}
	if text, _, done := h.replyText(slackemu.ChannelGen, p.TS); done || strings.Contains(text, "Stopped by") {
		t.Fatalf("bob's click stopped the answer: %q", text)
	}

	click(slackemu.UserAlice)
	got := h.waitReply(slackemu.ChannelGen, p.TS)
	if !strings.Contains(got, "Stopped by <@"+slackemu.UserAlice+">") {
		t.Errorf("reply after a Stop on the other replica = %q", got)
	}
	// The mention is live in what Slack renders (not escaped to &lt;@…).
	for _, m := range h.emu.BotReplies(slackemu.ChannelGen, p.TS) {
		if raw := string(m.Blocks) + m.MarkdownText; strings.Contains(raw, "Stopped by") && strings.Contains(raw, "&lt;@") {
			t.Errorf("the Stopped by footer does not mention %s live: %s", slackemu.UserAlice, raw)
		}
	}
	if n := len(emu2.Ephemerals(slackemu.UserAlice)); n != 0 {
		t.Errorf("alice got %d ephemeral notes for an allowed Stop", n)
	}
	// The request was consumed: the thread's next turn is not stopped.
	release()
	h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "and now a short one", p.TS)
	h.wait("the next answer", func() bool {
		text, _, done := h.replyText(slackemu.ChannelGen, p.TS)
		return done && strings.Count(text, "and now a short one") > 0
	})
	if text, _, _ := h.replyText(slackemu.ChannelGen, p.TS); strings.Count(text, "Stopped by") != 1 {
		t.Errorf("thread after the next turn = %q", text)
	}
}
