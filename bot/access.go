package bot

import (
	"context"
	"strings"

	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/bot/people"
	"github.com/bobbinbot/bobbin/session"
)

// Who may use which tools. A turn's tools depend on where it runs and on
// the people whose messages it answers: the ToolSource gets an access.Access and
// offers only the servers whose scope allows it (and re-checks at every
// call). The bot's part is telling who those people are: guests and
// people of other organizations, and the members of user groups: the
// people.Directory (bot/people) answers both.

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

// accessFor builds the access.Access of a turn in channel of team answering refs.
func (b *Bot) accessFor(ctx context.Context, team, channel string, refs []personRef) access.Access {
	a := access.Access{Team: team, Channel: channel, DM: strings.HasPrefix(channel, "D"),
		Members: func(ctx context.Context, group string) ([]string, error) {
			return b.people.Members(ctx, team, group, false)
		}}
	for _, r := range refs {
		a.People = append(a.People, b.people.Person(ctx, team, r.user, r.team))
	}
	return a
}

// newPeople is the bot's directory of people (roles, scope facts, user
// groups, names), on its Web API client.
func (b *Bot) newPeople() *people.Directory {
	return people.New(people.Options{API: b.slack, Store: b.store, Admins: b.opts.Admins,
		UsergroupTTL: b.opts.UsergroupCacheTTL, Logger: b.log})
}
