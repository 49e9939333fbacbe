package admin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// MCP servers that need OAuth (issue 13), the Slack side: /bobbin mcp
// connect and disconnect, with Connect buttons (ask.ConnectBlocks: a URL
// button whose url is the authorization endpoint itself, shown only to
// the person it is for: Options.ConnectBlocks). The prompt a turn shows
// and the callback's end are bot/ask's.

// Auth is what OAuth needs of the MCP manager besides MCP. cmd/bot's
// adapter of *mcp.Manager implements both on the value passed as
// Options.MCP; without it OAuth servers cannot be connected from Slack.
type Auth interface {
	// StatusFor is Status with the OAuth connection states of user.
	StatusFor(ctx context.Context, team, user string) []servers.Status
	// ConnectionState is one OAuth server's connection for user (the
	// workspace's in workspace mode); ok is false for servers without
	// OAuth, servers.ErrUnknownServer for unknown names.
	ConnectionState(ctx context.Context, team, server, user string) (st servers.OAuth, ok bool, err error)
	// StartConnect returns a new authorization link for user (the
	// workspace's connection in workspace mode: only admins may ask) and
	// when it expires.
	StartConnect(ctx context.Context, team, server, user string) (link string, expires time.Time, err error)
	// Disconnect removes user's connection (the workspace's in workspace
	// mode), revoking it where the server supports it; servers.ErrNotConnected
	// when there is none. The registration stays.
	Disconnect(ctx context.Context, team, server, user string) error
}

// Auth modes of an OAuth server (servers.Status.Auth, servers.OAuth.Mode).
const (
	authWorkspace = "workspace"
	authUser      = "user"
)

// Button labels.
const (
	labelConnect    = "Connect"
	labelDisconnect = "Disconnect"
)

// auth is the MCP manager's OAuth side (nil without it).
func (a *Admin) auth() Auth {
	au, _ := a.o.MCP.(Auth)
	return au
}

// modeWords names an auth mode for people.
func modeWords(mode string) string {
	if mode == authUser {
		return "per-user"
	}
	return "workspace"
}

// ephemeralIn posts text (and blocks) only user sees, in channel and
// thread ("" for none; the bot answers in threads in DMs too), must-deliver
// within ctx.
func (a *Admin) ephemeralIn(ctx context.Context, team, channel, thread, user, text string, blocks []slack.Block) error {
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if len(blocks) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(blocks...))
	}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	return a.o.API.Do(ctx, slackapi.Call{Team: team, Method: slackapi.ChatPostEphemeral}, func(ctx context.Context, api *slack.Client) error {
		_, err := api.PostEphemeralContext(ctx, channel, user, opts...)
		return err
	})
}

// reply is an answer with optional blocks.
type reply struct {
	text   string
	blocks []slack.Block
}

// laterReply runs job after the ack and sends its answer, which may carry
// blocks (a Connect button), to the person. Run waits for it on shutdown.
func (a *Admin) laterReply(ctx context.Context, to Target, ack string, job func(ctx context.Context) reply) any {
	a.o.Jobs.Go(ctx, "a slash command", func(jctx context.Context) {
		r := job(jctx)
		if len(r.blocks) == 0 {
			a.respond(jctx, to, r.text)
			return
		}
		a.respondBlocks(jctx, to, r)
	})
	if ack == "" {
		return nil
	}
	return ephemeralAck(ack)
}

// respondBlocks sends one ephemeral answer with blocks: through the
// response_url, else with chat.postEphemeral.
func (a *Admin) respondBlocks(ctx context.Context, to Target, r reply) {
	if to.ResponseURL != "" {
		hc := a.o.HTTPClient
		msg := &slack.WebhookMessage{ResponseType: "ephemeral", Text: r.text, Blocks: &slack.Blocks{BlockSet: r.blocks}}
		if err := slack.PostWebhookCustomHTTPContext(ctx, to.ResponseURL, hc, msg); err == nil {
			return
		}
	}
	if to.Channel == "" || to.User == "" {
		return
	}
	if err := a.ephemeralIn(ctx, to.Team, to.Channel, "", to.User, r.text, r.blocks); err != nil {
		a.log.Warn("bot: slash command answer not delivered", "err", err)
	}
}

// mcpConnect answers /bobbin mcp connect <name>: a Connect button for the
// person's account (per-user servers) or, for admins, the workspace's.
func (a *Admin) mcpConnect(ctx context.Context, to Target, team, user, name string) reply {
	ma := a.auth()
	if ma == nil {
		return reply{text: "Connecting MCP servers is not available on this bot."}
	}
	st, ok, err := ma.ConnectionState(ctx, team, name, user)
	switch {
	case errors.Is(err, servers.ErrUnknownServer):
		return reply{text: fmt.Sprintf("This workspace has no MCP server named `%s`. See `/bobbin mcp list`.", mrkdwn.InlineCode(name))}
	case err != nil:
		a.log.Warn("bot: reading an MCP connection failed", "team", team, "server", name, "err", err)
		return reply{text: "I couldn't read this server's connection just now. Please try again in a moment."}
	case !ok:
		return reply{text: fmt.Sprintf("`%s` doesn't use OAuth: there is nothing to connect.", mrkdwn.InlineCode(name))}
	}
	if st.Mode == authWorkspace {
		if !a.o.People.Standing(ctx, team, user, "").Admin {
			return reply{text: fmt.Sprintf("`%s` is connected once for the whole workspace; only a workspace admin can connect it.", mrkdwn.InlineCode(name))}
		}
	}
	link, expires, err := ma.StartConnect(ctx, team, name, user)
	if err != nil {
		a.log.Info("bot: starting an MCP connection failed", "team", team, "server", name, "err", err)
		return reply{text: mrkdwn.EscapeText(fmt.Sprintf("I couldn't start connecting %s: %v.", name, err))}
	}
	a.o.RememberConnect(ctx, team, name, user, to.Channel, "", expires)
	what := "your account"
	if st.Mode == authWorkspace {
		what = "it for the whole workspace"
	}
	head := fmt.Sprintf(":electric_plug: Connect %s to `%s`.", what, mrkdwn.InlineCode(name))
	if st.Connected {
		head = fmt.Sprintf(":electric_plug: `%s` is already connected; Connect again to replace the connection.", mrkdwn.InlineCode(name))
	}
	return reply{text: "Connect " + mrkdwn.EscapeText(name), blocks: a.o.ConnectBlocks(head, name, link, expires, "")}
}

// mcpDisconnect answers /bobbin mcp disconnect <name>.
func (a *Admin) mcpDisconnect(ctx context.Context, team, user, name string) string {
	ma := a.auth()
	if ma == nil {
		return "Connecting MCP servers is not available on this bot."
	}
	st, ok, err := ma.ConnectionState(ctx, team, name, user)
	switch {
	case errors.Is(err, servers.ErrUnknownServer):
		return fmt.Sprintf("This workspace has no MCP server named `%s`. See `/bobbin mcp list`.", mrkdwn.InlineCode(name))
	case err != nil:
		return "I couldn't read this server's connection just now. Please try again in a moment."
	case !ok:
		return fmt.Sprintf("`%s` doesn't use OAuth: there is nothing to disconnect.", mrkdwn.InlineCode(name))
	}
	whose := "Your connection to"
	if st.Mode == authWorkspace {
		if !a.o.People.Standing(ctx, team, user, "").Admin {
			return fmt.Sprintf("`%s` is connected for the whole workspace; only a workspace admin can disconnect it.", mrkdwn.InlineCode(name))
		}
		whose = "The workspace's connection to"
	}
	err = ma.Disconnect(ctx, team, name, user)
	switch {
	case errors.Is(err, servers.ErrNotConnected):
		return fmt.Sprintf("%s `%s` doesn't exist: nothing to disconnect.", whose, mrkdwn.InlineCode(name))
	case err != nil:
		a.log.Warn("bot: disconnecting an MCP server failed", "team", team, "server", name, "err", err)
		return mrkdwn.EscapeText(fmt.Sprintf("I couldn't disconnect %s: %v.", name, err))
	}
	a.PublishHome(ctx, team, user)
	return fmt.Sprintf("%s `%s` is removed (its token revoked where the server supports it). The server stays registered; connect again with `/bobbin mcp connect %s`.",
		whose, mrkdwn.InlineCode(name), mrkdwn.InlineCode(name))
}

// mcpAddOAuth registers a server that answered 401 with OAuth metadata
// and answers with a Connect button for the admin: a workspace server's
// connection, or, for a per-user one, the admin's own (its tools are
// listed through it).
func (a *Admin) mcpAddOAuth(ctx context.Context, to Target, team string, reg servers.Registration) reply {
	name, user, mode, url, headers := reg.Name, reg.CreatedBy, reg.Auth, reg.URL, reg.Headers
	if r := a.saveRegistration(ctx, team, reg); r != "" {
		return reply{text: r}
	}
	fields := map[string]string{"event": auditMCPAdd, "by": user, "server": name, "url": publicURL(url),
		"outcome": "oauth " + modeWords(mode), "headers": strings.Join(slices.Sorted(maps.Keys(headers)), ",")}
	if reg.Preset != "" {
		fields["preset"] = reg.Preset
	}
	a.o.Audit(ctx, team, fields)
	var s strings.Builder
	fmt.Fprintf(&s, "*Registered `%s`* at %s. It uses OAuth (%s): ", mrkdwn.InlineCode(name), mrkdwn.EscapeText(publicURL(url)), modeWords(mode))
	if mode == authUser {
		s.WriteString("each person connects their own account, and calls act as them. Connect yours now: its tools are listed through your connection.")
		if reg.Preset == servers.PresetSlack {
			s.WriteString(" Slack's MCP server also needs Model Context Protocol turned on in the app's settings (Agents & AI Apps); until it is, its calls say so.")
		}
	} else {
		s.WriteString("one connection for the whole workspace, used by every call here. Connect it now.")
	}
	ma := a.auth()
	if ma == nil {
		return reply{text: s.String()}
	}
	link, expires, err := ma.StartConnect(ctx, team, name, user)
	if err != nil {
		a.log.Info("bot: starting an MCP connection failed", "team", team, "server", name, "err", err)
		fmt.Fprintf(&s, "\n%s Try `/bobbin mcp connect %s`.", mrkdwn.EscapeText(fmt.Sprintf("I couldn't start connecting: %v.", err)), mrkdwn.InlineCode(name))
		return reply{text: s.String()}
	}
	a.o.RememberConnect(ctx, team, name, user, to.Channel, "", expires)
	return reply{text: "Registered " + mrkdwn.EscapeText(name), blocks: a.o.ConnectBlocks(s.String(), name, link, expires, "")}
}

// forgetConnections deletes the OAuth connections of a removed
// registration: a server registered again under the name starts clean.
func (a *Admin) forgetConnections(ctx context.Context, team, server string) {
	if err := a.o.Store.DeleteOAuthConnections(ctx, team, server); err != nil {
		a.log.Warn("bot: deleting a removed server's OAuth connections failed", "team", team, "server", server, "err", err)
	}
}

// oauthLine describes an OAuth server's connection in /bobbin mcp list.
func oauthLine(x servers.Status) string {
	o := x.OAuth
	if o == nil {
		return ""
	}
	whose := "for the workspace"
	if o.Mode == authUser {
		whose = "for you"
	}
	switch {
	case o.Connected:
		return fmt.Sprintf("    :key: OAuth, %s: connected %s", modeWords(o.Mode), whose)
	case o.Reason == "reconnect needed":
		return fmt.Sprintf("    :warning: OAuth, %s: not connected %s: reconnect needed (the server refused the saved sign-in). Run `/bobbin mcp connect %s`.",
			modeWords(o.Mode), whose, mrkdwn.InlineCode(x.Name))
	}
	line := fmt.Sprintf("    :electric_plug: OAuth, %s: not connected %s", modeWords(o.Mode), whose)
	if o.Reason != "" && o.Reason != "not connected" && o.Reason != "per-user" {
		line += " (" + mrkdwn.EscapeText(o.Reason) + ")"
	}
	return line + fmt.Sprintf(". Connect with `/bobbin mcp connect %s`.", mrkdwn.InlineCode(x.Name))
}

// noConnectionYet reports whether an OAuth server has not listed its
// tools because nobody has connected it yet.
func noConnectionYet(x servers.Status) bool {
	return x.OAuth != nil && x.Tools == 0 && x.State != "connected"
}
