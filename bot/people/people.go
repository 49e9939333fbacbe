package people

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/slack-go/slack"
	"golang.org/x/sync/singleflight"

	"github.com/bobbinbot/bobbin/bot/internal/flight"
	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// Store is the cache of user group members every replica shares
// (*session.Store has it).
type Store interface {
	CachedUsergroup(ctx context.Context, team, group string) ([]string, bool, error)
	CacheUsergroup(ctx context.Context, team, group string, members []string, ttl time.Duration) error
}

// Options configure a Directory. API and Store are required.
type Options struct {
	// API is the path to the Web API (users.info, team.info,
	// conversations.info, usergroups.users.list).
	API *slackapi.Client
	// Store shares user group members between replicas.
	Store Store
	// Admins are user ids that are admins without a users.info check
	// (BOT_ADMINS).
	Admins []string
	// UsergroupTTL is how long a user group's members are reused
	// (USERGROUP_CACHE_TTL); zero means DefaultUsergroupCacheTTL.
	UsergroupTTL time.Duration
	// Now is the clock of the caches; nil means time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
}

// DefaultUsergroupCacheTTL is how long a user group's members are reused
// when Options.UsergroupTTL is zero (USERGROUP_CACHE_TTL).
const DefaultUsergroupCacheTTL = 5 * time.Minute

// factsTTL bounds how long a users.info answer is trusted: a demoted admin,
// a deactivated account or a member turned guest loses their rights within
// this time.
const factsTTL = 2 * time.Minute

// maxFacts and maxNames bound the caches.
const (
	maxFacts = 20000
	maxNames = 50000
)

// lookupTimeout bounds a users.info, team.info or conversations.info call;
// groupTimeout a usergroups.users.list call (must-deliver, Tier 2: it may
// wait for budget).
const (
	lookupTimeout = 5 * time.Second
	groupTimeout  = time.Minute
)

// Directory answers who people are, who is in a user group and what
// things are called, from its caches or Slack. Build it with New; it is
// safe for concurrent use.
type Directory struct {
	api      *slackapi.Client
	store    Store
	admins   []string
	groupTTL time.Duration
	log      *slog.Logger

	// users holds users.info verdicts per team/user; names display names
	// of people ("u:"), workspaces ("t:") and channels ("c:").
	users *lru[facts]
	names *lru[string]
	// flight makes concurrent lookups of one key share one Slack call.
	flight singleflight.Group
}

// New returns a Directory.
func New(o Options) *Directory {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ttl := o.UsergroupTTL
	if ttl <= 0 {
		ttl = DefaultUsergroupCacheTTL
	}
	return &Directory{
		api: o.API, store: o.Store, admins: slices.Clone(o.Admins), groupTTL: ttl, log: log,
		users: newLRU[facts](maxFacts, factsTTL, now),
		names: newLRU[string](maxNames, nameTTL, now),
	}
}

// lookupUser is users.info in team (must-deliver: a click waits on it).
func (d *Directory) lookupUser(ctx context.Context, team, user string) (*slack.User, error) {
	var u *slack.User
	err := d.api.Do(ctx, slackapi.Call{Team: team, Method: slackapi.UsersInfo}, func(ctx context.Context, api *slack.Client) error {
		var err error
		u, err = api.GetUserInfoContext(ctx, user)
		return err
	})
	if err == nil && u == nil {
		err = errors.New("users.info returned no user")
	}
	return u, err
}

// facts is what users.info said about a person of a workspace.
type facts struct {
	role Role
	why  Reason
	// guest, external: as access.Person has them; grid: the workspace is
	// among the user's Enterprise Grid teams.
	guest, external, grid bool
}

// factsOf is what users.info says about u as a person of team.
func factsOf(u *slack.User, team string) facts {
	f := facts{guest: u.IsRestricted || u.IsUltraRestricted, grid: slices.Contains(u.Enterprise.Teams, team)}
	f.external = u.IsStranger || (u.TeamID != "" && u.TeamID != team && !f.grid)
	f.role, f.why = classify(u, team)
	return f
}

// facts returns what users.info says about user in team, cached for
// factsTTL. A failed lookup is not cached (the next check asks again).
func (d *Directory) facts(ctx context.Context, team, user string) (facts, error) {
	key := team + "/" + user
	if f, ok := d.users.get(key); ok {
		return f, nil
	}
	return flight.Do(ctx, &d.flight, "i:"+key, lookupTimeout, func(ctx context.Context) (facts, error) {
		u, err := d.lookupUser(ctx, team, user)
		if err != nil {
			return facts{}, err
		}
		return d.remember(team, user, u), nil
	})
}

// remember caches what users.info said about user (u) in team: any
// users.info answer will do, so the name lookup's saves the role and scope
// checks a call, and theirs the name lookup's.
func (d *Directory) remember(team, user string, u *slack.User) facts {
	f := factsOf(u, team)
	d.users.put(team+"/"+user, f)
	d.names.put(userKey(team, user), displayName(u, user))
	return f
}
