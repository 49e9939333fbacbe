package people

import (
	"context"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/internal/flight"
	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// Names of people, workspaces and channels are looked up once (users.info
// is Tier 4 and conversations.info Tier 3: a burst of new sessions would
// spend them on every turn) and reused for nameTTL.

// nameTTL is how long a looked-up name is reused.
const nameTTL = time.Hour

// nameWait bounds how long a name lookup waits for budget. Names only
// decorate the system prompt and the transcript, and a burst of new
// sessions must not queue behind conversations.info (Tier 3): past it the
// id is used (and the name looked up again next time).
const nameWait = 250 * time.Millisecond

func userKey(team, user string) string { return "u:" + team + ":" + user }

// name returns key's cached name, else looks it up (one lookup at a time
// per key; a failed or empty one is not cached and gives "").
func (d *Directory) name(ctx context.Context, key string, lookup func(ctx context.Context) (string, error)) string {
	if n, ok := d.names.get(key); ok {
		return n
	}
	n, err := flight.Do(ctx, &d.flight, key, lookupTimeout, func(ctx context.Context) (string, error) {
		n, err := lookup(ctx)
		if err == nil && n != "" {
			d.names.put(key, n)
		}
		return n, err
	})
	if err != nil {
		return ""
	}
	return n
}

// displayName is the name people see for u (user when it has none).
func displayName(u *slack.User, user string) string {
	for _, n := range []string{u.Profile.DisplayName, u.Profile.RealName, u.RealName, u.Name} {
		if n != "" {
			return n
		}
	}
	return user
}

// Name is a person's display name in team ("" when unknown). Its
// users.info answer also serves the person's role and scope facts.
func (d *Directory) Name(ctx context.Context, team, user string) string {
	if user == "" {
		return ""
	}
	return d.name(ctx, userKey(team, user), func(ctx context.Context) (string, error) {
		var u *slack.User
		err := d.api.Do(ctx, slackapi.Call{Team: team, Method: slackapi.UsersInfo, Prio: slackapi.Lossy, Wait: nameWait}, func(ctx context.Context, api *slack.Client) error {
			var err error
			u, err = api.GetUserInfoContext(ctx, user)
			return err
		})
		if err != nil {
			return "", err
		}
		d.remember(team, user, u) // the turn's tool scopes need it next
		return displayName(u, user), nil
	})
}

// TeamName is the workspace name, or its id when unknown.
func (d *Directory) TeamName(ctx context.Context, team string) string {
	n := d.name(ctx, "t:"+team, func(ctx context.Context) (string, error) {
		var name string
		err := d.api.Do(ctx, slackapi.Call{Team: team, Method: slackapi.TeamInfo, Prio: slackapi.Lossy, Wait: nameWait}, func(ctx context.Context, api *slack.Client) error {
			// With the team argument: an org-wide token serves many
			// workspaces, and each must be named after itself.
			t, err := api.GetOtherTeamInfoContext(ctx, team)
			if err == nil {
				name = t.Name
			}
			return err
		})
		return name, err
	})
	if n == "" {
		return team
	}
	return n
}

// ChannelName is the channel name in team, or its id when unknown.
func (d *Directory) ChannelName(ctx context.Context, team, channel string) string {
	n := d.name(ctx, "c:"+team+":"+channel, func(ctx context.Context) (string, error) {
		var name string
		err := d.api.Do(ctx, slackapi.Call{Team: team, Method: slackapi.ConversationsInfo, Prio: slackapi.Lossy, Wait: nameWait}, func(ctx context.Context, api *slack.Client) error {
			ch, err := api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: channel})
			if err == nil {
				name = ch.Name
			}
			return err
		})
		return name, err
	})
	if n == "" {
		return channel
	}
	return n
}
