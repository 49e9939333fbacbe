package slackemu_test

import (
	"testing"

	"github.com/slack-go/slack/socketmode"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

func TestJournalLimitBoundsHistory(t *testing.T) {
	opts := fastOpts()
	opts.JournalLimit = 5
	emu := newEmu(t, opts)
	c := startSocket(t, emu, true)
	c.next(t, socketmode.EventTypeHello)
	api := botClient(emu)
	for range 20 {
		if _, err := api.AuthTest(); err != nil {
			t.Fatal(err)
		}
	}
	for range 12 {
		emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "hi", "")
		c.next(t, socketmode.EventTypeEventsAPI)
	}
	waitFor(t, emu, "acks", func() bool { return emu.AckStats().Unacked == 0 })
	// Settled envelopes go once the next one arrives.
	emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "one more", "")
	c.next(t, socketmode.EventTypeEventsAPI)
	if n := len(emu.Journal()); n != 5 {
		t.Errorf("journal holds %d calls, want 5", n)
	}
	if n := len(emu.Acks()); n > 5 {
		t.Errorf("ack log holds %d records, want ≤ 5", n)
	}
	if n := len(emu.Envelopes()); n != 5 {
		t.Errorf("%d envelopes kept, want 5", n)
	}
}
