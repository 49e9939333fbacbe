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

// name is a person's display name ("" when unknown).
func (c *nameCache) name(ctx context.Context, api *slack.Client, user string) string {
	if user == "" {
		return ""
	}
	return c.get("u:"+user, func() (string, error) {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		u, err := api.GetUserInfoContext(lctx, user)
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
func (c *nameCache) team(ctx context.Context, api *slack.Client, team string) string {
	n := c.get("t:"+team, func() (string, error) {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		t, err := api.GetTeamInfoContext(lctx)
		if err != nil {
			return "", err
		}
		return t.Name, nil
	})
	if n == "" {
		return team
	}
	return n
}

// channel is the channel name, or its id when unknown.
func (c *nameCache) channel(ctx context.Context, api *slack.Client, channel string) string {
	n := c.get("c:"+channel, func() (string, error) {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ch, err := api.GetConversationInfoContext(lctx, &slack.GetConversationInfoInput{ChannelID: channel})
		if err != nil {
			return "", err
		}
		return ch.Name, nil
	})
	if n == "" {
		return channel
	}
	return n
}
