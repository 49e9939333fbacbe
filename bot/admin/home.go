package admin

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// The App Home tab (issue 13): each person sees the workspace's MCP
// servers, which need connecting (with a Connect link made for them at
// publish time: Slack sends app_home_opened on every visit, so links are
// fresh when the tab is opened), and their own connections with a
// Disconnect button. It is published again after a connect or disconnect.

// Action id prefixes of the Home buttons; the server name follows (action
// ids must differ within a view).
const (
	actionHomeConnect    = "bobbin_home_connect:"    // a URL button: ack only
	actionHomeDisconnect = "bobbin_home_disconnect:" // value: the server name
)

// maxHomeServers bounds the servers listed per section (a Home view takes
// 100 blocks).
const maxHomeServers = 20

// homeTimeout bounds building and publishing a Home view (it may list
// servers and make Connect links).
const homeTimeout = 20 * time.Second

// HomeOpened publishes the person's Home after the ack of
// app_home_opened (the root runs it after the ack).
func (a *Admin) HomeOpened(team, user string) func(context.Context) {
	return func(ctx context.Context) {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), homeTimeout)
		defer cancel()
		a.PublishHome(hctx, team, user)
	}
}

// homeEntry is one server as the person's Home shows it.
type homeEntry struct {
	st   servers.Status
	link string // Connect link ("" when none could be made)
	err  string
}

// PublishHome builds and publishes user's Home tab (views.publish). Errors
// are logged: a stale Home is refreshed on the next visit.
func (a *Admin) PublishHome(ctx context.Context, team, user string) {
	if team == "" || user == "" {
		return
	}
	var st []servers.Status
	ma := a.auth()
	ss, scoped := a.o.MCP.(ScopedStatus)
	switch {
	case ma != nil && scoped: // with the person's verdicts: no Connect for a server they may not use
		acc := a.o.Access(ctx, team, "", user)
		acc.AnyPlace = true
		st = ss.StatusAt(ctx, acc)
	case ma != nil:
		st = ma.StatusFor(ctx, team, user)
	case a.o.MCP != nil:
		st = a.o.MCP.Status(ctx, team)
	}
	a.fillPolicies(ctx, team, st) // policy.go
	admin := a.o.People.Standing(ctx, team, user, "").Admin
	var needs, mine []homeEntry
	for _, x := range st {
		o := x.OAuth
		if o == nil || (!o.Connected && x.Here != nil && !x.Here.OK) {
			continue
		}
		switch {
		case o.Connected && (o.Mode == authUser || admin):
			mine = append(mine, homeEntry{st: x})
		case !o.Connected && (o.Mode == authUser || admin) && ma != nil && len(needs) < maxHomeServers:
			e := homeEntry{st: x}
			link, _, err := ma.StartConnect(ctx, team, x.Name, user)
			if err != nil || len(link) > 3000 {
				e.err = "I couldn't make a Connect link just now; try `/bobbin mcp connect " + mrkdwn.InlineCode(x.Name) + "`."
			} else {
				e.link = link
			}
			needs = append(needs, e)
		case !o.Connected:
			needs = append(needs, homeEntry{st: x, err: "A workspace admin connects it for everyone."})
		}
	}
	view := slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: homeBlocks(st, needs, mine, a.homeProfileLine())}}
	err := a.o.API.Do(ctx, slackapi.Call{Team: team, Method: slackapi.ViewsPublish}, func(ctx context.Context, api *slack.Client) error {
		_, err := api.PublishViewContext(ctx, slack.PublishViewContextRequest{UserID: user, View: view})
		return err
	})
	if err != nil {
		a.log.Info("bot: publishing the App Home failed", "team", team, "user", user, "err", err)
	}
}

func mdText(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, false)
}

// homeBlocks lays out the Home: what needs connecting, the person's
// connections, then every server.
// profiles is the line on agent profiles ("" without them).
func homeBlocks(st []servers.Status, needs, mine []homeEntry, profiles string) []slack.Block {
	blocks := []slack.Block{
		slack.NewHeaderBlock(mrkdwn.Plain("Bobbin")),
		slack.NewSectionBlock(mdText("Mention me in a channel or send me a direct message. Before I run a tool I ask in the thread. "+
			"Servers that sign in with OAuth need a connection: for the whole workspace (an admin connects it) or per person (you connect your own account, and calls act as you)."),
			nil, nil),
	}
	if profiles != "" {
		blocks = append(blocks, slack.NewContextBlock("", mdText(profiles)))
	}
	if len(needs) > 0 {
		blocks = append(blocks, slack.NewDividerBlock(), slack.NewHeaderBlock(mrkdwn.Plain("Needs connecting")))
		for _, e := range needs {
			text := fmt.Sprintf("*`%s`* (%s): %s", mrkdwn.InlineCode(e.st.Name), modeWords(e.st.OAuth.Mode), mrkdwn.EscapeText(homeReason(e.st.OAuth)))
			var acc *slack.Accessory
			if e.link != "" {
				btn := slack.NewButtonBlockElement(actionHomeConnect+e.st.Name, e.st.Name, mrkdwn.Plain(labelConnect)).WithStyle(slack.StylePrimary)
				btn.URL = e.link
				acc = slack.NewAccessory(btn)
			} else if e.err != "" {
				text += "\n_" + e.err + "_"
			}
			blocks = append(blocks, slack.NewSectionBlock(mdText(text), nil, acc))
		}
	}
	blocks = append(blocks, slack.NewDividerBlock(), slack.NewHeaderBlock(mrkdwn.Plain("Your connections")))
	if len(mine) == 0 {
		blocks = append(blocks, slack.NewContextBlock("", mdText("You have no connections yet.")))
	}
	for i, e := range mine {
		if i >= maxHomeServers {
			break
		}
		whose := "your account"
		if e.st.OAuth.Mode == authWorkspace {
			whose = "the workspace's connection"
		}
		text := fmt.Sprintf("*`%s`*: %s, connected", mrkdwn.InlineCode(e.st.Name), whose)
		if by := e.st.OAuth.ConnectedBy; by != "" && e.st.OAuth.Mode == authWorkspace {
			text += fmt.Sprintf(" by <@%s>", mrkdwn.EscapeText(by))
		}
		btn := slack.NewButtonBlockElement(actionHomeDisconnect+e.st.Name, e.st.Name, mrkdwn.Plain(labelDisconnect)).WithStyle(slack.StyleDanger)
		btn.Confirm = slack.NewConfirmationBlockObject(mrkdwn.Plain("Disconnect "+mrkdwn.ClipRunes(e.st.Name, 40)+"?"),
			mrkdwn.Plain("Bobbin forgets this connection and revokes its token where the server supports it. The server stays registered."),
			mrkdwn.Plain(labelDisconnect), mrkdwn.Plain("Keep"))
		blocks = append(blocks, slack.NewSectionBlock(mdText(text), nil, slack.NewAccessory(btn)))
	}
	blocks = append(blocks, slack.NewDividerBlock(), slack.NewHeaderBlock(mrkdwn.Plain("MCP servers in this workspace")))
	if len(st) == 0 {
		blocks = append(blocks, slack.NewSectionBlock(mdText("No MCP servers are set up in this workspace. An admin can add one with `/bobbin mcp add`."), nil, nil))
	}
	var lines []string
	for i, x := range st {
		if i >= 3*maxHomeServers {
			lines = append(lines, fmt.Sprintf("_… and %d more: see `/bobbin mcp list`._", len(st)-i))
			break
		}
		line := fmt.Sprintf("• *`%s`*: %d tools", mrkdwn.InlineCode(x.Name), x.Tools)
		if x.OAuth != nil {
			state := "not connected"
			if x.OAuth.Connected {
				state = "connected"
			}
			who := "for the workspace"
			if x.OAuth.Mode == authUser {
				who = "for you"
			}
			line += fmt.Sprintf(" · OAuth %s, %s %s", modeWords(x.OAuth.Mode), state, who)
		}
		if x.State == "failed" && !noConnectionYet(x) {
			line += " · :x: unavailable"
		}
		if x.Here != nil && !x.Here.OK {
			line += " · not for you"
		}
		if x.Policy != nil {
			if p := policyToolsLine(*x.Policy); p != "" {
				line += "\n    " + mrkdwn.Clip(p, 600)
			}
		}
		lines = append(lines, line)
	}
	// A section takes 3000 characters: split the list.
	var cur strings.Builder
	for _, l := range lines {
		if cur.Len()+len(l)+1 > 2900 {
			blocks = append(blocks, slack.NewSectionBlock(mdText(cur.String()), nil, nil))
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte('\n')
		}
		cur.WriteString(l)
	}
	if cur.Len() > 0 {
		blocks = append(blocks, slack.NewSectionBlock(mdText(cur.String()), nil, nil))
	}
	if len(blocks) > 100 {
		blocks = blocks[:100]
	}
	return blocks
}

// homeReason says why a server needs connecting.
func homeReason(o *servers.OAuth) string {
	if o.Reason == "reconnect needed" {
		return "reconnect needed: the server refused the saved sign-in."
	}
	if o.Mode == authUser {
		return "connect your account to use its tools."
	}
	return "not connected for the workspace."
}

// Clicks reports the Home buttons of a block_actions callback (Action
// handles them).
func Clicks(cb slack.InteractionCallback) []*slack.BlockAction {
	if cb.Type != slack.InteractionTypeBlockActions {
		return nil
	}
	var out []*slack.BlockAction
	for _, a := range cb.ActionCallback.BlockActions {
		if a != nil && (strings.HasPrefix(a.ActionID, actionHomeConnect) || strings.HasPrefix(a.ActionID, actionHomeDisconnect)) {
			out = append(out, a)
		}
	}
	return out
}

// Action handles a Home button (of Clicks). Connect buttons are links (ack only);
// Disconnect runs after the ack (it may call the server's revocation
// endpoint) and publishes the Home again.
func (a *Admin) Action(ctx context.Context, cb slack.InteractionCallback, act *slack.BlockAction) {
	server, ok := strings.CutPrefix(act.ActionID, actionHomeDisconnect)
	if !ok || !serverNameRE.MatchString(server) {
		return
	}
	team, user := cmp.Or(cb.Team.ID, cb.User.TeamID), cb.User.ID
	if !a.o.People.Standing(ctx, team, user, cb.User.TeamID).MayUse {
		return
	}
	a.o.Jobs.Go(ctx, "a Home button", func(jctx context.Context) {
		// On success mcpDisconnect publishes the Home again.
		if msg := a.mcpDisconnect(jctx, team, user, server); !strings.Contains(msg, "is removed") {
			// Refused or failed: say why where the person is.
			a.dm(jctx, team, user, msg)
			a.PublishHome(jctx, team, user)
		}
	})
}

// dm posts text in the person's direct messages with the bot.
func (a *Admin) dm(ctx context.Context, team, user, text string) {
	// text is the bot's own mrkdwn (its callers escape what they quote).
	if err := a.o.API.DM(ctx, team, user, slackapi.Msg{Text: mrkdwn.Text(text)}); err != nil {
		a.log.Info("bot: direct message not delivered", "team", team, "err", err)
	}
}
