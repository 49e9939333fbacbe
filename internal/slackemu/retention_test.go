package slackemu_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestRetentionBounds: with the retention options a long-lived server
// keeps a bounded number of messages per channel, versions per message,
// journal entries, ephemerals and statuses.
func TestRetentionBounds(t *testing.T) {
	opts := fastOpts()
	opts.NoRateLimits = true
	opts.MessageLimit, opts.VersionLimit, opts.JournalLimit = 5, 3, 10
	emu := newEmu(t, opts)
	api := botClient(emu)
	ctx := context.Background()

	for i := range 12 {
		emu.PostUserMessage(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, fmt.Sprint("m", i), "")
	}
	msgs := emu.Messages(slackemu.ChannelGen)
	if len(msgs) != 5 || msgs[0].Text != "m7" || msgs[4].Text != "m11" {
		t.Errorf("kept %d messages from %q: want the newest 5 (m7…m11)", len(msgs), msgs[0].Text)
	}

	_, ts, err := api.PostMessageContext(ctx, slackemu.ChannelGen, slack.MsgOptionText("v0", false))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		if _, _, _, err := api.UpdateMessageContext(ctx, slackemu.ChannelGen, ts, slack.MsgOptionText(fmt.Sprint("v", i), false)); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := emu.MessageAt(slackemu.ChannelGen, ts)
	if v := got.Versions(); len(v) != 3 || v[0] != "v0" || v[2] != "v6" {
		t.Errorf("versions %q: want the first and the newest two", v)
	}
	for i := range 15 {
		if _, err := api.PostEphemeralContext(ctx, slackemu.ChannelGen, slackemu.UserAlice, slack.MsgOptionText(fmt.Sprint("e", i), false)); err != nil {
			t.Fatal(err)
		}
		if err := api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{ChannelID: slackemu.DMAlice, ThreadTS: ts, Status: "is thinking"}); err != nil {
			t.Fatal(err)
		}
	}
	if e := emu.Ephemerals(slackemu.UserAlice); len(e) != 10 || e[9].Text != "e14" {
		t.Errorf("kept %d ephemerals: want the newest 10", len(e))
	}
	if j := emu.Journal(); len(j) != 10 || j[9].Method != "assistant.threads.setStatus" {
		t.Errorf("journal holds %d calls, want the newest 10", len(j))
	}
	if s := emu.AssistantStatuses(); len(s) != 10 {
		t.Errorf("kept %d statuses, want 10", len(s))
	}
}

// TestJournalSince reads the journal on from a sequence number.
func TestJournalSince(t *testing.T) {
	emu := newEmu(t, fastOpts())
	api := botClient(emu)
	for range 4 {
		if _, err := api.AuthTest(); err != nil {
			t.Fatal(err)
		}
	}
	all := emu.JournalSince(0, 0)
	if len(all) != 4 || all[0].Seq != 1 || all[3].Seq != 4 {
		t.Fatalf("JournalSince(0) = %d calls from seq %d", len(all), all[0].Seq)
	}
	if rest := emu.JournalSince(2, 0); len(rest) != 2 || rest[0].Seq != 3 {
		t.Errorf("JournalSince(2) = %+v", rest)
	}
	if last := emu.JournalSince(0, 1); len(last) != 1 || last[0].Seq != 4 {
		t.Errorf("JournalSince(0, 1) = %+v, want the newest", last)
	}
}

// TestPersonActions: reactions by people, closing a modal, and Changed
// firing on a change.
func TestPersonActions(t *testing.T) {
	emu := newEmu(t, fastOpts())
	ts := emu.PostUserMessage(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "hi", "")
	changed := emu.Changed()
	if err := emu.React(slackemu.ChannelGen, ts, slackemu.UserBob, ":tada:", true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Error("Changed did not fire on a reaction")
	}
	_ = emu.React(slackemu.ChannelGen, ts, slackemu.UserBob, "tada", true) // twice: still one
	m, _ := emu.MessageAt(slackemu.ChannelGen, ts)
	if got := m.Reactions["tada"]; len(got) != 1 || got[0] != slackemu.UserBob {
		t.Errorf("reactions = %v", m.Reactions)
	}
	if err := emu.React(slackemu.ChannelGen, ts, slackemu.UserBob, "tada", false); err != nil {
		t.Fatal(err)
	}
	if m, _ := emu.MessageAt(slackemu.ChannelGen, ts); len(m.Reactions) != 0 {
		t.Errorf("after removal: %v", m.Reactions)
	}
	if err := emu.React(slackemu.ChannelGen, "1.000001", slackemu.UserBob, "tada", true); err == nil {
		t.Error("a reaction on no message was accepted")
	}

	api := botClient(emu)
	v, err := api.OpenView(emu.NewTrigger(slackemu.TeamID, slackemu.UserAlice), modal("Form"))
	if err != nil {
		t.Fatal(err)
	}
	if err := emu.CloseView(slackemu.TeamID, slackemu.UserAlice, v.ID); err != nil {
		t.Fatal(err)
	}
	if got := emu.Views(slackemu.TeamID, slackemu.UserAlice); len(got) != 0 {
		t.Errorf("after CloseView: %d views open", len(got))
	}
	if err := emu.CloseView(slackemu.TeamID, slackemu.UserAlice, v.ID); err == nil {
		t.Error("closing a closed view succeeded")
	}
}
