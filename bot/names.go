package bot

import (
	"context"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// nameTTL is how long a looked-up name is reused.
const nameTTL = time.Hour

// nameCache remembers display names of people, workspaces and channels so
// each is looked up once (users.info is Tier 4 and conversations.info Tier
// 3: a burst of new sessions would spend them on every turn). Concurrent
// lookups of one name share the first one's call.
type nameCache struct {
	mu       sync.Mutex
	m        map[string]nameEntry
	inflight map[string]chan struct{}
}

type nameEntry struct {
	name string
	at   time.Time
}

// nameWait bounds how long a name lookup waits for budget. Names only
// decorate the system prompt and the transcript, and a burst of new
// sessions must not queue behind conversations.info (Tier 3): past it the
// id is used (and the name looked up again next time).
const nameWait = 250 * time.Millisecond

func (c *nameCache) get(ctx context.Context, key string, lookup func() (string, error)) string {
	for {
		c.mu.Lock()
		e, ok := c.m[key]
		if ok && time.Since(e.at) < nameTTL {
			c.mu.Unlock()
			return e.name
		}
		wait, busy := c.inflight[key]
		if !busy {
			if c.inflight == nil {
				c.inflight = map[string]chan struct{}{}
			}
			wait = make(chan struct{})
			c.inflight[key] = wait
		}
		c.mu.Unlock()
		if busy {
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return ""
			}
		}
		name, err := lookup()
		c.mu.Lock()
		delete(c.inflight, key)
		close(wait)
		if err == nil && name != "" {
			if len(c.m) > 50000 {
				clear(c.m)
			}
			c.m[key] = nameEntry{name: name, at: time.Now()}
		}
		c.mu.Unlock()
		if err != nil {
			return ""
		}
		return name
	}
}

// name is a person's display name in team ("" when unknown).
func (c *nameCache) name(ctx context.Context, b *Bot, team, user string) string {
	if user == "" {
		return ""
	}
	return c.get(ctx, "u:"+team+":"+user, func() (string, error) {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var u *slack.User
		err := b.slack.Do(lctx, slackapi.Call{Team: team, Method: slackapi.UsersInfo, Prio: slackapi.Lossy, Wait: nameWait}, func(ctx context.Context, api *slack.Client) error {
			var err error
			u, err = api.GetUserInfoContext(ctx, user)
			return err
		})
		if err != nil {
			return "", err
		}
		b.ctl.people.remember(team, user, u) // the turn's tool scopes need it next (access.go)
		for _, n := range []string{u.Profile.DisplayName, u.Profile.RealName, u.RealName, u.Name} {
			if n != "" {
				return n, nil
			}
		}
		return user, nil
	})
}

// team is the workspace name, or its id when unknown.
func (c *nameCache) team(ctx context.Context, b *Bot, team string) string {
	n := c.get(ctx, "t:"+team, func() (string, error) {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var name string
		err := b.slack.Do(lctx, slackapi.Call{Team: team, Method: slackapi.TeamInfo, Prio: slackapi.Lossy, Wait: nameWait}, func(ctx context.Context, api *slack.Client) error {
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

// channel is the channel name in team, or its id when unknown.
func (c *nameCache) channel(ctx context.Context, b *Bot, team, channel string) string {
	n := c.get(ctx, "c:"+team+":"+channel, func() (string, error) {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var name string
		err := b.slack.Do(lctx, slackapi.Call{Team: team, Method: slackapi.ConversationsInfo, Prio: slackapi.Lossy, Wait: nameWait}, func(ctx context.Context, api *slack.Client) error {
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
