package mcp

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"
)

// The policy vocabulary is shared with the bot (package servers): one
// definition each.
type (
	// Mode is what happens when the model calls a tool (servers.Mode).
	Mode = servers.Mode
	// PolicyRule is one rule of a tool policy (servers.Rule).
	PolicyRule = servers.Rule
	// Policy is the resolved policy of one tool (servers.Policy).
	Policy = servers.Policy
)

// strictness orders modes: a higher number is narrower.
func strictness(m Mode) int { return slices.Index(servers.Modes, m) }

// ParsePolicyWords parses the words after the tool glob of a policy: a
// mode and/or private or public ("ask", "auto private", "public"). The
// same grammar serves MCP_CONFIG and /bobbin mcp policy.
func ParsePolicyWords(words []string) (Mode, *bool, error) {
	var mode Mode
	var private *bool
	if len(words) == 0 {
		return "", nil, fmt.Errorf("say a mode (%s) and/or private or public", modeList())
	}
	for _, w := range words {
		lw := strings.ToLower(strings.TrimSpace(w))
		switch {
		case lw == "private" || lw == "public":
			if private != nil {
				return "", nil, fmt.Errorf("say private or public once")
			}
			p := lw == "private"
			private = &p
		case slices.Contains(servers.Modes, Mode(lw)):
			if mode != "" {
				return "", nil, fmt.Errorf("say one mode, not %s and %s", mode, lw)
			}
			mode = Mode(lw)
		default:
			return "", nil, fmt.Errorf("%q is not a mode (%s) nor private or public", w, modeList())
		}
	}
	return mode, private, nil
}

func modeList() string {
	s := make([]string, len(servers.Modes))
	for i, m := range servers.Modes {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// PolicyConfig is a server's policy in MCP_CONFIG: either one line for
// every tool ("policy: auto-in-dm", "policy: ask private") or a mapping
// from tool glob to such a line ("policy: {'*': ask, 'get_*': auto}").
type PolicyConfig struct {
	Rules []PolicyRule
	// Problems are the entries that did not parse, reported by
	// LoadConfig with the server's name.
	Problems []string
}

// UnmarshalYAML reads the scalar or mapping form; bad entries are kept as
// problems so that every one is reported with the server's name.
func (p *PolicyConfig) UnmarshalYAML(n *yaml.Node) error {
	add := func(glob, words string, line int) {
		mode, private, err := ParsePolicyWords(strings.Fields(words))
		if err != nil {
			p.Problems = append(p.Problems, fmt.Sprintf("line %d: %q: %v", line, words, err))
			return
		}
		p.Rules = append(p.Rules, PolicyRule{Tool: glob, Mode: mode, Private: private})
	}
	switch n.Kind {
	case yaml.ScalarNode:
		add("*", n.Value, n.Line)
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				p.Problems = append(p.Problems, fmt.Sprintf("line %d: the policy of %q must be a string such as \"ask\" or \"auto private\"", v.Line, k.Value))
				continue
			}
			if msg := checkGlob(k.Value); msg != "" {
				p.Problems = append(p.Problems, fmt.Sprintf("line %d: %s", k.Line, msg))
				continue
			}
			add(k.Value, v.Value, v.Line)
		}
	default:
		p.Problems = append(p.Problems, fmt.Sprintf("line %d: expected a mode such as \"ask\", or a mapping from tool name (or glob) to a mode", n.Line))
	}
	return nil
}

// checkGlob returns what is wrong with a tool glob ("" when nothing).
func checkGlob(g string) string {
	switch {
	case strings.TrimSpace(g) == "":
		return "empty tool name"
	case len(g) > 128:
		return "tool glob longer than 128 characters"
	case strings.ContainsAny(g, " \t\r\n"):
		return fmt.Sprintf("tool glob %q contains a space", g)
	}
	return ""
}

// CheckGlob is checkGlob for /bobbin mcp policy.
func CheckGlob(g string) error {
	if msg := checkGlob(g); msg != "" {
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// globMatch reports whether name matches the glob (* any run, ? one rune).
func globMatch(glob, name string) bool {
	if glob == "" || glob == "*" {
		return true
	}
	g, n := []rune(glob), []rune(name)
	// Iterative matching with one backtrack point for the last star.
	gi, ni, star, mark := 0, 0, -1, 0
	for ni < len(n) {
		switch {
		case gi < len(g) && (g[gi] == '?' || g[gi] == n[ni]):
			gi++
			ni++
		case gi < len(g) && g[gi] == '*':
			star, mark = gi, ni
			gi++
		case star >= 0:
			gi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for gi < len(g) && g[gi] == '*' {
		gi++
	}
	return gi == len(g)
}

// specificity ranks globs: an exact name beats any glob, a glob with more
// literal characters beats one with fewer, and every tool ("*") is last.
func specificity(glob string) int {
	if glob == "" || glob == "*" {
		return 0
	}
	if !strings.ContainsAny(glob, "*?") {
		return 1 << 20
	}
	return 1 + len(glob) - strings.Count(glob, "*") - strings.Count(glob, "?")
}

// applyPolicy sets the policy fields of h for a place (dm: a direct
// message or the assistant pane).
func applyPolicy(h agent.Hints, p Policy, dm bool) agent.Hints {
	mode := p.At(dm)
	h.Policy = string(mode)
	h.Allowed = mode == servers.ModeAuto
	h.AdminOnly = mode == servers.ModeAdmin
	h.Denied = h.Denied || mode == servers.ModeDeny
	h.OnceOnly = p.OnceOnly
	h.Private = p.Private
	return h
}

// sourcedRule is a rule and where it was set.
type sourcedRule struct {
	PolicyRule
	admin bool
}

// resolvePolicy is the policy of tool t of the server cfg with the
// workspace admins' rules for that server. The most specific rule wins
// (an admin's over the operator's when equally specific); the operator's
// deny (deny list or deny mode) is a floor admins cannot lift. Without a
// rule, a trusted server's annotations set the default; an untrusted
// server's never loosen anything. A tool whose definition changed is at
// most ask until an admin sets its policy again.
func resolvePolicy(cfg ServerConfig, admin []PolicyRule, t *mcp.Tool) Policy {
	var rules []sourcedRule
	for _, r := range cfg.Policy.Rules {
		rules = append(rules, sourcedRule{PolicyRule: r})
	}
	for _, n := range cfg.Allow {
		rules = append(rules, sourcedRule{PolicyRule: PolicyRule{Tool: n, Mode: servers.ModeAuto}})
	}
	for _, r := range admin {
		rules = append(rules, sourcedRule{PolicyRule: r, admin: true})
	}
	best := func(set func(r sourcedRule) bool) (sourcedRule, bool) {
		var out sourcedRule
		found, score := false, -1
		for _, r := range rules {
			if !set(r) || !globMatch(r.Tool, t.Name) {
				continue
			}
			s := specificity(r.Tool) * 2
			if r.admin {
				s++
			}
			if s > score {
				out, found, score = r, true, s
			}
		}
		return out, found
	}
	p := Policy{Mode: servers.ModeAsk, Source: servers.PolicyFromDefault}
	a := t.Annotations
	destructive := cfg.Trusted && a != nil && a.DestructiveHint != nil && *a.DestructiveHint && !a.ReadOnlyHint
	if r, ok := best(func(r sourcedRule) bool { return r.Mode != "" }); ok {
		p.Mode, p.Source = r.Mode, servers.PolicyFromConfig
		if r.admin {
			p.Source = servers.PolicyFromAdmin
		}
	} else if cfg.Trusted && a != nil {
		// The spec's default of openWorldHint is true: only a tool that
		// says it stays in its own world runs without asking.
		switch {
		case destructive:
			p.Source = servers.PolicyFromAnnotations
		case a.ReadOnlyHint && a.OpenWorldHint != nil && !*a.OpenWorldHint:
			p.Mode, p.Source = servers.ModeAutoInDM, servers.PolicyFromAnnotations
		}
	}
	if r, ok := best(func(r sourcedRule) bool { return r.Private != nil }); ok {
		p.Private = *r.Private
	}
	// The operator's deny is a floor.
	denied := slices.Contains(cfg.Deny, t.Name) || slices.ContainsFunc(cfg.Policy.Rules, func(r PolicyRule) bool {
		return r.Mode == servers.ModeDeny && globMatch(r.Tool, t.Name)
	})
	if denied {
		p.Mode, p.Source = servers.ModeDeny, servers.PolicyFromConfig
	}
	for _, r := range admin {
		if r.Reset && r.Tool == t.Name && strictness(p.Mode) < strictness(servers.ModeAsk) {
			p.Mode, p.Source = servers.ModeAsk, servers.PolicyFromChanged
		}
	}
	// A destructive tool is asked for every time, whatever asks.
	p.OnceOnly = destructive && (p.Mode == servers.ModeAsk || p.Mode == servers.ModeAdmin)
	return p
}

// PolicyStore keeps the tool policies workspace admins set from Slack.
// cmd/bot adapts the session package to it.
type PolicyStore interface {
	// ToolPolicies returns the workspace's rules by server.
	ToolPolicies(ctx context.Context, team string) (map[string][]PolicyRule, error)
	// PutToolPolicy stores (or, when rule.IsZero, removes) the rule of
	// server for rule.Tool.
	PutToolPolicy(ctx context.Context, team, server string, rule PolicyRule) error
}

// memPolicies is the PolicyStore when Options.Policies is nil (one
// process only).
type memPolicies struct {
	mu sync.Mutex
	m  map[string]map[string][]PolicyRule
}

func (p *memPolicies) ToolPolicies(_ context.Context, team string) (map[string][]PolicyRule, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]PolicyRule{}
	for s, rs := range p.m[team] {
		out[s] = slices.Clone(rs)
	}
	return out, nil
}

func (p *memPolicies) PutToolPolicy(_ context.Context, team, server string, rule PolicyRule) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]map[string][]PolicyRule{}
	}
	if p.m[team] == nil {
		p.m[team] = map[string][]PolicyRule{}
	}
	rs := slices.DeleteFunc(p.m[team][server], func(r PolicyRule) bool { return r.Tool == rule.Tool })
	if !rule.IsZero() {
		rs = append(rs, rule)
	}
	p.m[team][server] = rs
	return nil
}

// policies reads the workspace's admin rules; a store error is logged and
// counts as none (the operator's rules and the defaults still apply, and
// with no rule every tool asks).
func (m *Manager) policies(ctx context.Context, team string) map[string][]PolicyRule {
	out, err := m.policyStore.ToolPolicies(ctx, team)
	if err != nil {
		m.log.Warn("mcp: reading tool policies failed; using the configured ones", "team", team, "err", err)
		return nil
	}
	return out
}

// Policies reports the policy of every server of the workspace (tools as
// last listed; nothing is connected for it).
func (m *Manager) Policies(ctx context.Context, team string) ([]servers.PolicyReport, error) {
	mts, err := m.mounts(ctx, team)
	if err != nil {
		return nil, err
	}
	admin := m.policies(ctx, team)
	var out []servers.PolicyReport
	for _, mt := range mts {
		sp := servers.PolicyReport{Server: mt.cfg.Name, Config: slices.Clone(mt.cfg.Policy.Rules), Admin: admin[mt.cfg.Name]}
		for _, n := range mt.cfg.Deny {
			sp.Config = append(sp.Config, PolicyRule{Tool: n, Mode: servers.ModeDeny})
		}
		for _, n := range mt.cfg.Allow {
			sp.Config = append(sp.Config, PolicyRule{Tool: n, Mode: servers.ModeAuto})
		}
		mt.mu.Lock()
		tools := mt.tools
		mt.mu.Unlock()
		for _, t := range tools {
			sp.Tools = append(sp.Tools, servers.ToolPolicy{Tool: t.Name, Policy: resolvePolicy(mt.cfg, sp.Admin, t)})
		}
		sort.Slice(sp.Tools, func(i, j int) bool { return sp.Tools[i].Tool < sp.Tools[j].Tool })
		out = append(out, sp)
	}
	return out, nil
}

// SetPolicy stores an admin's rule for a server of the workspace (no mode
// and no privacy: removes the rule of that glob; only one of them: the
// other is kept from the glob's rule). It returns the server's
// policy after the change. The next turn on any replica applies it.
func (m *Manager) SetPolicy(ctx context.Context, team, server string, rule PolicyRule) (servers.PolicyReport, error) {
	if msg := checkGlob(cmpGlob(rule.Tool)); msg != "" {
		return servers.PolicyReport{}, fmt.Errorf("mcp: policy: %s", msg)
	}
	if _, _, err := m.findMount(ctx, team, server); err != nil {
		return servers.PolicyReport{}, err
	}
	rule.Tool = cmpGlob(rule.Tool)
	rule.Reset = false
	// A rule that says only the mode (or only the privacy) keeps the
	// other half of the glob's rule: `lookup private` keeps lookup's mode.
	if !rule.IsZero() && (rule.Mode == "" || rule.Private == nil) {
		for _, old := range m.policies(ctx, team)[server] {
			if old.Tool != rule.Tool {
				continue
			}
			if rule.Mode == "" {
				rule.Mode = old.Mode
			}
			if rule.Private == nil {
				rule.Private = old.Private
			}
		}
	}
	if err := m.policyStore.PutToolPolicy(ctx, team, server, rule); err != nil {
		return servers.PolicyReport{}, fmt.Errorf("mcp: storing the policy of %s: %w", server, err)
	}
	// The store bumps the workspace version (session); the policy itself
	// is read at every turn, so the next turn on any replica applies it.
	m.log.Info("mcp tool policy set", "team", team, "server", server, "tool", rule.Tool, "policy", rule.Words())
	all, err := m.Policies(ctx, team)
	if err != nil {
		return servers.PolicyReport{}, err
	}
	for _, sp := range all {
		if sp.Server == server {
			return sp, nil
		}
	}
	return servers.PolicyReport{Server: server}, nil
}

func cmpGlob(g string) string {
	if g == "" {
		return "*"
	}
	return g
}

// resetPolicies marks the tools whose definition changed: each is back to
// ask (at most) until an admin sets its policy again.
func (m *Manager) resetPolicies(ctx context.Context, team, server string, tools []string) {
	if len(tools) == 0 {
		return
	}
	rules := m.policies(ctx, team)[server]
	for _, name := range tools {
		// Only a cap: a rule of its own would outrank narrower globs.
		r := PolicyRule{Tool: name, Reset: true}
		if i := slices.IndexFunc(rules, func(r PolicyRule) bool { return r.Tool == name }); i >= 0 {
			r = rules[i]
			r.Reset = true
		}
		if err := m.policyStore.PutToolPolicy(ctx, team, server, r); err != nil {
			m.log.Warn("mcp: resetting a changed tool's policy failed", "team", team, "server", server, "tool", name, "err", err)
		}
	}
}

// EncodePolicy is how a stored rule's words are kept: Words, with
// "reset" when the tool's definition changed since.
func EncodePolicy(r PolicyRule) string {
	w := r.Words()
	if r.Reset {
		w = strings.TrimSpace(w + " reset")
	}
	return w
}

// DecodePolicy reverses EncodePolicy for the rule of glob.
func DecodePolicy(glob, words string) (PolicyRule, error) {
	f := strings.Fields(words)
	reset := slices.Contains(f, "reset")
	f = slices.DeleteFunc(f, func(s string) bool { return s == "reset" })
	r := PolicyRule{Tool: glob, Reset: reset}
	if len(f) == 0 {
		if !reset {
			return PolicyRule{}, fmt.Errorf("mcp: policy of %s: no words", glob)
		}
		return r, nil
	}
	mode, private, err := ParsePolicyWords(f)
	if err != nil {
		return PolicyRule{}, fmt.Errorf("mcp: policy of %s: %w", glob, err)
	}
	r.Mode, r.Private = mode, private
	return r, nil
}
