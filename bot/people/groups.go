package people

import (
	"context"
	"errors"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/internal/flight"
	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// Errors of Members that an admin is told about.
var (
	ErrNoSuchGroup    = errors.New("no such user group")
	ErrGroupsNeedPlan = errors.New("user groups need a paid Slack plan")
)

// Members returns a user group's members: from the shared cache, else
// usergroups.users.list (cached for UsergroupTTL; this process asks Slack
// once at a time per group, the others wait for its answer). fresh skips
// the cache (an admin naming a group). A group that does not exist (or is
// disabled), or a workspace without user groups, is cached as empty and
// reported as ErrNoSuchGroup or ErrGroupsNeedPlan; other failures are not
// cached.
func (d *Directory) Members(ctx context.Context, team, group string, fresh bool) ([]string, error) {
	if !fresh {
		members, ok, err := d.store.CachedUsergroup(ctx, team, group)
		if err == nil && ok {
			return members, nil
		}
		if err != nil {
			d.log.Debug("bot: reading cached user group members failed; asking Slack", "team", team, "usergroup", group, "err", err)
		}
	}
	return flight.Do(ctx, &d.flight, "g:"+team+"/"+group, groupTimeout, func(ctx context.Context) ([]string, error) {
		members, err := d.fetchUsergroup(ctx, team, group)
		if err != nil && !errors.Is(err, ErrNoSuchGroup) && !errors.Is(err, ErrGroupsNeedPlan) {
			return nil, err
		}
		if err := d.store.CacheUsergroup(ctx, team, group, members, d.groupTTL); err != nil {
			d.log.Debug("bot: caching user group members failed", "team", team, "usergroup", group, "err", err)
		}
		return members, err
	})
}

// fetchUsergroup is usergroups.users.list (must-deliver: a turn waits on
// it).
func (d *Directory) fetchUsergroup(ctx context.Context, team, group string) ([]string, error) {
	var members []string
	err := d.api.Do(ctx, slackapi.Call{Team: team, Method: slackapi.UsergroupsUsersList}, func(ctx context.Context, api *slack.Client) error {
		var err error
		members, err = api.GetUserGroupMembersContext(ctx, group)
		return err
	})
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "no_such_subteam":
			return []string{}, ErrNoSuchGroup
		case "plan_upgrade_required":
			d.log.Warn("bot: user groups need a paid Slack plan; servers scoped to groups are offered to nobody in them", "team", team)
			return []string{}, ErrGroupsNeedPlan
		}
	}
	if err != nil {
		d.log.Warn("bot: listing a user group's members failed; its members get no tools of servers scoped to it this time",
			"team", team, "usergroup", group, "err", err)
		return nil, err
	}
	if members == nil {
		members = []string{}
	}
	return members, nil
}
