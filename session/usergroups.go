package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxUsergroupMembers bounds the members cached for one user group; a
// larger group is cached cut to this many (the bot says so in its log).
const MaxUsergroupMembers = 50000

// Cached user group members (usergroups.users.list) are shared by every
// replica, so the Slack method (Tier 2) is called about once per group
// and cache lifetime in the whole deployment.

// usergroup is a user group's cached members; per workspace, so it shares
// the workspace's hash tag.
func (k keys) usergroup(team, group string) string {
	return k.prefix + ":{w:" + team + "}:ug:" + group
}

// CachedUsergroup returns the cached members of a user group; ok is false
// when nothing is cached (never cached, or expired).
func (s *Store) CachedUsergroup(ctx context.Context, team, group string) (members []string, ok bool, err error) {
	if err := errors.Join(checkPart("team", team), checkPart("user group", group)); err != nil {
		return nil, false, err
	}
	v, err := s.rdb.Get(ctx, s.k.usergroup(team, group)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.wrap("user group "+group, err)
	}
	if err := json.Unmarshal(v, &members); err != nil {
		// A corrupt entry is a miss: the caller asks Slack again.
		return nil, false, nil
	}
	return members, true, nil
}

// CacheUsergroup stores a user group's members for ttl (an empty list is
// a valid answer: a group without members, or one that no longer exists).
func (s *Store) CacheUsergroup(ctx context.Context, team, group string, members []string, ttl time.Duration) error {
	if err := errors.Join(checkPart("team", team), checkPart("user group", group)); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("session: user group %s: ttl must be positive", group)
	}
	if len(members) > MaxUsergroupMembers {
		members = members[:MaxUsergroupMembers]
	}
	if members == nil {
		members = []string{}
	}
	b, err := json.Marshal(members)
	if err != nil {
		return fmt.Errorf("session: user group %s: %w", group, err)
	}
	if err := s.rdb.Set(ctx, s.k.usergroup(team, group), b, ttl).Err(); err != nil {
		return s.wrap("cache user group "+group, err)
	}
	return nil
}
