package ask

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// Connect prompts of MCP servers that need OAuth (issue 13): the
// ephemeral prompt a turn shows when a per-user server's tool is wanted
// by someone not connected yet (PromptConnect), and what happens when the
// callback completes on any replica (ConnectDone). The prompt is a URL
// button whose url is the authorization endpoint itself, shown only to
// the person it is for; the turn waits for the connection in the MCP
// manager, which Stop or the Timeout ends.

// Auth modes of an OAuth server (ConnectRequest.Mode).
const (
	AuthWorkspace = "workspace"
	AuthUser      = "user"
)

// ActionConnectLink is the action id of the Connect button: Slack sends a
// block_actions for a click on a URL button too, which is only acked.
const ActionConnectLink = "bobbin_connect_link"

// labelConnect is the Connect button's label.
const labelConnect = "Connect"

// auditConnectAsked: a turn asked someone to connect. OAuth connects,
// disconnects and refresh failures are audited by the MCP manager
// (oauth_*).
const auditConnectAsked = "oauth_connect_requested"

// ConnectRequest asks a person to connect an OAuth MCP server before a tool
// call can go on (cmd/bot adapts mcp.ConnectPrompt).
type ConnectRequest struct {
	// Team, User, Channel, Thread: who asked for the call, and where.
	Team, User, Channel, Thread string
	Server                      string
	// Mode is AuthUser or AuthWorkspace.
	Mode string
	// URL is the authorization link: only ever shown to User.
	URL     string
	Reason  string
	Expires time.Time
}

// connectNotice is where a person was asked to connect (session's
// ConnectNotice record), so the callback's replica can answer there.
type connectNotice struct {
	Channel string `json:"channel"`
	Thread  string `json:"thread,omitempty"`
}

// PromptConnect shows the Connect prompt of a turn: an ephemeral message to
// the requester in the thread (the link must not be usable by anyone
// else). It returns once shown; the caller waits for the connection, which
// Stop or APPROVAL_TIMEOUT ends. A workspace server needs an admin: anyone
// else is told to ask one, and the call fails.
func (p *Prompts) PromptConnect(ctx context.Context, r ConnectRequest) error {
	if r.Team == "" || r.User == "" || r.Channel == "" {
		return errors.New("nobody to ask to connect")
	}
	reason := cmp.Or(r.Reason, "not connected")
	if r.Mode == AuthWorkspace {
		if admin, _ := p.opts.Roles.IsAdmin(ctx, r.Team, r.User, ""); !admin {
			p.ephemeralIn(ctx, r.Team, r.Channel, r.Thread, r.User,
				fmt.Sprintf(":electric_plug: `%s` is connected once for the whole workspace, and it isn't (%s). A workspace admin can connect it with `/bobbin mcp connect %s`.",
					mrkdwn.InlineCode(r.Server), mrkdwn.EscapeText(reason), mrkdwn.InlineCode(r.Server)), nil)
			return fmt.Errorf("%s is not connected, and only a workspace admin can connect it (/bobbin mcp connect %s)", r.Server, r.Server)
		}
	}
	if len(r.URL) > 3000 {
		return errors.New("the authorization link is longer than a Slack button allows")
	}
	who := "your account"
	if r.Mode == AuthWorkspace {
		who = "it for the whole workspace"
	}
	head := fmt.Sprintf(":electric_plug: To use `%s` here I need you to connect %s (%s). I'll go on as soon as you're connected.",
		mrkdwn.InlineCode(r.Server), who, mrkdwn.EscapeText(reason))
	blocks := ConnectBlocks(head, r.Server, r.URL, r.Expires, "Stop withdraws this request.")
	if err := p.ephemeralIn(ctx, r.Team, r.Channel, r.Thread, r.User, "Connect "+mrkdwn.EscapeText(r.Server), blocks); err != nil {
		return fmt.Errorf("showing the Connect prompt: %w", err)
	}
	p.RememberConnect(ctx, r.Team, r.Server, r.User, r.Channel, r.Thread, r.Expires)
	p.opts.Audit(ctx, r.Team, map[string]string{"event": auditConnectAsked, "user": r.User, "server": r.Server,
		"channel": r.Channel, "thread": r.Thread, "outcome": reason})
	return nil
}

// ConnectBlocks is a Connect prompt: head, the URL button (for server,
// to link), and when the link stops working, then extra.
func ConnectBlocks(head, server, link string, expires time.Time, extra string) []slack.Block {
	btn := slack.NewButtonBlockElement(ActionConnectLink, server, slack.NewTextBlockObject(slack.PlainTextType, labelConnect, false, false))
	btn.URL = link
	btn.Style = slack.StylePrimary
	note := "This link is only for you"
	if !expires.IsZero() {
		note += " and works until " + mrkdwn.Date(expires).String()
	}
	note += "."
	if extra != "" {
		note += " " + extra
	}
	return []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, head, false, false), nil, nil),
		slack.NewActionBlock("bobbin_connect", btn),
		slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, note, false, false)),
	}
}

// RememberConnect records where user was asked to connect server (channel
// and thread, "" for none) until the link expires, so ConnectDone, on any
// replica, answers there.
func (p *Prompts) RememberConnect(ctx context.Context, team, server, user, channel, thread string, until time.Time) {
	ttl := time.Until(until)
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	raw, _ := json.Marshal(connectNotice{Channel: channel, Thread: thread})
	if err := p.store.PutConnectNotice(ctx, team, server, user, raw, ttl+time.Minute); err != nil {
		p.log.Debug("bot: recording where Connect was asked failed", "team", team, "server", server, "err", err)
	}
}

// ConnectDone tells the person whose OAuth callback just completed (on
// this replica; the waiting turn may run on another) how it went, where
// they asked when known, else in a direct message, and refreshes their App
// Home. failure is "" on success, else a message safe to show.
func (p *Prompts) ConnectDone(ctx context.Context, team, user, server, failure string) {
	if team == "" || user == "" || server == "" {
		return
	}
	var text string
	if failure == "" {
		text = fmt.Sprintf(":white_check_mark: Connected to `%s`.", mrkdwn.InlineCode(server))
	} else {
		text = fmt.Sprintf(":x: Connecting to `%s` didn't work: %s Try Connect again.", mrkdwn.InlineCode(server), mrkdwn.EscapeText(mrkdwn.Clip(failure, 300)))
	}
	var n connectNotice
	if raw, err := p.store.ConnectNotice(ctx, team, server, user); err == nil && raw != nil {
		_ = json.Unmarshal(raw, &n)
	}
	delivered := false
	if n.Channel != "" {
		delivered = p.ephemeralIn(ctx, team, n.Channel, n.Thread, user, text, nil) == nil
	}
	if !delivered {
		if err := p.api.DM(ctx, team, user, slackapi.Msg{Text: mrkdwn.Text(text)}); err != nil {
			p.log.Info("bot: direct message not delivered", "team", team, "err", err)
		}
	}
	p.opts.Home(ctx, team, user)
}
