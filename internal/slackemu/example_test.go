package slackemu_test

import (
	"context"
	"fmt"
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
