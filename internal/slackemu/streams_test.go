package slackemu_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

func recipients() []slack.MsgOption {
	return []slack.MsgOption{slack.MsgOptionRecipientTeamID(slackemu.TeamID), slack.MsgOptionRecipientUserID(slackemu.UserAlice)}
}

func TestNativeStreamWithSlackGo(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)
	parent := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "stream please", "")

	_, ts, err := api.StartStream(slackemu.ChannelGen, append(recipients(), slack.MsgOptionTS(parent.TS), slack.MsgOptionMarkdownText("Hel"))...)
	if err != nil {
		t.Fatalf("StartStream: %v", err)
	}
	if _, _, err := api.AppendStream(slackemu.ChannelGen, ts, slack.MsgOptionMarkdownText("lo ")); err != nil {
		t.Fatalf("AppendStream: %v", err)
	}
	if _, _, err := api.AppendStream(slackemu.ChannelGen, ts, slack.MsgOptionChunks(slack.NewMarkdownTextChunk("**world**"), slack.NewTaskUpdateChunk("t1", "Calling github.search"))); err != nil {
		t.Fatalf("AppendStream chunks: %v", err)
	}
	if _, _, _, err := api.UpdateMessage(slackemu.ChannelGen, ts, slack.MsgOptionMarkdownText("x")); err == nil || err.Error() != "streaming_state_conflict" {
		t.Errorf("update while streaming: %v, want streaming_state_conflict", err)
	}
	if _, _, err := api.StopStream(slackemu.ChannelGen, ts, slack.MsgOptionMarkdownText("!"), slack.MsgOptionBlocks(slack.NewDividerBlock())); err != nil {
		t.Fatalf("StopStream: %v", err)
	}
	if _, _, err := api.AppendStream(slackemu.ChannelGen, ts, slack.MsgOptionMarkdownText("late")); err == nil || err.Error() != "message_not_in_streaming_state" {
		t.Errorf("append after stop: %v, want message_not_in_streaming_state", err)
	}
	m, _ := emu.MessageAt(slackemu.ChannelGen, ts)
	want := []string{"Hel", "Hello ", "Hello **world**", "Hello **world**!"}
	if diff := cmp.Diff(want, m.Versions()); diff != "" {
		t.Errorf("stream versions (-want +got):\n%s", diff)
	}
	if m.Streaming || m.StreamEnded != "stopped" || m.ThreadTS != parent.TS || len(m.Chunks) != 1 || m.RecipientUser != slackemu.UserAlice {
		t.Errorf("stream message = %+v", m)
	}
	// After the stream, chat.update works again.
	if _, _, _, err := api.UpdateMessage(slackemu.ChannelGen, ts, slack.MsgOptionMarkdownText("Hello **world**! (edited)")); err != nil {
		t.Errorf("update after stop: %v", err)
	}
}

func TestStreamErrors(t *testing.T) {
	// Many calls in a row, about validation, not rate limits (the default
	// bursts are Slack-small).
	emu := newEmu(t, slackemu.Options{StreamLifetime: 50 * time.Millisecond, NoRateLimits: true})
	api := botClient(emu)
	user := emu.PostUserMessage(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "mine", "")

	tests := []struct {
		name string
		run  func() error
		want string
	}{
		{"no recipient team in a channel", func() error {
			_, _, err := api.StartStream(slackemu.ChannelGen, slack.MsgOptionRecipientUserID(slackemu.UserAlice))
			return err
		}, "missing_recipient_team_id"},
		{"no recipient user in a channel", func() error {
			_, _, err := api.StartStream(slackemu.ChannelGen, slack.MsgOptionRecipientTeamID(slackemu.TeamID))
			return err
		}, "missing_recipient_user_id"},
		{"dm without recipients", func() error {
			_, _, err := api.StartStream(slackemu.DMAlice)
			return err
		}, ""},
		{"markdown too long", func() error {
			_, _, err := api.StartStream(slackemu.ChannelGen, append(recipients(), slack.MsgOptionMarkdownText(strings.Repeat("a", 12001)))...)
			return err
		}, "msg_too_long"},
		{"append without text", func() error {
			_, ts, err := api.StartStream(slackemu.ChannelGen, recipients()...)
			if err != nil {
				return err
			}
			_, _, err = api.AppendStream(slackemu.ChannelGen, ts)
			return err
		}, "invalid_arguments"},
		{"append to someone else's message", func() error {
			_, _, err := api.AppendStream(slackemu.ChannelGen, user, slack.MsgOptionMarkdownText("x"))
			return err
		}, "message_not_owned_by_app"},
		{"bad chunks", func() error {
			_, ts, _ := api.StartStream(slackemu.ChannelGen, recipients()...)
			_, _, err := api.AppendStream(slackemu.ChannelGen, ts, slack.UnsafeMsgOptionEndpoint(emu.APIURL()+"chat.appendStream", func(v url.Values) { v.Set("chunks", `[{"type":"nope"}]`) }))
			return err
		}, "invalid_chunks"},
		{"stop with 51 blocks", func() error {
			_, ts, _ := api.StartStream(slackemu.ChannelGen, recipients()...)
			many := make([]slack.Block, 51)
			for i := range many {
				many[i] = slack.NewDividerBlock()
			}
			_, _, err := api.StopStream(slackemu.ChannelGen, ts, slack.MsgOptionBlocks(many...))
			return err
		}, "msg_blocks_too_many"},
		{"stream expired", func() error {
			_, ts, err := api.StartStream(slackemu.ChannelGen, recipients()...)
			if err != nil {
				return err
			}
			time.Sleep(60 * time.Millisecond)
			_, _, err = api.AppendStream(slackemu.ChannelGen, ts, slack.MsgOptionMarkdownText("x"))
			if err == nil {
				return nil
			}
			// Recovery: the expired stream is an ordinary message again.
			if _, _, _, uerr := api.UpdateMessage(slackemu.ChannelGen, ts, slack.MsgOptionMarkdownText("full text")); uerr != nil {
				t.Errorf("update after expiry: %v", uerr)
			}
			return err
		}, "message_not_in_streaming_state"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("error %q, want %q", got, tc.want)
			}
		})
	}
}
