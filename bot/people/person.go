package people

import (
	"context"

	"github.com/bobbinbot/bobbin/agent/access"
)

// Person describes user, whose event named userTeam as their workspace
// ("" when it did not), as a person of team for tool scopes. A failed
// users.info is not cached (the next turn asks again) and makes the person
// Unverified.
func (d *Directory) Person(ctx context.Context, team, user, userTeam string) access.Person {
	f, err := d.facts(ctx, team, user)
	if err != nil {
		d.log.Warn("bot: cannot check a person's account; for tool scopes they count as a guest this turn",
			"team", team, "user", user, "err", err)
		return access.Person{ID: user, Unverified: true}
	}
	return f.person(user, userTeam, team)
}

// person is user as f describes them. The event's user_team naming
// another workspace means Slack Connect, unless the person belongs to this
// workspace through its Grid org.
func (f facts) person(user, userTeam, team string) access.Person {
	return access.Person{ID: user, Guest: f.guest, External: f.external || (userTeam != "" && userTeam != team && !f.grid)}
}
