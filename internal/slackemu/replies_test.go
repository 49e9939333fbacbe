package slackemu_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// seedThread writes an incident thread as people had it before the bot
// was asked: parent, replies from two people, the bot's own post,
// another app's classic bot message, an edited and a deleted reply.
func seedThread(t *testing.T, emu *slackemu.Server) (parent string, all []string) {
	t.Helper()
	post := func(p slackemu.UserPost) string {
		t.Helper()
		p.Team, p.Channel, p.Silent = slackemu.TeamID, slackemu.ChannelGen, true
		got, err := emu.Post(p)
		if err != nil {
			t.Fatal(err)
		}
		return got.TS
	}
	parent = post(slackemu.UserPost{User: slackemu.UserAlice, Text: "prod is down", TS: "1700000000.000100"})
	all = append(all, parent,
		post(slackemu.UserPost{User: slackemu.UserBob, Text: "since when?", ThreadTS: parent, TS: "1700000010.000100"}),
		post(slackemu.UserPost{AsApp: true, Text: "I can look into it", ThreadTS: parent, TS: "1700000020.000100"}),
		post(slackemu.UserPost{BotID: "B0PAGER", BotName: "pager", Subtype: "bot_message", Text: "ALERT db-1 down", ThreadTS: parent, TS: "1700000030.000100"}),
	)
	edited := post(slackemu.UserPost{User: slackemu.UserAlice, Text: "10:00 UTC", ThreadTS: parent, TS: "1700000040.000100"})
	if err := emu.EditMessage(slackemu.ChannelGen, edited, "09:58 UTC"); err != nil {
		t.Fatal(err)
	}
	deleted := post(slackemu.UserPost{User: slackemu.UserBob, Text: "oops wrong thread", ThreadTS: parent, TS: "1700000050.000100"})
	if err := emu.DeleteMessage(slackemu.ChannelGen, deleted); err != nil {
		t.Fatal(err)
	}
	all = append(all, edited)
	for i := range 4 {
		all = append(all, post(slackemu.UserPost{User: slackemu.UserBob, Text: fmt.Sprintf("update %d", i), ThreadTS: parent}))
	}
	return parent, all
}

func TestConversationsRepliesPaginationWithSlackGo(t *testing.T) {
	emu := newEmu(t, slackemu.Options{NoRateLimits: true}) // many calls; limits are tested below
	api := botClient(emu)
	parent, want := seedThread(t, emu)

	var got []slack.Message
	cursor, pages := "", 0
	for {
		msgs, more, next, err := api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: parent, Cursor: cursor, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if pages > 1 && len(msgs) > 0 && msgs[0].Timestamp == parent {
			t.Errorf("page %d repeats the parent", pages)
		}
		got = append(got, msgs...)
		if more != (next != "") {
			t.Errorf("has_more %v with next_cursor %q", more, next)
		}
		if !more {
			break
		}
		cursor = next
	}
	if pages != 3 || len(got) != len(want) {
		t.Fatalf("%d pages, %d messages; want 3 pages of %d", pages, len(got), len(want))
	}
	for i, m := range got {
		if m.Timestamp != want[i] {
			t.Errorf("message %d ts %s, want %s", i, m.Timestamp, want[i])
		}
	}
	if p := got[0]; p.User != slackemu.UserAlice || p.ReplyCount != len(want)-1 || p.ThreadTimestamp != parent || p.LatestReply != want[len(want)-1] {
		t.Errorf("parent = %+v", p)
	}
	if own := got[2]; own.BotID != slackemu.BotID || own.User != slackemu.BotUserID || own.BotProfile == nil {
		t.Errorf("the bot's own post = %+v", own)
	}
	if other := got[3]; other.BotID != "B0PAGER" || other.SubType != "bot_message" || other.BotProfile == nil || other.BotProfile.Name != "pager" {
		t.Errorf("another app's post = %+v", other)
	}
	if ed := got[4]; ed.Text != "09:58 UTC" || ed.Edited == nil {
		t.Errorf("edited reply = %+v", ed)
	}

	// A reply's ts names the whole thread.
	msgs, _, _, err := api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: want[3]})
	if err != nil || len(msgs) != len(want) {
		t.Errorf("replies by a reply's ts: %d, %v", len(msgs), err)
	}

	// oldest / latest / inclusive filter the replies; the parent stays.
	msgs, _, _, err = api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: parent, Oldest: want[1], Latest: want[3], Inclusive: true})
	if err != nil || len(msgs) != 4 || msgs[1].Timestamp != want[1] || msgs[3].Timestamp != want[3] {
		t.Errorf("inclusive range: %d messages, %v", len(msgs), err)
	}
	msgs, _, _, err = api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: parent, Oldest: want[1], Latest: want[3]})
	if err != nil || len(msgs) != 2 || msgs[1].Timestamp != want[2] {
		t.Errorf("exclusive range: %d messages, %v", len(msgs), err)
	}
}

func TestConversationsRepliesErrors(t *testing.T) {
	teams := slackemu.DefaultTeams()
	teams[1].Scopes = []string{"chat:write"}
	emu := newEmu(t, slackemu.Options{Teams: teams, NoRateLimits: true})
	api := botClient(emu)
	parent, _ := seedThread(t, emu)
	t2, _ := emu.Post(slackemu.UserPost{Team: slackemu.TeamID2, Channel: slackemu.ChannelT2, User: slackemu.UserT2, Text: "hi", Silent: true})
	random, _ := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelRandom, User: slackemu.UserAlice, Text: "hi", Silent: true})
	call := func(api *slack.Client, ch, ts, cursor, latest string) error {
		_, _, _, err := api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: ch, Timestamp: ts, Cursor: cursor, Latest: latest})
		return err
	}
	tests := []struct {
		name    string
		err     error
		wantErr string
	}{
		{"other workspace's channel", call(api, slackemu.ChannelT2, t2.TS, "", ""), "channel_not_found"},
		{"unknown thread", call(api, slackemu.ChannelGen, "1600000000.000001", "", ""), "thread_not_found"},
		{"bad cursor", call(api, slackemu.ChannelGen, parent, "!!", ""), "invalid_cursor"},
		{"bad latest", call(api, slackemu.ChannelGen, parent, "", "yesterday"), "invalid_ts_latest"},
		{"bot not in channel", call(api, slackemu.ChannelRandom, random.TS, "", ""), "not_in_channel"},
		{"no channels:history", call(slack.New(slackemu.BotToken2, slack.OptionAPIURL(emu.APIURL())), slackemu.ChannelT2, t2.TS, "", ""), "missing_scope"},
	}
	for _, tc := range tests {
		if got := errString(tc.err); got != tc.wantErr {
			t.Errorf("%s: error %q, want %q", tc.name, got, tc.wantErr)
		}
	}
	var se slack.SlackErrorResponse
	if err := call(slack.New(slackemu.BotToken2, slack.OptionAPIURL(emu.APIURL())), slackemu.ChannelT2, t2.TS, "", ""); errors.As(err, &se) {
		if se.Err != "missing_scope" {
			t.Errorf("missing scope error %+v", se)
		}
	}
	if c := emu.Calls("conversations.replies"); len(c) == 0 || c[len(c)-1].Error != "missing_scope" {
		t.Errorf("journal: %+v", c)
	}

	// A deleted parent with replies is a tombstone.
	if err := emu.DeleteMessage(slackemu.ChannelGen, parent); err != nil {
		t.Fatal(err)
	}
	msgs, _, _, err := api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: parent})
	if err != nil || msgs[0].SubType != "tombstone" || msgs[0].Text != "This message was deleted." {
		t.Errorf("deleted parent: %+v, %v", msgs[0], err)
	}
}

func TestConversationsRepliesNonMarketplace(t *testing.T) {
	emu := newEmu(t, slackemu.Options{TimeScale: 0.01})
	api := botClient(emu)
	parent, _ := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice, Text: "q", Silent: true})
	for i := range 30 {
		if _, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserBob, Text: fmt.Sprint(i), ThreadTS: parent.TS, Silent: true}); err != nil {
			t.Fatal(err)
		}
	}
	params := &slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: parent.TS, Limit: 200}
	if msgs, _, _, err := api.GetConversationReplies(params); err != nil || len(msgs) != 31 {
		t.Fatalf("Marketplace mode: %d messages, %v", len(msgs), err)
	}
	emu.SetNonMarketplace(true)
	msgs, more, next, err := api.GetConversationReplies(params)
	if err != nil || len(msgs) != 15 || !more || next == "" {
		t.Fatalf("non-Marketplace first page: %d messages, more %v, %v", len(msgs), more, err)
	}
	_, _, _, err = api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: parent.TS, Cursor: next})
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter < time.Second {
		t.Fatalf("second call within the minute: %v, want a RateLimitedError with Retry-After", err)
	}
	// Another workspace has its own minute.
	t2, _ := emu.Post(slackemu.UserPost{Team: slackemu.TeamID2, Channel: slackemu.ChannelT2, User: slackemu.UserT2, Text: "q", Silent: true})
	if _, _, _, err := slack.New(slackemu.BotToken2, slack.OptionAPIURL(emu.APIURL())).GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelT2, Timestamp: t2.TS}); err != nil {
		t.Errorf("other workspace: %v", err)
	}
	// After the (scaled) minute the next page comes.
	deadline := time.Now().Add(20 * time.Second)
	for {
		msgs, _, _, err = api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: parent.TS, Cursor: next, Limit: 100})
		if err == nil {
			break
		}
		if !errors.As(err, &rl) || time.Now().After(deadline) {
			t.Fatalf("waiting for the next minute: %v", err)
		}
		time.Sleep(rl.RetryAfter / 10)
	}
	if len(msgs) != 15 || msgs[0].Text != "14" {
		t.Errorf("second page: %d messages starting %q", len(msgs), msgs[0].Text)
	}
	if emu.RateLimited()["conversations.replies"] == 0 {
		t.Error("no 429 counted")
	}
}

func TestRepliesMetadataOnlyWhenAsked(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)
	_, ts, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("x", false),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "bobbin_turn", EventPayload: map[string]any{"id": "t1"}}))
	if err != nil {
		t.Fatal(err)
	}
	msgs, _, _, _ := api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: ts})
	if len(msgs) != 1 || msgs[0].Metadata.EventType != "" {
		t.Errorf("without include_all_metadata: %+v", msgs)
	}
	msgs, _, _, _ = api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: ts, IncludeAllMetadata: true})
	if len(msgs) != 1 || msgs[0].Metadata.EventType != "bobbin_turn" {
		t.Errorf("with include_all_metadata: %+v", msgs)
	}
}
