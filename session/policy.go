package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Tool policies admins set from Slack (/bobbin mcp policy), per workspace:
// one hash {w:TEAM}:policy whose fields are "SERVER/GLOB" and values the
// policy's words ("auto private", "ask", "reset"). The mcp package reads
// and writes the words; this store keeps them.

// MaxToolPolicies bounds the rules of one workspace.
const MaxToolPolicies = 1024

func (k keys) policies(team string) string { return k.prefix + ":{w:" + team + "}:policy" }

// ToolPolicies returns the workspace's rules: server → tool glob → words.
func (s *Store) ToolPolicies(ctx context.Context, team string) (map[string]map[string]string, error) {
	if err := checkPart("team", team); err != nil {
		return nil, err
	}
	h, err := s.rdb.HGetAll(ctx, s.k.policies(team)).Result()
	if err != nil {
		return nil, s.wrap("tool policies", err)
	}
	out := map[string]map[string]string{}
	for f, v := range h {
		server, glob, ok := strings.Cut(f, "/")
		if !ok || server == "" || glob == "" {
			continue // not ours: skip rather than fail every turn
		}
		if out[server] == nil {
			out[server] = map[string]string{}
		}
		out[server][glob] = v
	}
	return out, nil
}

// PutToolPolicy sets the words of server's rule for glob; empty words
// remove the rule. Either bumps the workspace version.
func (s *Store) PutToolPolicy(ctx context.Context, team, server, glob, words string) error {
	if err := errors.Join(checkPart("team", team), checkPart("server name", server)); err != nil {
		return err
	}
	if glob == "" || len(glob) > 128 || strings.ContainsAny(glob, " \t\r\n") {
		return fmt.Errorf("session: invalid tool glob %q", glob)
	}
	key, field := s.k.policies(team), server+"/"+glob
	if words == "" {
		pipe := s.rdb.TxPipeline()
		pipe.HDel(ctx, key, field)
		s.bump(ctx, pipe, team)
		if _, err := pipe.Exec(ctx); err != nil {
			return s.wrap("delete tool policy "+field, err)
		}
		return nil
	}
	n, err := s.rdb.HLen(ctx, key).Result()
	if err != nil {
		return s.wrap("put tool policy "+field, err)
	}
	if n >= MaxToolPolicies {
		if ok, _ := s.rdb.HExists(ctx, key, field).Result(); !ok {
			return fmt.Errorf("session: tool policies: %w (%d)", ErrTooMany, MaxToolPolicies)
		}
	}
	pipe := s.rdb.TxPipeline()
	pipe.HSet(ctx, key, field, words)
	s.indexed(ctx, pipe, team, key)
	// Policies are read at every turn; the bump tells replicas' caches
	// of the workspace that something changed all the same.
	s.bump(ctx, pipe, team)
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("put tool policy "+field, err)
	}
	return nil
}

// flag is a boolean hash field: "1" or "".
func flag(b bool) string {
	if b {
		return "1"
	}
	return ""
}
