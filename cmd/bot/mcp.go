package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/agent/servers"
	"log/slog"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/mcp"
	"github.com/bobbinbot/bobbin/session"
)

// registrations adapts the session store to mcp.RegistrationStore: the
// servers admins registered from Slack, secrets decrypted only here.
type registrations struct{ s *session.Store }

func (r registrations) Registrations(ctx context.Context, team string) ([]mcp.Registered, error) {
	regs, err := r.s.Registrations(ctx, team)
	if err != nil {
		return nil, err
	}
	out := make([]mcp.Registered, 0, len(regs))
	for _, reg := range regs {
		url, headers, err := bot.RegisteredServer(reg)
		if err != nil {
			return nil, err // names the registration already
		}
		// The auth mode is in the bot's record as "auth" once the bot
		// registers OAuth servers (absent: none).
		var rec struct {
			Auth string `json:"auth"`
		}
		_ = json.Unmarshal(reg.Record, &rec)
		sc, err := bot.RegisteredScope(reg)
		if err != nil {
			return nil, err // a scope that cannot be read must not become no scope
		}
		out = append(out, mcp.Registered{Name: reg.Name, URL: url, Headers: headers, Auth: rec.Auth, CreatedBy: reg.CreatedBy,
			Scope: sc})
	}
	return out, nil
}

// mcpAdmin adapts *mcp.Manager to bot.MCPAdmin (the bot does not import
// mcp).
type mcpAdmin struct {
	m            *mcp.Manager
	allowPrivate bool
}

func (a mcpAdmin) Status(ctx context.Context, team string) []servers.Status {
	return a.m.Status(ctx, team)
}

// StatusFor is Status with user's OAuth connection states (bot.MCPAuth).
func (a mcpAdmin) StatusFor(ctx context.Context, team, user string) []servers.Status {
	return a.m.StatusFor(ctx, team, user)
}

// StatusAt is Status with every server's scope verdict for a (the person
// running /bobbin mcp list, where they run it).
func (a mcpAdmin) StatusAt(ctx context.Context, acc access.Access) []servers.Status {
	return a.m.StatusAt(ctx, acc)
}

func (a mcpAdmin) ConnectionState(ctx context.Context, team, server, user string) (servers.OAuth, bool, error) {
	st, ok, err := a.m.ConnectionState(ctx, team, server, user)
	return st, ok, mapErr(err)
}

func (a mcpAdmin) StartConnect(ctx context.Context, team, server, user string) (string, time.Time, error) {
	link, exp, err := a.m.StartConnect(ctx, team, server, user)
	return link, exp, mapErr(err)
}

func (a mcpAdmin) Disconnect(ctx context.Context, team, server, user string) error {
	return mapErr(a.m.Disconnect(ctx, team, server, user))
}

// mcpTools adapts *mcp.Manager to bot.ToolSource: a turn gets the tools
// of the servers whose scope allows its Access.
type mcpTools struct{ m *mcp.Manager }

func (t mcpTools) Tools(ctx context.Context, a access.Access) ([]agent.Tool, error) {
	return t.m.ToolsFor(ctx, a)
}

// ToolsReport implements bot.ToolReporter: the tools, and the servers
// a turn goes without because they are still starting or failing.
func (t mcpTools) ToolsReport(ctx context.Context, a access.Access) ([]agent.Tool, []servers.NotReady, error) {
	return t.m.ToolsReport(ctx, a)
}

func (a mcpAdmin) ServerTools(ctx context.Context, team, server string) ([]servers.ToolInfo, error) {
	ts, err := a.m.ServerTools(ctx, team, server)
	return ts, mapErr(err)
}

func (a mcpAdmin) Probe(ctx context.Context, name, url string, headers map[string]string) ([]servers.ToolInfo, error) {
	ts, err := a.m.Probe(ctx, name, url, headers)
	return ts, mapErr(err)
}

func (a mcpAdmin) Approve(ctx context.Context, team, server string) ([]servers.ToolInfo, error) {
	ts, err := a.m.Approve(ctx, team, server)
	return ts, mapErr(err)
}

func (a mcpAdmin) Invalidate(team string) { a.m.Invalidate(team) }

func (a mcpAdmin) ValidateURL(raw string) error {
	return mcp.ValidateRegistrationURL(raw, a.allowPrivate)
}

// mapErr turns the mcp errors the bot branches on into the bot's.
func mapErr(err error) error {
	for _, m := range [...]struct{ from, to error }{
		{mcp.ErrUnknownServer, bot.ErrUnknownServer},
		{mcp.ErrOAuthUnavailable, bot.ErrOAuthUnavailable},
		{mcp.ErrNeedsOAuth, bot.ErrNeedsOAuth},
		{mcp.ErrNotConnected, bot.ErrNotConnected},
	} {
		if errors.Is(err, m.from) {
			return fmt.Errorf("%w: %w", m.to, err)
		}
	}
	return err
}

// mcpOAuth wires OAuth for MCP servers: the session store keeps sealed
// tokens, states, locks and wake-ups; the audit stream gets connects,
// disconnects and refresh failures. Without PUBLIC_URL, OAuth servers are
// refused (mcp.ErrOAuthUnavailable). The Connect prompt (Prompter) is the
// bot's (slackSeams).
func mcpOAuth(store *session.Store, publicURL string, prompter mcp.ConnectPrompter, timeout time.Duration, log *slog.Logger) mcp.OAuthOptions {
	return mcp.OAuthOptions{
		PublicURL:      publicURL,
		Tokens:         store,
		States:         store,
		Locker:         store,
		Waker:          store,
		Prompter:       prompter,
		Prompts:        store,
		ConnectTimeout: timeout,
		Audit: func(ctx context.Context, e mcp.AuditEvent) {
			// "event" and "outcome" as the bot's own entries, so /bobbin
			// audit shows them.
			fields := map[string]string{"event": e.Action, "server": e.Server, "user": e.User, "connection": "per-user"}
			if e.Principal == "" {
				fields["connection"] = "workspace"
			}
			if e.Detail != "" {
				fields["outcome"] = e.Detail
			}
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
			defer cancel()
			if err := store.Audit(actx, e.Team, fields); err != nil {
				log.Warn("audit entry not stored", "team", e.Team, "event", e.Action, "err", err)
			}
		},
	}
}
