package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Whether a workspace has Slack's search API (assistant.search.info, a
// Tier 2 method) is shared by every replica: one replica asks Slack, the
// others read the answer, so a turn starting on a replica that has not
// asked yet does not wait for the small Tier 2 budget another replica
// just spent.

// searchInfo is a workspace's cached answer; per workspace, so it shares
// the workspace's hash tag.
func (k keys) searchInfo(team string) string { return k.prefix + ":{w:" + team + "}:searchinfo" }

// CachedSearchInfo returns the cached answer for team: enabled, and known
// false when nothing is cached (never asked, or expired).
func (s *Store) CachedSearchInfo(ctx context.Context, team string) (enabled, known bool, err error) {
	if err := checkPart("team", team); err != nil {
		return false, false, err
	}
	v, err := s.rdb.Get(ctx, s.k.searchInfo(team)).Result()
	if errors.Is(err, redis.Nil) {
		return false, false, nil
	}
	if err != nil {
		return false, false, s.wrap("search info "+team, err)
	}
	switch v {
	case "1":
		return true, true, nil
	case "0":
		return false, true, nil
	}
	return false, false, nil // a corrupt entry is a miss: the caller asks Slack
}

// CacheSearchInfo stores team's answer for ttl.
func (s *Store) CacheSearchInfo(ctx context.Context, team string, enabled bool, ttl time.Duration) error {
	if err := checkPart("team", team); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("session: search info %s: ttl must be positive", team)
	}
	v := "0"
	if enabled {
		v = "1"
	}
	if err := s.rdb.Set(ctx, s.k.searchInfo(team), v, ttl).Err(); err != nil {
		return s.wrap("cache search info "+team, err)
	}
	return nil
}
