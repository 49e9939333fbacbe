package slackemu_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// The real slack-go client talks to the emulator through OptionAPIURL; a
// bot binary gets the same with SLACK_API_URL=emu.APIURL(),
// SLACK_BOT_TOKEN=slackemu.BotToken and SLACK_APP_TOKEN=slackemu.AppToken.
func Example() {
	emu := slackemu.New(slackemu.Options{AckDeadline: time.Second})
	defer emu.Close()

	api := slack.New(slackemu.BotToken, slack.OptionAppLevelToken(slackemu.AppToken), slack.OptionAPIURL(emu.APIURL()))
	sm := socketmode.New(api)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = sm.RunContext(ctx) }()
	defer func() { cancel(); <-done }()

	// A person mentions the bot; the bot acks and answers in the thread.
	posted := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "what's up?", "")
	for ev := range sm.Events {
		if ev.Type != socketmode.EventTypeEventsAPI {
			continue
		}
		_ = sm.AckCtx(ctx, ev.Request.EnvelopeID, nil)
		_, ts, _ := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionTS(posted.TS), slack.MsgOptionMarkdownText("All good"))
		_, _, _, _ = api.UpdateMessage(slackemu.ChannelGen, ts, slack.MsgOptionMarkdownText("All good, thanks!"))
		break
	}

	// Assertions read the store; poll with a generous deadline.
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	_ = emu.WaitFor(wctx, func() bool { return len(emu.BotReplies(slackemu.ChannelGen, posted.TS)) == 1 })
	reply := emu.BotReplies(slackemu.ChannelGen, posted.TS)[0]
	fmt.Println(reply.Versions())
	env, err := emu.WaitAck(wctx, posted.Envelope)
	fmt.Println(err == nil && env.Acked, len(env.Deliveries))
	// Output:
	// [All good All good, thanks!]
	// true 1
}

// A person posts a screenshot in a thread the bot is asked about: the bot
// reads the thread with conversations.replies and downloads the file with
// its token from url_private_download.
func ExampleServer_Post() {
	emu := slackemu.New(slackemu.Options{})
	defer emu.Close()
	png := []byte("\x89PNG\r\n\x1a\n…") // any bytes; real PNGs also get original_w/h

	// Earlier messages, written before the bot was asked (no events).
	parent, _ := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserBob, Text: "deploy failed", Silent: true})
	_, _ = emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserBob, ThreadTS: parent.TS, Silent: true,
		Files: []slackemu.File{{Name: "error.png", Content: png}}})
	// The mention: an app_mention envelope goes to the socket.
	emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "what does this error mean?", parent.TS)

	api := slack.New(slackemu.BotToken, slack.OptionAPIURL(emu.APIURL()))
	msgs, _, _, _ := api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: parent.TS})
	f := msgs[1].Files[0]
	var got bytes.Buffer
	err := api.GetFile(f.URLPrivateDownload, &got)
	fmt.Println(len(msgs), f.Name, f.Mimetype, err == nil && bytes.Equal(got.Bytes(), png))

	// Another workspace's token is sent to the sign-in page instead.
	other := slack.New(slackemu.BotToken2, slack.OptionAPIURL(emu.APIURL()))
	fmt.Println(other.GetFile(f.URLPrivateDownload, &got) != nil)
	// Output:
	// 3 error.png image/png true
	// true
}

// A second workspace installs the app through OAuth; its token is its own.
func ExampleServer_AuthorizeURL() {
	emu := slackemu.New(slackemu.Options{OAuth: slackemu.OAuthOptions{RedirectURLs: []string{"http://127.0.0.1:9/slack/oauth_redirect"}}})
	defer emu.Close()

	// The browser step: the bot's install page redirects here; the emulator
	// approves at once and sends the browser back with a code.
	q := url.Values{"client_id": {slackemu.ClientID}, "scope": {"chat:write,files:read"}, "state": {"s1"}, "team": {slackemu.TeamID2},
		"redirect_uri": {"http://127.0.0.1:9/slack/oauth_redirect"}}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, _ := noFollow.Get(emu.AuthorizeURL() + "?" + q.Encode())
	resp.Body.Close()
	back, _ := url.Parse(resp.Header.Get("Location"))

	// The bot's redirect handler exchanges the code.
	inst, _ := slack.GetOAuthV2Response(http.DefaultClient, slackemu.ClientID, slackemu.ClientSecret, back.Query().Get("code"),
		"http://127.0.0.1:9/slack/oauth_redirect", slack.OAuthOptionAPIURL(emu.APIURL()))
	api := slack.New(inst.AccessToken, slack.OptionAPIURL(emu.APIURL()))
	at, _ := api.AuthTest()
	_, _, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("wrong workspace", false))
	fmt.Println(back.Query().Get("state"), inst.Team.ID, at.UserID, err)
	// Output:
	// s1 T222 U0BOT2 channel_not_found
}
