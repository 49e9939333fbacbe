package main

import (
	"context"
	"sort"

	"github.com/bobbinbot/bobbin/bot"
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

// Policies implements bot.PolicyAdmin.
func (a mcpAdmin) Policies(ctx context.Context, team string) ([]bot.ServerPolicy, error) {
	sps, err := a.m.Policies(ctx, team)
	if err != nil {
		return nil, err
	}
	out := make([]bot.ServerPolicy, len(sps))
	for i, sp := range sps {
		out[i] = botPolicy(sp)
	}
	return out, nil
}

// SetPolicy implements bot.PolicyAdmin.
func (a mcpAdmin) SetPolicy(ctx context.Context, team, server string, r bot.PolicyRule) (bot.ServerPolicy, error) {
	sp, err := a.m.SetPolicy(ctx, team, server, mcp.PolicyRule{Tool: r.Tool, Mode: mcp.Mode(r.Mode), Private: r.Private})
	return botPolicy(sp), mapErr(err)
}

func botPolicy(sp mcp.ServerPolicy) bot.ServerPolicy {
	rules := func(rs []mcp.PolicyRule) []bot.PolicyRule {
		out := make([]bot.PolicyRule, 0, len(rs))
		for _, r := range rs {
			out = append(out, bot.PolicyRule{Tool: r.Tool, Mode: string(r.Mode), Private: r.Private, Reset: r.Reset})
		}
		return out
	}
	out := bot.ServerPolicy{Server: sp.Server, Config: rules(sp.Config), Admin: rules(sp.Admin)}
	for _, t := range sp.Tools {
		out.Tools = append(out.Tools, bot.ToolPolicy{Tool: t.Tool, Mode: string(t.Mode), Private: t.Private, OnceOnly: t.OnceOnly, Source: t.Source})
	}
	return out
}
