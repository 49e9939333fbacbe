package slackemu_test

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

const (
	chanSecret = "CSECRET" // private, alice is not in it
	chanTeam   = "CTEAM"   // private, alice and the bot are in it
)

// searchWorld seeds the same sentence in every kind of channel.
func searchWorld(t *testing.T, emu *slackemu.Server) {
	t.Helper()
	emu.AddChannel(slackemu.TeamID, slackemu.Channel{ID: chanSecret, Name: "secret", Private: true, Members: []string{slackemu.UserBob}})
	emu.AddChannel(slackemu.TeamID, slackemu.Channel{ID: chanTeam, Name: "team", Private: true, BotMember: true, Members: []string{slackemu.UserAlice, slackemu.UserBob}})
	for _, c := range []string{slackemu.ChannelGen, slackemu.ChannelRandom, chanSecret, chanTeam, slackemu.DMBob} {
		if _, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: c, User: slackemu.UserBob, Text: "We decided to use Postgres in " + c, Silent: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserBob, Text: "unrelated", Silent: true}); err != nil {
		t.Fatal(err)
	}
}

// mentionToken mentions the bot in channel as alice and returns the
// action_token Slack put on the app_mention event.
func mentionToken(t *testing.T, sock *sockClient, emu *slackemu.Server, channel string) string {
	t.Helper()
	emu.Mention(slackemu.TeamID, channel, slackemu.UserAlice, "what did we decide about the database?", "")
	_, ev := sock.nextInner(t, "app_mention")
	tok, _ := ev["action_token"].(string)
	if tok == "" {
		t.Fatalf("app_mention without action_token: %v", ev)
	}
	return tok
}

func resultChannels(r *slack.AssistantSearchContextResponse) []string {
	var out []string
	for _, m := range r.Results.Messages {
		out = append(out, m.ChannelID)
	}
	sort.Strings(out)
	return out
}

func TestSearchContextAsThePerson(t *testing.T) {
	emu := newEmu(t, slackemu.Options{NoRateLimits: true})
	searchWorld(t, emu)
	sock := startSocket(t, emu, true)
	api := botClient(emu)
	all := []string{"public_channel", "private_channel", "mpim", "im"}

	// Invoked in a public channel: public channels only.
	tok := mentionToken(t, sock, emu, slackemu.ChannelGen)
	r, err := api.SearchAssistantContext(slack.AssistantSearchContextParameters{Query: "postgres decided", ActionToken: tok, ChannelTypes: all})
	if err != nil {
		t.Fatalf("search: %v", err)
	}
	if diff := cmp.Diff([]string{slackemu.ChannelGen, slackemu.ChannelRandom}, resultChannels(r)); diff != "" {
		t.Errorf("from a public channel (-want +got):\n%s", diff)
	}
	m := r.Results.Messages[0]
	if m.AuthorUserID != slackemu.UserBob || m.AuthorName != "Bob Baker" || m.Permalink == "" || m.TeamID != slackemu.TeamID || m.ChannelName == "" {
		t.Errorf("result = %+v", m)
	}

	// Invoked in a private channel alice is in: it and the public ones;
	// never #secret, whatever the channel types.
	tok = mentionToken(t, sock, emu, chanTeam)
	r, err = api.SearchAssistantContext(slack.AssistantSearchContextParameters{Query: "Postgres", ActionToken: tok, ChannelTypes: all})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{slackemu.ChannelGen, slackemu.ChannelRandom, chanTeam}, resultChannels(r)); diff != "" {
		t.Errorf("from a private channel (-want +got):\n%s", diff)
	}
	// Default channel types: public only.
	r, _ = api.SearchAssistantContext(slack.AssistantSearchContextParameters{Query: "Postgres", ActionToken: tok})
	if diff := cmp.Diff([]string{slackemu.ChannelGen, slackemu.ChannelRandom}, resultChannels(r)); diff != "" {
		t.Errorf("default types (-want +got):\n%s", diff)
	}
	searches := emu.Searches()
	if len(searches) != 3 || searches[0].User != slackemu.UserAlice || searches[1].ActionToken != tok {
		t.Errorf("searches = %+v", searches)
	}
	for _, s := range searches {
		if slices.Contains(s.Channels, chanSecret) || slices.Contains(s.Channels, slackemu.DMBob) {
			t.Errorf("a search as alice returned a channel she cannot see: %+v", s)
		}
	}

	// Tokens: required with a bot token, tied to the workspace, short-lived.
	for _, tc := range []struct {
		p    slack.AssistantSearchContextParameters
		api  *slack.Client
		want string
	}{
		{slack.AssistantSearchContextParameters{Query: "postgres"}, api, "invalid_action_token"},
		{slack.AssistantSearchContextParameters{Query: "postgres", ActionToken: "forged"}, api, "invalid_action_token"},
		{slack.AssistantSearchContextParameters{Query: "postgres", ActionToken: tok}, slack.New(slackemu.BotToken2, slack.OptionAPIURL(emu.APIURL())), "invalid_action_token"},
		{slack.AssistantSearchContextParameters{Query: " ", ActionToken: tok}, api, "missing_query"},
		{slack.AssistantSearchContextParameters{Query: "postgres", ActionToken: tok, Limit: 21}, api, "invalid_arguments"},
		{slack.AssistantSearchContextParameters{Query: "postgres", ActionToken: tok, ContextChannelID: "CNOPE"}, api, "context_channel_not_found"},
	} {
		if _, err := tc.api.SearchAssistantContext(tc.p); errString(err) != tc.want {
			t.Errorf("search %+v: %v, want %s", tc.p, err, tc.want)
		}
	}
	emu.ExpireActionToken(tok)
	if _, err := api.SearchAssistantContext(slack.AssistantSearchContextParameters{Query: "postgres", ActionToken: tok}); errString(err) != "invalid_action_token" {
		t.Errorf("expired token: %v", err)
	}

	// A user token searches as its person with the scopes it has.
	in, err := emu.Install(slackemu.InstallRequest{Team: slackemu.TeamID, User: slackemu.UserAlice, Scopes: []string{"chat:write"},
		UserScopes: []string{"search:read.public", "search:read.private", "search:read.im"}})
	if err != nil {
		t.Fatal(err)
	}
	user := slack.New(in.UserToken, slack.OptionAPIURL(emu.APIURL()))
	r, err = user.SearchAssistantContext(slack.AssistantSearchContextParameters{Query: "postgres", ChannelTypes: []string{"public_channel", "private_channel", "im"}})
	if err != nil {
		t.Fatalf("user-token search: %v", err)
	}
	if diff := cmp.Diff([]string{slackemu.ChannelGen, slackemu.ChannelRandom, chanTeam}, resultChannels(r)); diff != "" {
		t.Errorf("user token (-want +got):\n%s", diff)
	}
	if _, err := user.SearchAssistantContext(slack.AssistantSearchContextParameters{Query: "postgres", ChannelTypes: []string{"mpim"}}); errString(err) != "missing_scope" {
		t.Errorf("mpim without its scope: %v", err)
	}

	// The workspace without the API.
	emu.SetSearchDisabled(slackemu.TeamID, "feature_not_enabled")
	tok = mentionToken(t, sock, emu, slackemu.ChannelGen)
	if _, err := api.SearchAssistantContext(slack.AssistantSearchContextParameters{Query: "postgres", ActionToken: tok}); errString(err) != "feature_not_enabled" {
		t.Errorf("disabled: %v", err)
	}
	out := callRaw(t, emu, "assistant.search.info", slackemu.BotToken, map[string][]string{})
	if out["ok"] != true || out["is_ai_search_enabled"] != false {
		t.Errorf("search.info = %v", out)
	}
}

func TestSearchContextPagingAndDates(t *testing.T) {
	emu := newEmu(t, slackemu.Options{NoRateLimits: true})
	base := time.Now().Add(-30 * 24 * time.Hour).Unix()
	for i := range 25 {
		ts := fmt.Sprintf("%d.%06d", base+int64(i)*86400, i)
		if _, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserBob, Text: fmt.Sprintf("deploy note %d", i), TS: ts, Silent: true}); err != nil {
			t.Fatal(err)
		}
	}
	sock := startSocket(t, emu, true)
	tok := mentionToken(t, sock, emu, slackemu.ChannelGen)
	api := botClient(emu)
	var got []string
	cursor := ""
	for {
		r, err := api.SearchAssistantContext(slack.AssistantSearchContextParameters{Query: "deploy note", ActionToken: tok, Limit: 10, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Results.Messages {
			got = append(got, m.Content)
		}
		if cursor = r.ResponseMetadata.NextCursor; cursor == "" {
			break
		}
	}
	if len(got) != 25 || got[0] != "deploy note 24" || got[24] != "deploy note 0" {
		t.Errorf("paged results (newest first) = %d: %v … %v", len(got), got[0], got[len(got)-1])
	}
	r, err := api.SearchAssistantContext(slack.AssistantSearchContextParameters{Query: "deploy", ActionToken: tok, After: base + 10*86400, Before: base + 12*86400})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Results.Messages) != 2 || r.Results.Messages[0].Content != "deploy note 11" {
		t.Errorf("date range = %+v", r.Results.Messages)
	}
}

func TestHistoryNonMarketplacePerWorkspace(t *testing.T) {
	emu := newEmu(t, slackemu.Options{TimeScale: 0.05})
	for i := range 40 {
		emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserBob, Text: fmt.Sprintf("m%d", i), Silent: true})
	}
	parent, _ := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserBob, Text: "root", Silent: true})
	for i := range 40 {
		emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserBob, Text: fmt.Sprintf("r%d", i), ThreadTS: parent.TS, Silent: true})
	}
	api := botClient(emu)
	h, err := api.GetConversationHistory(&slack.GetConversationHistoryParameters{ChannelID: slackemu.ChannelGen, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) != 41 || h.Messages[0].Text != "root" || h.HasMore {
		t.Errorf("history = %d messages, first %q (replies excluded, newest first)", len(h.Messages), h.Messages[0].Text)
	}

	emu.SetNonMarketplaceTeam(slackemu.TeamID, true)
	noRetry := slack.New(slackemu.BotToken, slack.OptionAPIURL(emu.APIURL()))
	h, err = noRetry.GetConversationHistory(&slack.GetConversationHistoryParameters{ChannelID: slackemu.ChannelGen, Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) != 15 || !h.HasMore || h.Messages[0].Text != "root" {
		t.Errorf("non-Marketplace history page = %d, has_more %v", len(h.Messages), h.HasMore)
	}
	if _, err := noRetry.GetConversationHistory(&slack.GetConversationHistoryParameters{ChannelID: slackemu.ChannelGen}); err == nil {
		t.Error("second history call within the minute was not limited")
	} else if _, ok := err.(*slack.RateLimitedError); !ok {
		t.Errorf("second call: %v", err)
	}
	// conversations.replies: the thread's first 15 (oldest first), then 429.
	msgs, more, _, err := noRetry.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: parent.TS, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 15 || !more || msgs[0].Text != "root" || msgs[1].Text != "r0" {
		t.Errorf("replies page = %d, more %v, first %q %q", len(msgs), more, msgs[0].Text, msgs[1].Text)
	}
	if _, _, _, err := noRetry.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: parent.TS}); err == nil {
		t.Error("second replies call was not limited")
	}
	// Another workspace keeps the normal limits.
	emu.Post(slackemu.UserPost{Team: slackemu.TeamID2, Channel: slackemu.ChannelT2, User: slackemu.UserT2, Text: "x", Silent: true})
	api2 := slack.New(slackemu.BotToken2, slack.OptionAPIURL(emu.APIURL()))
	for range 2 {
		if _, err := api2.GetConversationHistory(&slack.GetConversationHistoryParameters{ChannelID: slackemu.ChannelT2}); err != nil {
			t.Errorf("T222 history: %v", err)
		}
	}
}

func TestActionTokensOnEvents(t *testing.T) {
	emu := newEmu(t, slackemu.Options{NoRateLimits: true})
	emu.AddChannel(slackemu.TeamID, slackemu.Channel{ID: chanTeam, Name: "team", Private: true, BotMember: true, Members: []string{slackemu.UserAlice}})
	sock := startSocket(t, emu, true)
	for _, tc := range []struct {
		channel, text string
		want          bool
	}{
		{slackemu.DMAlice, "hello", true},
		{chanTeam, "hello", true},
		{slackemu.ChannelGen, "hello", false},
		{slackemu.ChannelGen, "hello <@" + slackemu.BotUserID + ">", true},
	} {
		emu.Message(slackemu.TeamID, tc.channel, slackemu.UserAlice, tc.text, "")
		_, ev := sock.nextInner(t, "message")
		if _, got := ev["action_token"]; got != tc.want {
			t.Errorf("message in %s %q: action_token present %v, want %v", tc.channel, tc.text, got, tc.want)
		}
	}
}

// A DM thread reply carries the fields of Slack's recorded payload with
// an action token (bolt-python's fixture), the token both top-level and
// under assistant_thread.
func TestActionTokenEventMatchesRecordedPayload(t *testing.T) {
	emu := newEmu(t, slackemu.Options{NoRateLimits: true})
	var fixture map[string]struct {
		Event map[string]any `json:"event"`
	}
	readJSON(t, "testdata/events-assistant-thread.json", &fixture)
	want := fixture["user_message_event_body_with_action_token"].Event
	sock := startSocket(t, emu, true)
	root := emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "first", "")
	sock.nextInner(t, "message")
	emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "When Slack was released?", root.TS)
	_, got := sock.nextInner(t, "message")
	for _, m := range missingKeys(want, got, "") {
		if m != "user_profile" { // not emulated
			t.Errorf("field %s missing", m)
		}
	}
	nested, _ := got["assistant_thread"].(map[string]any)
	tok, _ := got["action_token"].(string)
	if tok == "" || nested["action_token"] != tok {
		t.Errorf("tokens: top-level %q, nested %v", tok, nested)
	}
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9a-f]{8}$`).MatchString(tok) {
		t.Errorf("token %q is not shaped like Slack's", tok)
	}
}
