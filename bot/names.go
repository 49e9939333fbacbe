package bot

import (
	"context"
	"sync"
	"time"

	"github.com/slack-go/slack"
)

// nameTTL is how long a looked-up name is reused.
const nameTTL = time.Hour

// nameCache remembers display names of people, workspaces and channels so
// each is looked up once (users.info is Tier 4, but a busy thread would
// still spend it on every message).
type nameCache struct {
	mu sync.Mutex
	m  map[string]nameEntry
}

type nameEntry struct {
	name string
	at   time.Time
}

func (c *nameCache) get(key string, lookup func() (string, error)) string {
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && time.Since(e.at) < nameTTL {
		return e.name
	}
	name, err := lookup()
	if err != nil || name == "" {
		return ""
	}
	c.mu.Lock()
	if len(c.m) > 50000 {
		clear(c.m)
	}
	c.m[key] = nameEntry{name: name, at: time.Now()}
	c.mu.Unlock()
	return name
}

// name is a person's display name in team ("" when unknown).
func (c *nameCache) name(ctx context.Context, b *Bot, team, user string) string {
	if user == "" {
		return ""
	}
	return c.get("u:"+team+":"+user, func() (string, error) {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		u, err := b.lookupUser(lctx, team, user)
		if err != nil {
			return "", err
		}
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
	n := c.get("t:"+team, func() (string, error) {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var name string
		err := b.call(lctx, slackCall{team: team, method: "team.info"}, func(ctx context.Context, api *slack.Client) error {
			t, err := api.GetTeamInfoContext(ctx)
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
	n := c.get("c:"+team+":"+channel, func() (string, error) {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var name string
		err := b.call(lctx, slackCall{team: team, method: "conversations.info"}, func(ctx context.Context, api *slack.Client) error {
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
