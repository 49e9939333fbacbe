package session

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// The workspace version is a counter every replica reads at the start of a
// turn: a change other replicas must see before their next turn (an MCP
// server registered, removed or re-scoped, a person's OAuth connection made
// or dropped, and whatever else calls BumpWorkspace) increments it, and a
// replica that sees it move reloads what it cached of the workspace. It has
// the workspace's tag, so the scripts that change a registration bump it in
// the same step.
func (k keys) version(team string) string { return k.prefix + ":{w:" + team + "}:ver" }

// WorkspaceVersion returns team's change counter (0 before the first
// change). Only its changes mean something: the value itself is not a
// count of anything and may restart after the workspace's data expired.
func (s *Store) WorkspaceVersion(ctx context.Context, team string) (int64, error) {
	if err := checkPart("team", team); err != nil {
		return 0, err
	}
	v, err := s.rdb.Get(ctx, s.k.version(team)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, s.wrap("workspace version "+team, err)
	}
	return v, nil
}

// BumpWorkspace increments team's change counter, so every replica reloads
// the workspace's cached configuration at its next turn. Registration and
// OAuth connection writes bump it themselves; other per-workspace settings
// (tool policies, agent profiles) call it after they are stored.
func (s *Store) BumpWorkspace(ctx context.Context, team string) error {
	if err := checkPart("team", team); err != nil {
		return err
	}
	pipe := s.rdb.TxPipeline()
	s.bump(ctx, pipe, team)
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("bump workspace "+team, err)
	}
	return nil
}

// bump queues the counter's increment on pipe; the key is in the
// workspace's index so an uninstall's clean-up finds it.
func (s *Store) bump(ctx context.Context, pipe redis.Pipeliner, team string) {
	pipe.Incr(ctx, s.k.version(team))
	s.indexed(ctx, pipe, team, s.k.version(team))
}
