package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
)

// SlackPreset is what /bobbin mcp add slack needs beyond MCP: the MCP
// value has it when the bot offers Slack's MCP server as a preset
// (cmd/bot's adapter does); without it the command says it is not
// available.
type SlackPreset interface {
	// SlackMCP is the URL the preset connects to unless the admin names
	// another (SLACK_MCP_URL), and the settings it needs that are not set
	// (SLACK_CLIENT_ID, SLACK_CLIENT_SECRET; none when it can be added).
	SlackMCP() (url string, missing []string)
}

// addSlack answers /bobbin mcp add slack [<url>]: Slack's MCP server,
// per person, signing in with the app's own client (the preset: the
// registration names it, the credentials stay in the bot's
// configuration).
func (a *Admin) addSlack(ctx context.Context, to Target, team, user, url string) any {
	sp, ok := a.o.MCP.(SlackPreset)
	if !ok {
		return ephemeralAck("Slack's MCP server is not available as a preset on this bot.")
	}
	def, missing := sp.SlackMCP()
	if len(missing) > 0 {
		return ephemeralAck(fmt.Sprintf("Slack's MCP server signs each person in with this Slack app's own client id and secret, and the bot's operator has not set %s. Nothing was saved. "+
			"Ask them to set it (the app's Basic Information → App Credentials), then run `/bobbin mcp add slack` again.", mrkdwn.EscapeText(strings.Join(missing, " and "))))
	}
	url = cmp.Or(url, def)
	if err := a.o.MCP.ValidateURL(url); err != nil {
		return ephemeralAck(mrkdwn.EscapeText("That URL can't be registered: "+err.Error()+".") + " Use the `https://` URL of Slack's MCP server, or leave it out.")
	}
	return a.laterReply(ctx, to, "Connecting to Slack's MCP server…", func(ctx context.Context) reply {
		return a.mcpAddSlack(ctx, to, team, user, url)
	})
}

// mcpAddSlack checks that the server at url asks for OAuth, then
// registers the preset (per-user) and offers the admin a Connect button.
func (a *Admin) mcpAddSlack(ctx context.Context, to Target, team, user, url string) reply {
	name := servers.PresetSlack
	if msg := a.nameTaken(ctx, team, name); msg != "" {
		return reply{text: msg}
	}
	_, err := a.o.MCP.Probe(ctx, name, url, nil)
	switch {
	case errors.Is(err, servers.ErrOAuthUnavailable):
		return reply{text: noPublicURL(name, url)}
	case errors.Is(err, servers.ErrNeedsOAuth):
	case err != nil:
		a.log.Info("bot: probing Slack's MCP server failed", "team", team, "url", publicURL(url), "err", err)
		return reply{text: mrkdwn.EscapeText(fmt.Sprintf("I couldn't reach Slack's MCP server at %s: %v.", publicURL(url), err)) +
			" Nothing was saved. Check the URL (SLACK_MCP_URL), then run `/bobbin mcp add slack` again."}
	default:
		return reply{text: mrkdwn.EscapeText(fmt.Sprintf("The server at %s answered without asking anyone to sign in, so it is not Slack's MCP server.", publicURL(url))) +
			" Nothing was saved. Register it with `/bobbin mcp add <name> <https-url>` instead."}
	}
	return a.mcpAddOAuth(ctx, to, team, servers.Registration{Name: name, URL: url, Auth: authUser, Preset: servers.PresetSlack, CreatedBy: user})
}
