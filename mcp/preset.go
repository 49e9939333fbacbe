package mcp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Preset is an OAuth client a registration may name instead of carrying
// one (servers.Registration.Preset): a client pre-registered with the
// server's authorization server, as client_id, client_secret,
// client_issuer and scopes do for servers of the config file. It lives in
// the process's configuration only; registrations store its name.
type Preset struct {
	// ClientID and ClientSecret are the pre-registered confidential
	// client (both required).
	ClientID, ClientSecret string
	// ClientIssuer, when set, is the authorization server the client
	// belongs to (see ServerConfig.ClientIssuer).
	ClientIssuer string
	// Scopes are asked for explicitly (a server's WWW-Authenticate scope
	// still wins).
	Scopes []string
	// Missing, when the client is not configured, names the settings
	// that are not set ("SLACK_CLIENT_ID", …): servers naming the preset
	// cannot connect, and say so.
	Missing []string
}

// DefaultSlackMCPURL is Slack's MCP server (SLACK_MCP_URL's default).
const DefaultSlackMCPURL = "https://mcp.slack.com/mcp"

// SlackScopes are the user scopes the Slack preset asks for: search
// (public and private channels, group DMs, DMs), reading conversations
// and their threads, people's profiles, sending messages as the person
// and reading canvases. Writing canvases, files and e-mail addresses are
// left out.
var SlackScopes = []string{
	"search:read.public", "search:read.private", "search:read.mpim", "search:read.im",
	"channels:history", "groups:history", "mpim:history", "im:history",
	"users:read", "chat:write", "canvases:read",
}

// SlackPreset is the preset of Slack's MCP server: the app's own client
// id and secret (the ones of installs), Slack's user scopes. Missing
// names what is not set.
func SlackPreset(clientID, clientSecret string) Preset {
	p := Preset{ClientID: clientID, ClientSecret: clientSecret, Scopes: SlackScopes}
	if clientID == "" {
		p.Missing = append(p.Missing, "SLACK_CLIENT_ID")
	}
	if clientSecret == "" {
		p.Missing = append(p.Missing, "SLACK_CLIENT_SECRET")
	}
	return p
}

// presetAuth is serverAuth for a server registered with a preset: the
// client comes from Options.Presets, as it is configured now.
func (mt *mount) presetAuth() (serverAuth, error) {
	name := mt.cfg.Preset
	p, ok := mt.m.opts.Presets[name]
	switch {
	case !ok:
		return serverAuth{}, fmt.Errorf("the %s preset is not available on this bot", name)
	case len(p.Missing) > 0 || p.ClientID == "" || p.ClientSecret == "":
		missing := strings.Join(p.Missing, " and ")
		if missing == "" {
			missing = "its client id and secret"
		}
		return serverAuth{}, fmt.Errorf("the %s preset needs %s, which the bot's operator has not set", name, missing)
	}
	return serverAuth{name: mt.cfg.Name, url: strings.TrimSpace(mt.cfg.URL), mode: mt.authMode(),
		clientID: p.ClientID, secret: p.ClientSecret, clientIssuer: p.ClientIssuer, scopes: p.Scopes,
		checked: mt.source == sourceRegistered, allowPrivate: mt.m.opts.AllowPrivateNetworks,
		resolve: mt.m.opts.Resolver, registrar: mt.registrar}, nil
}

// errSlackMCPOff replaces Slack's -32600 "App is not enabled for Slack
// MCP server access" (every call, initialize included, after a
// successful sign-in, while the app's MCP toggle is off).
var errSlackMCPOff = errors.New("the Slack MCP server refused this app: it is not enabled for Slack MCP server access. " +
	"A Slack admin of the app turns it on in the app's settings (api.slack.com/apps → the app → Agents & AI Apps → Model Context Protocol), then the server is used at the next message")

// explainErr turns a server's answers that people can act on into words
// that say what to do; other errors pass unchanged.
func explainErr(err error) error {
	if err == nil {
		return nil
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code == jsonrpc.CodeInvalidRequest && strings.Contains(we.Message, "not enabled for Slack MCP") ||
		strings.Contains(err.Error(), "App is not enabled for Slack MCP server access") {
		return errSlackMCPOff
	}
	return err
}
