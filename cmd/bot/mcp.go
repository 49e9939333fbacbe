package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/bot/admin"
	"github.com/bobbinbot/bobbin/mcp"
	"github.com/bobbinbot/bobbin/session"
)

// registrations adapts the session store to mcp.RegistrationStore: the
// servers admins registered from Slack, secrets decrypted only here. The
// record is mcp's (mcp.Record); the store keeps it opaque and its errors
// (session.ErrNotFound, ErrExists, ErrConflict, ErrNoSecretKey) pass
// through to the bot.
type registrations struct{ s *session.Store }

func stored(r session.Registration) mcp.StoredRegistration {
	return mcp.StoredRegistration{Name: r.Name, Record: r.Record, Secrets: r.Secrets, CreatedBy: r.CreatedBy}
}

func (r registrations) Registrations(ctx context.Context, team string) ([]mcp.StoredRegistration, error) {
	regs, err := r.s.Registrations(ctx, team)
	if err != nil {
		return nil, err
	}
	out := make([]mcp.StoredRegistration, len(regs))
	for i, reg := range regs {
		out[i] = stored(reg)
	}
	return out, nil
}

func (r registrations) Registration(ctx context.Context, team, name string) (mcp.StoredRegistration, error) {
	reg, err := r.s.Registration(ctx, team, name)
	return stored(reg), err
}

func (r registrations) AddRegistration(ctx context.Context, team string, reg mcp.StoredRegistration) error {
	return r.s.PutRegistration(ctx, team, session.Registration{Name: reg.Name, Record: reg.Record, Secrets: reg.Secrets, CreatedBy: reg.CreatedBy})
}

// UpdateRegistration rewrites the record with the store's compare-and-set:
// the registration read is replaced only if it is still the stored one.
func (r registrations) UpdateRegistration(ctx context.Context, team, name string, update func(json.RawMessage) (json.RawMessage, error)) error {
	reg, err := r.s.Registration(ctx, team, name)
	if err != nil {
		return err
	}
	if reg.Record, err = update(reg.Record); err != nil {
		return err
	}
	return r.s.PutRegistration(ctx, team, reg)
}

func (r registrations) DeleteRegistration(ctx context.Context, team, name string) error {
	return r.s.DeleteRegistration(ctx, team, name)
}

// mcpAdmin is *mcp.Manager as admin.MCP, Auth, Policies and ScopedStatus (the
// bot does not import mcp): the Manager's own methods, values and errors
// (agent/servers) as they are, and URLs validated with the bot's network
// setting.
type mcpAdmin struct {
	*mcp.Manager
	allowPrivate bool
	// slackURL is SLACK_MCP_URL; slack the preset (its Missing settings).
	slackURL string
	slack    mcp.Preset
}

// bot/admin finds Auth, Policies and ScopedStatus, and the bot
// ToolReporter, by type assertion: a signature that drifted would switch
// them off quietly.
var (
	_ admin.MCP          = mcpAdmin{}
	_ admin.Auth         = mcpAdmin{}
	_ admin.Policies     = mcpAdmin{}
	_ admin.ScopedStatus = mcpAdmin{}
	_ admin.SlackPreset  = mcpAdmin{}
	_ bot.ToolReporter   = mcpTools{}
)

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

// SlackMCP implements admin.SlackPreset: SLACK_MCP_URL, and which of the
// app's SLACK_CLIENT_ID and SLACK_CLIENT_SECRET are not set.
func (a mcpAdmin) SlackMCP() (string, []string) {
	return a.slackURL, a.slack.Missing
}

func (a mcpAdmin) ValidateURL(raw string) error {
	return mcp.ValidateRegistrationURL(raw, a.allowPrivate)
}

// mcpOAuth wires OAuth for MCP servers: the session store keeps sealed
// tokens, states, locks and wake-ups; the audit stream gets connects,
// disconnects and refresh failures. Without PUBLIC_URL, OAuth servers are
// refused (servers.ErrOAuthUnavailable). The Connect prompt (Prompter) is
// the bot's (slackSeams).
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
