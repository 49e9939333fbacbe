package slackapi

import (
	"context"
	"net/http"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/mrkdwn"
)

// Msg is a message to send: escaped mrkdwn text (the notification and
// fallback text when there are blocks), optional blocks, and the thread
// to post in ("" for none).
type Msg struct {
	Text   mrkdwn.Text
	Blocks []slack.Block
	Thread string
}

// Options are m's message options (for a call made through Client.Do).
func (m Msg) Options() []slack.MsgOption { return m.options() }

func (m Msg) options() []slack.MsgOption {
	// Every post keeps link and media previews off (a tool's or the
	// model's link must not unfurl into the thread).
	opts := []slack.MsgOption{slack.MsgOptionText(string(m.Text), false), slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl()}
	if len(m.Blocks) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(m.Blocks...))
	}
	if m.Thread != "" {
		opts = append(opts, slack.MsgOptionTS(m.Thread))
	}
	return opts
}

// Post posts msg in channel as a must-deliver chat.postMessage and returns
// its ts.
func (c *Client) Post(ctx context.Context, team, channel string, msg Msg) (ts string, err error) {
	err = c.Do(ctx, Call{Team: team, Method: ChatPostMessage, Channel: channel}, func(ctx context.Context, api *slack.Client) error {
		_, ts, err = api.PostMessageContext(ctx, channel, msg.options()...)
		return err
	})
	return ts, err
}

// DM posts msg in the person's direct messages with the bot (Slack opens
// the conversation when the channel is a user id).
func (c *Client) DM(ctx context.Context, team, user string, msg Msg) error {
	_, err := c.Post(ctx, team, user, msg)
	return err
}

// Update replaces the message at ts in channel with msg (must-deliver
// chat.update; msg.Thread is ignored).
func (c *Client) Update(ctx context.Context, team, channel, ts string, msg Msg) error {
	msg.Thread = ""
	return c.Do(ctx, Call{Team: team, Method: ChatUpdate}, func(ctx context.Context, api *slack.Client) error {
		_, _, _, err := api.UpdateMessageContext(ctx, channel, ts, msg.options()...)
		return err
	})
}

// Ephemeral shows msg to user alone in channel (chat.postEphemeral).
func (c *Client) Ephemeral(ctx context.Context, team, channel, user string, msg Msg) error {
	return c.Do(ctx, Call{Team: team, Method: ChatPostEphemeral}, func(ctx context.Context, api *slack.Client) error {
		_, err := api.PostEphemeralContext(ctx, channel, user, msg.options()...)
		return err
	})
}

// Respond answers through an interaction's response_url, ephemerally (or
// replacing the message the interaction came from when replace is set). It
// is not a Web API call: no token, no budget; hc carries it.
func Respond(ctx context.Context, hc *http.Client, responseURL string, msg Msg, replace bool) error {
	return slack.PostWebhookCustomHTTPContext(ctx, responseURL, hc, &slack.WebhookMessage{
		ResponseType: "ephemeral", Text: string(msg.Text), ReplaceOriginal: replace,
		Blocks: blocksOrNil(msg.Blocks),
	})
}

func blocksOrNil(b []slack.Block) *slack.Blocks {
	if len(b) == 0 {
		return nil
	}
	return &slack.Blocks{BlockSet: b}
}
