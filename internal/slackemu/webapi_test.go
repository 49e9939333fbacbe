package slackemu_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

func TestAuthAndUsersWithSlackGo(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)

	at, err := api.AuthTest()
	if err != nil {
		t.Fatalf("AuthTest: %v", err)
	}
	if at.UserID != slackemu.BotUserID || at.BotID != slackemu.BotID || at.TeamID != slackemu.TeamID {
		t.Errorf("AuthTest = user %q bot %q team %q, want %q %q %q", at.UserID, at.BotID, at.TeamID, slackemu.BotUserID, slackemu.BotID, slackemu.TeamID)
	}

	type flags struct {
		Admin, Owner, Primary, Restricted, Ultra, Stranger, Bot, Deleted bool
		Team                                                             string
	}
	tests := []struct {
		user string
		want flags
	}{
		{slackemu.UserAlice, flags{Team: slackemu.TeamID}},
		{slackemu.UserAdmin, flags{Admin: true, Team: slackemu.TeamID}},
		{slackemu.UserOwner, flags{Admin: true, Owner: true, Primary: true, Team: slackemu.TeamID}},
		{slackemu.UserGuest, flags{Restricted: true, Team: slackemu.TeamID}},
		{slackemu.UserSingle, flags{Restricted: true, Ultra: true, Team: slackemu.TeamID}},
		{slackemu.UserStranger, flags{Stranger: true, Team: "T999"}},
		{slackemu.UserDeleted, flags{Deleted: true, Team: slackemu.TeamID}},
		{slackemu.UserOtherBot, flags{Bot: true, Team: slackemu.TeamID}},
	}
	for _, tc := range tests {
		t.Run(tc.user, func(t *testing.T) {
			u, err := api.GetUserInfo(tc.user)
			if err != nil {
				t.Fatalf("GetUserInfo(%s): %v", tc.user, err)
			}
			got := flags{u.IsAdmin, u.IsOwner, u.IsPrimaryOwner, u.IsRestricted, u.IsUltraRestricted, u.IsStranger, u.IsBot, u.Deleted, u.TeamID}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GetUserInfo(%s) flags (-want +got):\n%s", tc.user, diff)
			}
			if u.Profile.DisplayName == "" || u.RealName == "" {
				t.Errorf("GetUserInfo(%s): empty names %+v", tc.user, u.Profile)
			}
		})
	}
	if _, err := api.GetUserInfo("UNOPE"); err == nil || err.Error() != "user_not_found" {
		t.Errorf("GetUserInfo(UNOPE) err = %v, want user_not_found", err)
	}
	ti, err := api.GetTeamInfo()
	if err != nil || ti.ID != slackemu.TeamID || ti.Domain != "acme" {
		t.Errorf("GetTeamInfo = %+v, %v", ti, err)
	}
	ch, err := api.GetConversationInfo(&slack.GetConversationInfoInput{ChannelID: slackemu.DMAlice})
	if err != nil || !ch.IsIM || ch.User != slackemu.UserAlice {
		t.Errorf("GetConversationInfo(DM) = %+v, %v", ch, err)
	}
}

func TestTokens(t *testing.T) {
	// Validation, not rate limits: more posts than the default burst.
	emu := newEmu(t, slackemu.Options{NoRateLimits: true})
	post := func(method, token, contentType, body string, bearer bool) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, emu.APIURL()+method, strings.NewReader(body))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if bearer {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: HTTP %d, want 200", method, resp.StatusCode)
		}
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	form := "application/x-www-form-urlencoded"
	tests := []struct {
		name, method, token, ct, body string
		bearer                        bool
		wantErr                       string
	}{
		{"no token", "auth.test", "", form, "", false, "not_authed"},
		{"unknown token", "auth.test", "", form, "token=xoxb-nope", false, "invalid_auth"},
		{"app token on chat", "chat.postMessage", "", form, "token=" + slackemu.AppToken + "&channel=C111&text=x", false, "not_allowed_token_type"},
		{"bot token on connections.open", "apps.connections.open", slackemu.BotToken, "application/json", "", true, "not_allowed_token_type"},
		{"form token ok", "auth.test", "", form, "token=" + slackemu.BotToken, false, ""},
		{"bearer json ok", "chat.postMessage", slackemu.BotToken, "application/json", `{"channel":"C111","text":"hi"}`, true, ""},
		{"json token ok", "chat.postMessage", "", "application/json", `{"token":"` + slackemu.BotToken + `","channel":"C111","text":"hi","blocks":null}`, false, ""},
		{"unknown method", "chat.nope", "", form, "token=" + slackemu.BotToken, false, "unknown_method"},
		{"not in channel", "chat.postMessage", "", form, "token=" + slackemu.BotToken + "&channel=C222&text=x", false, "not_in_channel"},
		{"other team channel", "chat.postMessage", "", form, "token=" + slackemu.BotToken + "&channel=" + slackemu.ChannelT2 + "&text=x", false, "channel_not_found"},
		{"no text", "chat.postMessage", "", form, "token=" + slackemu.BotToken + "&channel=C111", false, "no_text"},
		{"bad blocks json", "chat.postMessage", "", form, "token=" + slackemu.BotToken + "&channel=C111&blocks=%5B%7B", false, "invalid_blocks_format"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := post(tc.method, tc.token, tc.ct, tc.body, tc.bearer)
			gotErr, _ := out["error"].(string)
			if gotErr != tc.wantErr || out["ok"] != (tc.wantErr == "") {
				t.Errorf("%s %s = %v, want error %q", tc.method, tc.body, out, tc.wantErr)
			}
		})
	}
	// The journal never holds the token.
	for _, c := range emu.Journal() {
		if _, ok := c.Params["token"]; ok {
			t.Errorf("journal entry %s keeps the token", c.Method)
		}
	}
}

func TestChatWithSlackGo(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)
	parent := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "hello", "")

	_, ts, err := api.PostMessage(slackemu.ChannelGen,
		slack.MsgOptionTS(parent.TS), slack.MsgOptionMarkdownText("**hi**"),
		slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl(),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "bobbin_turn", EventPayload: map[string]any{"turn": "t1"}}))
	if err != nil {
		t.Fatalf("PostMessage: %v", err)
	}
	for _, text := range []string{"one", "one two", "one two three"} {
		if _, _, _, err := api.UpdateMessage(slackemu.ChannelGen, ts, slack.MsgOptionMarkdownText(text)); err != nil {
			t.Fatalf("UpdateMessage(%q): %v", text, err)
		}
	}
	m, ok := emu.MessageAt(slackemu.ChannelGen, ts)
	if !ok {
		t.Fatal("posted message not stored")
	}
	if diff := cmp.Diff([]string{"**hi**", "one", "one two", "one two three"}, m.Versions()); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	if m.ThreadTS != parent.TS || !m.IsBot() || m.UnfurlLinks == nil || *m.UnfurlLinks || m.UnfurlMedia == nil || *m.UnfurlMedia {
		t.Errorf("message = %+v", m)
	}
	if !strings.Contains(string(m.Metadata), "bobbin_turn") {
		t.Errorf("metadata = %s", m.Metadata)
	}

	msgs, _, _, err := api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: parent.TS})
	if err != nil {
		t.Fatalf("GetConversationReplies: %v", err)
	}
	if len(msgs) != 2 || msgs[0].Timestamp != parent.TS || msgs[1].Text != "one two three" || msgs[1].BotID != slackemu.BotID {
		t.Errorf("replies = %+v", msgs)
	}

	ets, err := api.PostEphemeral(slackemu.ChannelGen, slackemu.UserBob, slack.MsgOptionText("only you", false), slack.MsgOptionTS(parent.TS))
	if err != nil || ets == "" {
		t.Fatalf("PostEphemeral: %q, %v", ets, err)
	}
	if e := emu.Ephemerals(slackemu.UserBob); len(e) != 1 || e[0].Text != "only you" || e[0].ThreadTS != parent.TS {
		t.Errorf("Ephemerals(bob) = %+v", e)
	}

	link, err := api.GetPermalink(&slack.PermalinkParameters{Channel: slackemu.ChannelGen, Ts: ts})
	if err != nil || !strings.HasPrefix(link, "https://acme.slack.com/archives/C111/p") {
		t.Errorf("GetPermalink = %q, %v", link, err)
	}

	if err := api.SetAssistantThreadsStatus(slack.AssistantThreadsSetStatusParameters{ChannelID: slackemu.ChannelGen, ThreadTS: parent.TS, Status: "is thinking…", LoadingMessages: []string{"a", "b"}}); err != nil {
		t.Fatalf("SetAssistantThreadsStatus: %v", err)
	}
	if st := emu.AssistantStatuses(); len(st) != 1 || st[0].Status != "is thinking…" || len(st[0].Loading) != 2 {
		t.Errorf("AssistantStatuses = %+v", st)
	}

	if _, _, err := api.DeleteMessage(slackemu.ChannelGen, ts); err != nil {
		t.Fatalf("DeleteMessage: %v", err)
	}
	if _, _, _, err := api.UpdateMessage(slackemu.ChannelGen, ts, slack.MsgOptionText("x", false)); err == nil || err.Error() != "message_not_found" {
		t.Errorf("update after delete: %v, want message_not_found", err)
	}
}

func TestChatLimits(t *testing.T) {
	// Size limits, not rate limits: more edits than the default burst.
	emu := newEmu(t, slackemu.Options{NoRateLimits: true})
	api := botClient(emu)
	_, ts, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("x", false))
	if err != nil {
		t.Fatal(err)
	}
	user := emu.PostUserMessage(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "mine", "")
	section := func(n int) slack.Block {
		return slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, strings.Repeat("a", n), false, false), nil, nil)
	}
	many := make([]slack.Block, 51)
	for i := range many {
		many[i] = slack.NewDividerBlock()
	}
	tests := []struct {
		name string
		ts   string
		opts []slack.MsgOption
		want string
	}{
		{"text 4000 ok", ts, []slack.MsgOption{slack.MsgOptionText(strings.Repeat("é", 4000), false)}, ""},
		{"text 4001", ts, []slack.MsgOption{slack.MsgOptionText(strings.Repeat("a", 4001), false)}, "msg_too_long"},
		{"markdown 12001", ts, []slack.MsgOption{slack.MsgOptionMarkdownText(strings.Repeat("a", 12001))}, "msg_too_long"},
		{"markdown and text", ts, []slack.MsgOption{slack.MsgOptionMarkdownText("a"), slack.MsgOptionText("b", false)}, "markdown_text_conflict"},
		{"markdown and blocks", ts, []slack.MsgOption{slack.MsgOptionMarkdownText("a"), slack.MsgOptionBlocks(slack.NewDividerBlock())}, "markdown_text_conflict"},
		{"51 blocks", ts, []slack.MsgOption{slack.MsgOptionText("a", false), slack.MsgOptionBlocks(many...)}, "msg_blocks_too_many"},
		{"section 3001", ts, []slack.MsgOption{slack.MsgOptionText("a", false), slack.MsgOptionBlocks(section(3001))}, "invalid_blocks"},
		{"section 3000 ok", ts, []slack.MsgOption{slack.MsgOptionText("a", false), slack.MsgOptionBlocks(section(3000))}, ""},
		{"unknown ts", "1.000001", []slack.MsgOption{slack.MsgOptionText("a", false)}, "message_not_found"},
		{"user's message", user, []slack.MsgOption{slack.MsgOptionText("a", false)}, "cant_update_message"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := api.UpdateMessage(slackemu.ChannelGen, tc.ts, tc.opts...)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("UpdateMessage: error %q, want %q", got, tc.want)
			}
		})
	}

	// postMessage truncates at 40 000 and refuses 51 blocks.
	_, ts2, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText(strings.Repeat("b", 40005), false))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := emu.MessageAt(slackemu.ChannelGen, ts2); len(m.Text) != 40000 {
		t.Errorf("posted text length %d, want 40000", len(m.Text))
	}
	if _, _, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("a", false), slack.MsgOptionBlocks(many...)); err == nil || err.Error() != "invalid_blocks" {
		t.Errorf("post 51 blocks: %v, want invalid_blocks", err)
	}
	// Blocks are kept unless sent; "[]" would clear them.
	_, ts3, _ := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("fallback", false), slack.MsgOptionBlocks(section(5)))
	_, _, _, _ = api.UpdateMessage(slackemu.ChannelGen, ts3, slack.MsgOptionText("new text", false))
	if m, _ := emu.MessageAt(slackemu.ChannelGen, ts3); m.Text != "new text" || m.Visible() != "aaaaa" {
		t.Errorf("after text-only update: text %q visible %q", m.Text, m.Visible())
	}
}

func TestRateLimitSurfacesAsRateLimitedError(t *testing.T) {
	emu := newEmu(t, slackemu.Options{RateLimits: map[string]slackemu.RateLimit{
		"chat.update": {Limit: 2, Window: time.Hour, Burst: 2},
	}})
	api := botClient(emu)
	_, ts, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("x", false))
	if err != nil {
		t.Fatal(err)
	}
	var rl *slack.RateLimitedError
	for i := range 3 {
		_, _, _, err = api.UpdateMessage(slackemu.ChannelGen, ts, slack.MsgOptionText("y", false))
		if i < 2 && err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	if !errors.As(err, &rl) || rl.RetryAfter < time.Second {
		t.Fatalf("third update: %v, want *slack.RateLimitedError with RetryAfter ≥ 1s", err)
	}
	if got := emu.RateLimited()["chat.update"]; got != 1 {
		t.Errorf("RateLimited()[chat.update] = %d, want 1", got)
	}
	// Other workspaces have their own buckets.
	api2 := slack.New(slackemu.BotToken2, slack.OptionAPIURL(emu.APIURL()))
	_, ts2, _ := api2.PostMessage(slackemu.ChannelT2, slack.MsgOptionText("x", false))
	if _, _, _, err := api2.UpdateMessage(slackemu.ChannelT2, ts2, slack.MsgOptionText("y", false)); err != nil {
		t.Errorf("other workspace update: %v", err)
	}
}

func TestRateLimitTimeScaleRefills(t *testing.T) {
	// 1 call per minute, a minute lasting 20 ms.
	emu := newEmu(t, slackemu.Options{TimeScale: 20.0 / 60000, RateLimits: map[string]slackemu.RateLimit{
		"users.info": {Limit: 1, Window: time.Minute},
	}})
	api := botClient(emu)
	ok := 0
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ok < 3 && ctx.Err() == nil {
		_, err := api.GetUserInfo(slackemu.UserAlice)
		var rl *slack.RateLimitedError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &rl):
			time.Sleep(5 * time.Millisecond)
		default:
			t.Fatal(err)
		}
	}
	if ok < 3 {
		t.Fatalf("only %d calls admitted", ok)
	}
}

func TestFaultInjection(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)
	emu.InjectFault("chat.postMessage", slackemu.Fault{Times: 2, Error: "fatal_error"})
	emu.InjectFault("auth.test", slackemu.Fault{Status: http.StatusServiceUnavailable})
	emu.InjectFault("users.info", slackemu.Fault{Status: http.StatusTooManyRequests, RetryAfter: 7})
	emu.InjectFault("team.info", slackemu.Fault{Latency: 50 * time.Millisecond})

	for range 2 {
		if _, _, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("x", false)); err == nil || err.Error() != "fatal_error" {
			t.Errorf("PostMessage with fault: %v, want fatal_error", err)
		}
	}
	if _, _, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("x", false)); err != nil {
		t.Errorf("PostMessage after the fault: %v", err)
	}
	var sce slack.StatusCodeError
	if _, err := api.AuthTest(); !errors.As(err, &sce) || sce.Code != http.StatusServiceUnavailable {
		t.Errorf("AuthTest with HTTP fault: %v", err)
	}
	var rl *slack.RateLimitedError
	if _, err := api.GetUserInfo(slackemu.UserAlice); !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Errorf("GetUserInfo with 429 fault: %v", err)
	}
	if _, err := api.GetTeamInfo(); err != nil {
		t.Errorf("GetTeamInfo with latency: %v", err)
	}
	calls := emu.Calls("chat.postMessage")
	if len(calls) != 3 || calls[0].Error != "fatal_error" || !calls[2].OK || calls[2].Team != slackemu.TeamID {
		t.Errorf("journal = %+v", calls)
	}
}

func TestGetPermalinkIsGET(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)
	_, ts, _ := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("x", false))
	q := url.Values{"channel": {slackemu.ChannelGen}, "message_ts": {ts}}
	req, _ := http.NewRequest(http.MethodGet, emu.APIURL()+"chat.getPermalink?"+q.Encode(), nil)
	req.Header.Set("Authorization", "Bearer "+slackemu.BotToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"ok":true`) {
		t.Errorf("GET chat.getPermalink = %s", body)
	}
}

func TestReactionsWithSlackGo(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)
	ts := emu.PostUserMessage(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "queued?", "")
	ref := slack.NewRefToMessage(slackemu.ChannelGen, ts)
	if err := api.AddReaction("eyes", ref); err != nil {
		t.Fatalf("AddReaction: %v", err)
	}
	if err := api.AddReaction("eyes", ref); errString(err) != "already_reacted" {
		t.Errorf("second AddReaction: %v, want already_reacted", err)
	}
	if m, _ := emu.MessageAt(slackemu.ChannelGen, ts); !slices.Equal(m.Reactions["eyes"], []string{slackemu.BotUserID}) {
		t.Errorf("reactions = %v", m.Reactions)
	}
	if err := api.RemoveReaction("eyes", ref); err != nil {
		t.Fatalf("RemoveReaction: %v", err)
	}
	if err := api.RemoveReaction("eyes", ref); errString(err) != "no_reaction" {
		t.Errorf("second RemoveReaction: %v, want no_reaction", err)
	}
}

func TestLeaks(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)
	const canary = "sk-canary-<42>"
	emu.PostUserMessage(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "my key is "+canary, "")
	if got := emu.Leaks(canary); len(got) != 0 {
		t.Fatalf("user's own message counted as a leak: %v", got)
	}
	_, ts, _ := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("safe", false))
	_, _, _, _ = api.UpdateMessage(slackemu.ChannelGen, ts, slack.MsgOptionBlocks(slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "oops "+canary, false, false), nil, nil)))
	got := emu.Leaks(canary)
	if len(got) != 2 { // the chat.update arguments and the message version
		t.Errorf("Leaks = %v, want the journal entry and the message version", got)
	}
}

// TestDefaultBurstsAreConservative: with the built-in limits, a fourth
// post in a channel within a second, a sixth chat.update and a sixth
// reaction in a burst are refused, as a strict Slack would (issue 11);
// another channel still has its own three.
func TestDefaultBurstsAreConservative(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)
	emu.AddChannel(slackemu.TeamID, slackemu.Channel{ID: "C900", Name: "other", BotMember: true})
	var rl *slack.RateLimitedError
	var ts string
	for i := range 4 {
		_, t2, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("x", false))
		if i < 3 && err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
		if i == 3 && !errors.As(err, &rl) {
			t.Fatalf("fourth post in a second: %v, want 429", err)
		}
		if i == 0 {
			ts = t2
		}
	}
	if _, _, err := api.PostMessage("C900", slack.MsgOptionText("x", false)); err != nil {
		t.Errorf("post in another channel: %v", err)
	}
	for i := range 6 {
		_, _, _, err := api.UpdateMessage(slackemu.ChannelGen, ts, slack.MsgOptionText("y"+strconv.Itoa(i), false))
		if i < 5 && err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		if i == 5 && !errors.As(err, &rl) {
			t.Fatalf("sixth update in a burst: %v, want 429", err)
		}
	}
	names := []string{"eyes", "tada", "wave", "rocket", "star", "fire"}
	for i, n := range names {
		err := api.AddReaction(n, slack.NewRefToMessage(slackemu.ChannelGen, ts))
		if i < 5 && err != nil {
			t.Fatalf("reaction %d: %v", i, err)
		}
		if i == 5 && !errors.As(err, &rl) {
			t.Fatalf("sixth reaction in a burst: %v, want 429", err)
		}
	}
}
