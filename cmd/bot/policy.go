package main

import (
	"context"
	"sort"

	"github.com/bobbinbot/bobbin/mcp"
	"github.com/bobbinbot/bobbin/session"
)

// policyStore adapts the session store to mcp.PolicyStore: the tool
// policies admins set with /bobbin mcp policy.
type policyStore struct{ s *session.Store }

func (p policyStore) ToolPolicies(ctx context.Context, team string) (map[string][]mcp.PolicyRule, error) {
	raw, err := p.s.ToolPolicies(ctx, team)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]mcp.PolicyRule, len(raw))
	for server, rules := range raw {
		for glob, words := range rules {
			r, err := mcp.DecodePolicy(glob, words)
			if err != nil {
				continue // an unreadable rule is ignored: the default (ask) or a broader rule applies
			}
			out[server] = append(out[server], r)
		}
		sort.Slice(out[server], func(i, j int) bool { return out[server][i].Tool < out[server][j].Tool })
	}
	return out, nil
}

func (p policyStore) PutToolPolicy(ctx context.Context, team, server string, r mcp.PolicyRule) error {
	return p.s.PutToolPolicy(ctx, team, server, r.Tool, mcp.EncodePolicy(r))
}
