package bot

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// Who may use which tools. A turn's tools depend on where it runs and on
// the people whose messages it answers: the ToolSource gets an Access and
// offers only the servers whose scope allows it (and re-checks at every
// call). The bot's part is telling who those people are: guests and
// people of other organizations (users.info, cached), and the members of
// user groups (usergroups.users.list, cached in Redis for every replica).

// Access is where a turn runs and whose messages it answers (one
// definition with mcp: access.Access).
type Access = access.Access

// Person is one person a turn answers (access.Person).
type Person = access.Person

// DefaultUsergroupCacheTTL is how long a user group's members are reused
// when Options.UsergroupCacheTTL is zero (USERGROUP_CACHE_TTL).
const DefaultUsergroupCacheTTL = 5 * time.Minute

func (b *Bot) usergroupTTL() time.Duration {
	if b.opts.UsergroupCacheTTL > 0 {
		return b.opts.UsergroupCacheTTL
	}
	return DefaultUsergroupCacheTTL
}

// personRef names a person a turn answers: the user and, when the event
// said, their workspace (user_team).
type personRef struct{ user, team string }

// extraPeople is the session.Meta.Extra key of the people the running turn
// answers ("U1,U2@T9": user, and user_team when it is not the thread's),
// so a resumed turn is scoped like the one it continues.
const extraPeople = "people"

// recordPeople stores the people of batch in meta.
func recordPeople(meta *session.Meta, team string, batch []inbound) {
	var parts []string
	seen := map[string]bool{}
	for _, m := range batch {
		if m.User == "" || seen[m.User] {
			continue
		}
		seen[m.User] = true
		p := m.User
		if m.UserTeam != "" && m.UserTeam != team {
			p += "@" + m.UserTeam
		}
		parts = append(parts, p)
	}
	if meta.Extra == nil {
		meta.Extra = map[string]string{}
	}
	meta.Extra[extraPeople] = strings.Join(parts, ",")
}

// peopleOf returns the people the turn in meta answers; who.User when
// meta predates recordPeople.
func peopleOf(meta session.Meta, who inbound) []personRef {
	var out []personRef
	for p := range strings.SplitSeq(meta.Extra[extraPeople], ",") {
		user, team, _ := strings.Cut(strings.TrimSpace(p), "@")
		if user != "" {
			out = append(out, personRef{user: user, team: team})
		}
	}
	if len(out) == 0 && who.User != "" {
		out = append(out, personRef{user: who.User, team: who.UserTeam})
	}
	return out
}

// accessFor builds the Access of a turn in channel of team answering refs.
func (b *Bot) accessFor(ctx context.Context, team, channel string, refs []personRef) Access {
	a := Access{Team: team, Channel: channel, DM: strings.HasPrefix(channel, "D"),
		Members: func(ctx context.Context, group string) ([]string, error) {
			return b.usergroupMembers(ctx, team, group, false)
		}}
	for _, r := range refs {
		a.People = append(a.People, b.person(ctx, team, r))
	}
	return a
}

// peopleTTL bounds how long a users.info answer about a person's guest
// and external status is trusted (as the admin rule's roleTTL).
const peopleTTL = roleTTL

// personCache remembers users.info facts about people per workspace.
type personCache struct {
	mu sync.Mutex
	m  map[string]personEntry
}

type personEntry struct {
	guest, external bool
	// grid: the workspace is among the user's Enterprise Grid teams.
	grid bool
	at   time.Time
}

// person describes r in team; a failed users.info is not cached (the next
// turn asks again) and makes the person Unverified.
func (b *Bot) person(ctx context.Context, team string, r personRef) Person {
	key := team + "/" + r.user
	c := &b.ctl.people
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if !ok || time.Since(e.at) >= peopleTTL {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		u, err := b.lookupUser(lctx, team, r.user)
		cancel()
		if err != nil || u == nil {
			b.log.Warn("bot: cannot check a person's account; for tool scopes they count as a guest this turn",
				"team", team, "user", r.user, "err", err)
			return Person{ID: r.user, Unverified: true}
		}
		e = c.remember(team, r.user, u)
	}
	return e.person(r, team)
}

// remember caches what users.info said about user (u) in team: any
// users.info answer will do, so the name lookup's saves the scope check a
// call.
func (c *personCache) remember(team, user string, u *slack.User) personEntry {
	if u == nil {
		return personEntry{}
	}
	e := personFacts(u, team)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxRoleEntries {
		c.m = map[string]personEntry{}
	}
	c.m[team+"/"+user] = e
	return e
}

// personFacts is what users.info says about u as a person of team.
func personFacts(u *slack.User, team string) personEntry {
	e := personEntry{guest: u.IsRestricted || u.IsUltraRestricted, grid: slices.Contains(u.Enterprise.Teams, team), at: time.Now()}
	e.external = u.IsStranger || (u.TeamID != "" && u.TeamID != team && !e.grid)
	return e
}

// person is r as e describes them. The event's user_team naming another
// workspace means Slack Connect, unless the person belongs to this
// workspace through its Grid org.
func (e personEntry) person(r personRef, team string) Person {
	return Person{ID: r.user, Guest: e.guest, External: e.external || (r.team != "" && r.team != team && !e.grid)}
}

// Errors of usergroupMembers that an admin is told about.
var (
	errNoSuchGroup    = errors.New("no such user group")
	errGroupsNeedPlan = errors.New("user groups need a paid Slack plan")
)

// usergroupCache is session.Store's shared cache of user group members.
type usergroupCache interface {
	CachedUsergroup(ctx context.Context, team, group string) ([]string, bool, error)
	CacheUsergroup(ctx context.Context, team, group string, members []string, ttl time.Duration) error
}

// groups is the process's part of user group resolution: one Slack call
// at a time per group (the rest wait for its answer).
type groups struct {
	mu       sync.Mutex
	inflight map[string]*groupFlight
}

type groupFlight struct {
	done    chan struct{}
	members []string
	err     error
}

// usergroupMembers returns a user group's members: from the shared cache,
// else usergroups.users.list (cached for UsergroupCacheTTL). fresh skips
// the cache (an admin naming a group). A group that does not exist (or is
// disabled), or a workspace without user groups, is cached as empty and
// reported as errNoSuchGroup or errGroupsNeedPlan; other failures are not
// cached.
func (b *Bot) usergroupMembers(ctx context.Context, team, group string, fresh bool) ([]string, error) {
	key := team + "/" + group
	g := &b.ctl.groups
	if !fresh {
		members, ok, err := b.store.CachedUsergroup(ctx, team, group)
		if err == nil && ok {
			return members, nil
		}
		if err != nil {
			b.log.Debug("bot: reading cached user group members failed; asking Slack", "team", team, "usergroup", group, "err", err)
		}
	}
	g.mu.Lock()
	if f := g.inflight[key]; f != nil {
		g.mu.Unlock()
		select {
		case <-f.done:
			return f.members, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f := &groupFlight{done: make(chan struct{})}
	if g.inflight == nil {
		g.inflight = map[string]*groupFlight{}
	}
	g.inflight[key] = f
	g.mu.Unlock()
	f.members, f.err = b.fetchUsergroup(ctx, team, group)
	g.mu.Lock()
	delete(g.inflight, key)
	g.mu.Unlock()
	close(f.done)
	if f.err != nil && !errors.Is(f.err, errNoSuchGroup) && !errors.Is(f.err, errGroupsNeedPlan) {
		return nil, f.err
	}
	if err := b.store.CacheUsergroup(ctx, team, group, f.members, b.usergroupTTL()); err != nil {
		b.log.Debug("bot: caching user group members failed", "team", team, "usergroup", group, "err", err)
	}
	return f.members, f.err
}

// fetchUsergroup is usergroups.users.list (must-deliver: a turn waits on
// it).
func (b *Bot) fetchUsergroup(ctx context.Context, team, group string) ([]string, error) {
	var members []string
	err := b.slack.Do(ctx, slackapi.Call{Team: team, Method: slackapi.UsergroupsUsersList}, func(ctx context.Context, api *slack.Client) error {
		var err error
		members, err = api.GetUserGroupMembersContext(ctx, group)
		return err
	})
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "no_such_subteam":
			return []string{}, errNoSuchGroup
		case "plan_upgrade_required":
			b.log.Warn("bot: user groups need a paid Slack plan; servers scoped to groups are offered to nobody in them", "team", team)
			return []string{}, errGroupsNeedPlan
		}
	}
	if err != nil {
		b.log.Warn("bot: listing a user group's members failed; its members get no tools of servers scoped to it this time",
			"team", team, "usergroup", group, "err", err)
		return nil, err
	}
	if members == nil {
		members = []string{}
	}
	return members, nil
}
