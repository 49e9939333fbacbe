package mcp

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/servers"
)

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		glob, name string
		want       bool
	}{
		{"*", "anything", true},
		{"", "anything", true},
		{"get_*", "get_user", true},
		{"get_*", "get_", true},
		{"get_*", "set_user", false},
		{"*_user", "delete_user", true},
		{"delete_*_now", "delete_all_now", true},
		{"delete_*_now", "delete_all_later", false},
		{"l?okup", "lookup", true},
		{"lookup", "lookup", true},
		{"lookup", "lookups", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"crm/*", "crm/find", true},
	} {
		if got := globMatch(tc.glob, tc.name); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.glob, tc.name, got, tc.want)
		}
	}
}

func TestParsePolicyWords(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		in      string
		mode    Mode
		private *bool
		err     string
	}{
		{in: "ask", mode: servers.ModeAsk},
		{in: "auto-in-dm", mode: servers.ModeAutoInDM},
		{in: "AUTO private", mode: servers.ModeAuto, private: &yes},
		{in: "public", private: &no},
		{in: "private deny", mode: servers.ModeDeny, private: &yes},
		{in: "", err: "say a mode"},
		{in: "ask auto", err: "say one mode"},
		{in: "private public", err: "once"},
		{in: "sometimes", err: `"sometimes" is not a mode`},
	} {
		mode, private, err := ParsePolicyWords(strings.Fields(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || mode != tc.mode || !cmp.Equal(private, tc.private) {
			t.Errorf("%q = %q, %v, %v; want %q, %v", tc.in, mode, private, err, tc.mode, tc.private)
		}
	}
}

func TestPolicyConfig(t *testing.T) {
	cfg, err := parseConfig("mcp.yaml", []byte(`servers:
  - name: notes
    builtin: demo
    policy: auto-in-dm
  - name: crm
    url: https://crm.example.com/mcp
    policy:
      "*": ask
      "get_*": auto
      "delete_*": admin
      lookup: private
`))
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	want := [][]PolicyRule{
		{{Tool: "*", Mode: servers.ModeAutoInDM}},
		{{Tool: "*", Mode: servers.ModeAsk}, {Tool: "get_*", Mode: servers.ModeAuto}, {Tool: "delete_*", Mode: servers.ModeAdmin}, {Tool: "lookup", Private: &yes}},
	}
	for i, s := range cfg.Servers {
		if diff := cmp.Diff(want[i], s.Policy.Rules); diff != "" {
			t.Errorf("%s rules (-want +got):\n%s", s.Name, diff)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{"servers:\n  - name: x\n    builtin: demo\n    policy: sometimes\n", `servers[0] (x): policy: line 4: "sometimes": "sometimes" is not a mode`},
		{"servers:\n  - name: x\n    builtin: demo\n    policy: {get: [auto]}\n", `servers[0] (x): policy: line 4: the policy of "get" must be a string`},
		{"servers:\n  - name: x\n    builtin: demo\n    policy: [auto]\n", `servers[0] (x): policy: line 4: expected a mode`},
		{"servers:\n  - name: x\n    builtin: demo\n    policy: {'a b': auto}\n", `servers[0] (x): policy: line 4: tool glob "a b" contains a space`},
	} {
		_, err := parseConfig("mcp.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
}

func TestResolvePolicy(t *testing.T) {
	yes, no := true, false
	ro := &mcp.Tool{Name: "get_user", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no}}
	roOpen := &mcp.Tool{Name: "search_web", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}
	destr := &mcp.Tool{Name: "delete_user", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}
	bare := &mcp.Tool{Name: "lookup"}
	trusted := ServerConfig{Name: "crm", Trusted: true}
	untrusted := ServerConfig{Name: "crm"}
	for _, tc := range []struct {
		name  string
		cfg   ServerConfig
		admin []PolicyRule
		tool  *mcp.Tool
		want  Policy
	}{
		{"no rule, no annotations: ask", trusted, nil, bare, Policy{Mode: servers.ModeAsk, Source: servers.PolicyFromDefault}},
		{"trusted read-only closed-world: auto-in-dm", trusted, nil, ro, Policy{Mode: servers.ModeAutoInDM, Source: servers.PolicyFromAnnotations}},
		{"trusted read-only open-world (the default): ask", trusted, nil, roOpen, Policy{Mode: servers.ModeAsk, Source: servers.PolicyFromDefault}},
		{"trusted destructive: ask every time", trusted, nil, destr, Policy{Mode: servers.ModeAsk, OnceOnly: true, Source: servers.PolicyFromAnnotations}},
		{"untrusted read-only loosens nothing", untrusted, nil, ro, Policy{Mode: servers.ModeAsk, Source: servers.PolicyFromDefault}},
		{"untrusted destructive: plain ask", untrusted, nil, destr, Policy{Mode: servers.ModeAsk, Source: servers.PolicyFromDefault}},
		{"config glob", withPolicy(untrusted, PolicyRule{Tool: "get_*", Mode: servers.ModeAuto}), nil, ro, Policy{Mode: servers.ModeAuto, Source: servers.PolicyFromConfig}},
		{"exact beats glob", withPolicy(untrusted, PolicyRule{Tool: "*", Mode: servers.ModeAuto}, PolicyRule{Tool: "get_user", Mode: servers.ModeAdmin}), nil, ro,
			Policy{Mode: servers.ModeAdmin, Source: servers.PolicyFromConfig}},
		{"longer glob beats shorter", withPolicy(untrusted, PolicyRule{Tool: "get*", Mode: servers.ModeAuto}, PolicyRule{Tool: "get_u*", Mode: servers.ModeAsk}), nil, ro,
			Policy{Mode: servers.ModeAsk, Source: servers.PolicyFromConfig}},
		{"admin beats config of equal rank", withPolicy(untrusted, PolicyRule{Tool: "*", Mode: servers.ModeAsk}), []PolicyRule{{Tool: "*", Mode: servers.ModeAuto}}, ro,
			Policy{Mode: servers.ModeAuto, Source: servers.PolicyFromAdmin}},
		{"a rule beats the annotations", trusted, []PolicyRule{{Tool: "*", Mode: servers.ModeAuto}}, destr, Policy{Mode: servers.ModeAuto, Source: servers.PolicyFromAdmin}},
		{"admin on a destructive tool: no Always allow", trusted, []PolicyRule{{Tool: "delete_*", Mode: servers.ModeAdmin}}, destr,
			Policy{Mode: servers.ModeAdmin, OnceOnly: true, Source: servers.PolicyFromAdmin}},
		{"operator deny is a floor", withPolicy(untrusted, PolicyRule{Tool: "delete_*", Mode: servers.ModeDeny}), []PolicyRule{{Tool: "delete_user", Mode: servers.ModeAuto}}, destr,
			Policy{Mode: servers.ModeDeny, Source: servers.PolicyFromConfig}},
		{"deny list is a floor", ServerConfig{Name: "crm", Deny: []string{"lookup"}}, []PolicyRule{{Tool: "lookup", Mode: servers.ModeAuto}}, bare,
			Policy{Mode: servers.ModeDeny, Source: servers.PolicyFromConfig}},
		{"allow list is auto", ServerConfig{Name: "crm", Allow: []string{"lookup"}}, nil, bare, Policy{Mode: servers.ModeAuto, Source: servers.PolicyFromConfig}},
		{"privacy from its own rule", withPolicy(untrusted, PolicyRule{Tool: "*", Mode: servers.ModeAuto}), []PolicyRule{{Tool: "lookup", Private: &yes}}, bare,
			Policy{Mode: servers.ModeAuto, Private: true, Source: servers.PolicyFromConfig}},
		{"public overrides a server-wide private", withPolicy(untrusted, PolicyRule{Tool: "*", Private: &yes}), []PolicyRule{{Tool: "lookup", Private: &no}}, bare,
			Policy{Mode: servers.ModeAsk, Source: servers.PolicyFromDefault}},
		{"changed definition: back to ask", trusted, []PolicyRule{{Tool: "*", Mode: servers.ModeAuto}, {Tool: "get_user", Reset: true}}, ro,
			Policy{Mode: servers.ModeAsk, Source: servers.PolicyFromChanged}},
		{"changed definition keeps a narrower mode", trusted, []PolicyRule{{Tool: "get_*", Mode: servers.ModeAdmin}, {Tool: "get_user", Reset: true}}, ro,
			Policy{Mode: servers.ModeAdmin, Source: servers.PolicyFromAdmin}},
		{"the reset is of that tool only", trusted, []PolicyRule{{Tool: "*", Mode: servers.ModeAuto}, {Tool: "get_user", Reset: true}}, bare,
			Policy{Mode: servers.ModeAuto, Source: servers.PolicyFromAdmin}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolvePolicy(tc.cfg, tc.admin, tc.tool)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("resolvePolicy(%s) (-want +got):\n%s", tc.tool.Name, diff)
			}
		})
	}
}

func withPolicy(cfg ServerConfig, rules ...PolicyRule) ServerConfig {
	cfg.Policy.Rules = rules
	return cfg
}

// TestPolicyOffersTools: the policy decides what the model is offered and
// whether a call asks, per place; the server's scope still applies, and the
// narrower of the two wins.
func TestPolicyOffersTools(t *testing.T) {
	off := false
	cfg := &Config{Servers: []ServerConfig{
		{Name: "notes", Builtin: BuiltinDemo, Trusted: true},
		{Name: "quiet", Builtin: BuiltinDemo, Trusted: true, Scope: Scope{DM: &off}, Policy: PolicyConfig{Rules: []PolicyRule{{Tool: "*", Mode: servers.ModeAuto}}}},
	}}
	m := newTestManager(t, cfg, nil)
	ctx := context.Background()
	dm := Access{Team: "T1", Channel: "D1", DM: true}
	channel := Access{Team: "T1", Channel: "C1"}
	hints := func(a Access, name string) (policy string, allowed, offered bool) {
		t.Helper()
		tools, err := m.ToolsFor(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(toolNames(tools), name) {
			return "", false, false
		}
		h := toolByName(t, tools, name).Hints()
		return h.Policy, h.Allowed, true
	}
	// A trusted server's read-only, closed-world tool runs in DMs only.
	if p, ok, _ := hints(dm, "notes__list_notes"); p != "auto" || !ok {
		t.Errorf("list_notes in a DM: policy %q allowed %v; want auto", p, ok)
	}
	if p, ok, _ := hints(channel, "notes__list_notes"); p != "ask" || ok {
		t.Errorf("list_notes in a channel: policy %q allowed %v; want ask", p, ok)
	}
	if p, ok, _ := hints(dm, "notes__add_note"); p != "ask" || ok {
		t.Errorf("add_note in a DM: policy %q allowed %v; want ask", p, ok)
	}
	// auto does not widen a scope that keeps the server out of DMs.
	if _, _, offered := hints(dm, "quiet__list_notes"); offered {
		t.Error("quiet is offered in a DM although its scope says dm: false")
	}
	if p, ok, _ := hints(channel, "quiet__add_note"); p != "auto" || !ok {
		t.Errorf("quiet add_note in a channel: policy %q allowed %v; want auto", p, ok)
	}

	// An admin's deny: never offered.
	if _, err := m.SetPolicy(ctx, "T1", "notes", PolicyRule{Tool: "add_*", Mode: servers.ModeDeny}); err != nil {
		t.Fatal(err)
	}
	if _, _, offered := hints(dm, "notes__add_note"); offered {
		t.Error("a denied tool is offered to the model")
	}
	sp, err := m.SetPolicy(ctx, "T1", "notes", PolicyRule{Tool: "list_notes", Mode: servers.ModeAdmin})
	if err != nil {
		t.Fatal(err)
	}
	tools, _ := m.ToolsFor(ctx, dm)
	if h := toolByName(t, tools, "notes__list_notes").Hints(); h.Policy != "admin" || !h.AdminOnly || h.Allowed {
		t.Errorf("list_notes after `admin`: %+v", h)
	}
	wantTools := []servers.ToolPolicy{
		{Tool: "add_note", Policy: Policy{Mode: servers.ModeDeny, Source: servers.PolicyFromAdmin}},
		{Tool: "list_notes", Policy: Policy{Mode: servers.ModeAdmin, Source: servers.PolicyFromAdmin}},
	}
	if diff := cmp.Diff(wantTools, sp.Tools); diff != "" {
		t.Errorf("SetPolicy's report (-want +got):\n%s", diff)
	}
	// Privacy alone keeps the glob's mode, and the mode alone its privacy.
	m.SetPolicy(ctx, "T1", "notes", PolicyRule{Tool: "list_notes", Private: &[]bool{true}[0]})
	sp, _ = m.SetPolicy(ctx, "T1", "notes", PolicyRule{Tool: "list_notes", Mode: servers.ModeAsk})
	if got := sp.Tools[1].Policy; got.Mode != servers.ModeAsk || !got.Private {
		t.Errorf("list_notes after `private` then `ask`: %+v; want ask and private", got)
	}
	// Removing the rule (no words) brings the default back.
	if _, err := m.SetPolicy(ctx, "T1", "notes", PolicyRule{Tool: "add_*"}); err != nil {
		t.Fatal(err)
	}
	if _, _, offered := hints(dm, "notes__add_note"); !offered {
		t.Error("add_note is still not offered after its rule was removed")
	}
	if _, err := m.SetPolicy(ctx, "T1", "nope", PolicyRule{Mode: servers.ModeAuto}); err == nil {
		t.Error("SetPolicy of an unknown server succeeded")
	}
	// Another workspace is not affected.
	if p, ok, _ := hints(Access{Team: "T2", Channel: "D2", DM: true}, "notes__list_notes"); p != "auto" || !ok {
		t.Errorf("T2 list_notes in a DM: policy %q allowed %v; want auto", p, ok)
	}
}

// TestPolicyResetOnChange: a tool whose definition changed is back to ask
// once approved, whatever an admin set for it before.
func TestPolicyResetOnChange(t *testing.T) {
	cfg := &Config{Servers: []ServerConfig{testServerConfig(t, "evil", "legacy", map[string]string{"RUG_PULL": "1"})}}
	m := newTestManager(t, cfg, nil)
	ctx := context.Background()
	if _, err := m.Tools(ctx, "T1"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []PolicyRule{{Tool: "*", Mode: servers.ModeAuto}, {Tool: "shifty", Mode: servers.ModeAuto}} {
		if _, err := m.SetPolicy(ctx, "T1", "evil", r); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool {
		return slices.Contains(statusOf(t, m.Manager, "T1", "evil").Disabled, "shifty")
	})
	if _, err := m.Approve(ctx, "T1", "evil"); err != nil {
		t.Fatal(err)
	}
	tools, err := m.ToolsFor(ctx, Access{Team: "T1", Channel: "D1", DM: true})
	if err != nil {
		t.Fatal(err)
	}
	if h := toolByName(t, tools, "evil__shifty").Hints(); h.Policy != "ask" || h.Allowed {
		t.Errorf("shifty after its definition changed: policy %q allowed %v; want ask", h.Policy, h.Allowed)
	}
	if h := toolByName(t, tools, "evil__echo").Hints(); h.Policy != "auto" || !h.Allowed {
		t.Errorf("echo (unchanged): policy %q allowed %v; want auto", h.Policy, h.Allowed)
	}
	// An admin setting the tool's policy again lifts the reset.
	if _, err := m.SetPolicy(ctx, "T1", "evil", PolicyRule{Tool: "shifty", Mode: servers.ModeAuto}); err != nil {
		t.Fatal(err)
	}
	tools, _ = m.ToolsFor(ctx, Access{Team: "T1", Channel: "D1", DM: true})
	if h := toolByName(t, tools, "evil__shifty").Hints(); h.Policy != "auto" {
		t.Errorf("shifty after the admin set it again: policy %q; want auto", h.Policy)
	}
}

// TestPinBindsGrants: every tool carries its definition's pin
// (agent.Hints.Pin, which thread grants are bound to); approving a
// changed definition gives that tool a new pin and leaves the others'
// alone, and the tool as offered before the approval refuses to run.
func TestPinBindsGrants(t *testing.T) {
	cfg := &Config{Servers: []ServerConfig{testServerConfig(t, "evil", "legacy", map[string]string{"RUG_PULL": "1"})}}
	m := newTestManager(t, cfg, nil)
	ctx := context.Background()
	before, err := m.Tools(ctx, "T1")
	if err != nil {
		t.Fatal(err)
	}
	shifty, echo := toolByName(t, before, "evil__shifty").Hints(), toolByName(t, before, "evil__echo").Hints()
	if shifty.Pin == "" || echo.Pin == "" || shifty.Pin == echo.Pin {
		t.Fatalf("pins: shifty %q, echo %q; want two different hashes", shifty.Pin, echo.Pin)
	}
	if k := agent.GrantKey("evil__shifty", shifty); k != "evil__shifty@"+shifty.Pin {
		t.Errorf("GrantKey = %q", k)
	}
	waitFor(t, func() bool {
		return slices.Contains(statusOf(t, m.Manager, "T1", "evil").Disabled, "shifty")
	})
	if _, err := m.Approve(ctx, "T1", "evil"); err != nil {
		t.Fatal(err)
	}
	after, err := m.Tools(ctx, "T1")
	if err != nil {
		t.Fatal(err)
	}
	if h := toolByName(t, after, "evil__shifty").Hints(); h.Pin == "" || h.Pin == shifty.Pin {
		t.Errorf("shifty's pin after its new definition was approved: %q (before %q); want a new one", h.Pin, shifty.Pin)
	}
	if h := toolByName(t, after, "evil__echo").Hints(); h.Pin != echo.Pin {
		t.Errorf("echo's pin moved from %q to %q though its definition did not change", echo.Pin, h.Pin)
	}
	// The tool as a turn that began before the approval has it.
	if _, err := toolByName(t, before, "evil__shifty").Call(ctx, json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "changed since this turn began") {
		t.Errorf("the old shifty's call: %v; want refused as changed", err)
	}
	if _, err := toolByName(t, before, "evil__echo").Call(ctx, json.RawMessage(`{"message":"hi"}`)); err != nil {
		t.Errorf("the unchanged echo's call: %v", err)
	}
}
