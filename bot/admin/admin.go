package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/agent/profile"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/bot/internal/jobs"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// MCP is what the admin commands need of the MCP manager. The bot does
// not import mcp: cmd/bot adapts *mcp.Manager to it. The same value may
// also be an Auth (OAuth servers), a Policies (tool policies) and a
// ScopedStatus (verdicts in mcp list and the Home); without them those
// parts are off.
type MCP interface {
	// Status lists the servers mounted in the workspace.
	Status(ctx context.Context, team string) []servers.Status
	// ServerTools lists one server's tools, disabled ones included;
	// servers.ErrUnknownServer when the workspace has no such server.
	ServerTools(ctx context.Context, team, server string) ([]servers.ToolInfo, error)
	// Probe connects to a server an admin wants to register and lists its
	// tools without keeping anything.
	Probe(ctx context.Context, name, url string, headers map[string]string) ([]servers.ToolInfo, error)
	// Approve pins the server's current tool definitions and re-enables
	// tools disabled by a change.
	Approve(ctx context.Context, team, server string) ([]servers.ToolInfo, error)
	// Invalidate makes the next use re-read the workspace's registrations.
	Invalidate(team string)
	// Register stores a server registered from Slack (its record is the
	// manager's; header values are stored encrypted) and makes the next
	// use see it. Store errors pass through: session.ErrExists when the
	// name is taken, session.ErrNoSecretKey for headers without a key.
	Register(ctx context.Context, team string, r servers.Registration) error
	// Registered is nil when the workspace registered name from Slack,
	// session.ErrNotFound when it did not, another error when it cannot
	// tell.
	Registered(ctx context.Context, team, name string) error
	// SetScope replaces a registered server's scope (nil lifts it),
	// compare-and-set on its record: session.ErrNotFound when it was
	// removed meanwhile, servers.ErrBadRecord when its record is damaged.
	SetScope(ctx context.Context, team, name string, s *access.Scope) error
	// Unregister removes a registered server (and its tool pins);
	// session.ErrNotFound when there is none.
	Unregister(ctx context.Context, team, name string) error
	// ValidateURL checks a URL an admin wants to register (scheme, no
	// command or path look-alikes, no blocked address literal).
	ValidateURL(raw string) error
}

// ScopedStatus is what mcp list and the Home need beyond MCP.Status:
// every server's verdict for the person asking, in the channel they ask
// in. cmd/bot's adapter has it; without it the list shows no verdicts.
type ScopedStatus interface {
	StatusAt(ctx context.Context, a access.Access) []servers.Status
}

// Store is what administration needs of the session store
// (*session.Store has it all).
type Store interface {
	// RecentAudit is /bobbin audit's listing.
	RecentAudit(ctx context.Context, team string, n int) ([]session.AuditEntry, error)
	// DeleteOAuthConnections forgets a removed server's connections.
	DeleteOAuthConnections(ctx context.Context, team, server string) error
	// Profile bindings (/bobbin profile use, clear, list).
	SetProfileBinding(ctx context.Context, team, channel, profile string) error
	ProfileBindings(ctx context.Context, team string) (map[string]string, error)
	// Usage is /bobbin usage's report.
	Usage(ctx context.Context, team, period string, now time.Time) (session.UsageReport, error)
	// VotesSince is /bobbin feedback's votes.
	VotesSince(ctx context.Context, team string, since time.Time) ([]session.Vote, error)
}

// Standing is what a person may do with the bot's controls.
type Standing struct {
	// Admin: a workspace admin or owner, or listed in BOT_ADMINS.
	Admin bool
	// MayUse: what is not for admins only (mcp list, tools, connect,
	// disconnect, usage me): members, admins and guests.
	MayUse bool
	// Unchecked: the person's account could not be looked up just now
	// (they may try again).
	Unchecked bool
	// Why says why they have no role ("guest", "lookup failed", …).
	Why string
}

// Errors of People.CheckGroup that an admin is told about.
var (
	ErrNoSuchGroup    = errors.New("no such user group")
	ErrGroupsNeedPlan = errors.New("user groups need a paid Slack plan")
)

// People is who people are (the root adapts bot/people's Directory).
type People interface {
	// Standing is user's standing in team; userTeam is the workspace an
	// interaction payload names for them ("" when none).
	Standing(ctx context.Context, team, user, userTeam string) Standing
	// CheckGroup checks, fresh from Slack, that a user group exists:
	// ErrNoSuchGroup, ErrGroupsNeedPlan or another error when not.
	CheckGroup(ctx context.Context, team, group string) error
}

// Options configure an Admin. API, MCP (may be nil: MCP is off), Store
// and People are required.
type Options struct {
	// API is the path to the Web API (views, ephemeral messages, DMs).
	API *slackapi.Client
	// MCP administers the workspaces' MCP servers (nil: /bobbin mcp says
	// MCP is not enabled).
	MCP MCP
	// Store holds the audit log, profile bindings, usage and votes.
	Store Store
	// People says who may do what.
	People People
	// Audit writes an audit entry (the root's audit log).
	Audit func(ctx context.Context, team string, fields map[string]string)
	// Access is where user would run a turn in channel ("" for anywhere
	// in the workspace): the verdicts of mcp list and the Home.
	Access func(ctx context.Context, team, channel, user string) access.Access
	// ConnectBlocks lays out a Connect button (bot/ask's).
	ConnectBlocks func(head, server, link string, expires time.Time, extra string) []slack.Block
	// RememberConnect records where user was asked to connect server, so
	// the end of the sign-in is told there (bot/ask's).
	RememberConnect func(ctx context.Context, team, server, user, channel, thread string, until time.Time)
	// Profiles are the operator's agent profiles (nil: none), Model the
	// bot's model, and Profile the profile of a channel (the root's
	// resolution: a binding, then the file).
	Profiles *profile.Config
	Model    string
	Profile  func(ctx context.Context, team, channel string) (*profile.Profile, profile.Source)
	// Jobs runs answers after the ack; HTTPClient carries response_url
	// answers.
	Jobs       *jobs.Runner
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Admin is administration from Slack: /bobbin, the add-server form and
// the App Home.
type Admin struct {
	// o are the options, with New's defaults filled in.
	o   Options
	log *slog.Logger
}

// New builds an Admin. It panics when a required option is missing (a
// wiring mistake).
func New(o Options) *Admin {
	if o.API == nil || o.Store == nil || o.People == nil || o.Jobs == nil {
		panic("admin: API, Store, People and Jobs are required")
	}
	if o.Audit == nil {
		o.Audit = func(context.Context, string, map[string]string) {}
	}
	if o.Access == nil {
		o.Access = func(_ context.Context, team, channel, _ string) access.Access {
			return access.Access{Team: team, Channel: channel}
		}
	}
	if o.ConnectBlocks == nil {
		o.ConnectBlocks = func(head, _, _ string, _ time.Time, _ string) []slack.Block {
			return []slack.Block{slack.NewSectionBlock(mdText(head), nil, nil)}
		}
	}
	if o.RememberConnect == nil {
		o.RememberConnect = func(context.Context, string, string, string, string, string, time.Time) {}
	}
	if o.Profile == nil {
		profiles := o.Profiles
		o.Profile = func(_ context.Context, _, channel string) (*profile.Profile, profile.Source) {
			if profiles == nil {
				return nil, profile.SourceNone
			}
			return profiles.Resolve(channel, len(channel) > 0 && channel[0] == 'D', "")
		}
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &Admin{o: o, log: o.Logger}
	return a
}
