package admin

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bobbinbot/bobbin/agent/servers"
)

func TestParsePolicyCommand(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		in   string
		want *policyCmd
		err  string
	}{
		{in: "mcp policy crm", want: &policyCmd{Rule: servers.Rule{Tool: "*"}, Show: true}},
		{in: "mcp policy crm auto", want: &policyCmd{Rule: servers.Rule{Tool: "*", Mode: "auto"}}},
		{in: "mcp policy crm get_* auto-in-dm", want: &policyCmd{Rule: servers.Rule{Tool: "get_*", Mode: "auto-in-dm"}}},
		{in: "mcp policy crm delete_* ADMIN", want: &policyCmd{Rule: servers.Rule{Tool: "delete_*", Mode: "admin"}}},
		{in: "mcp policy crm lookup private", want: &policyCmd{Rule: servers.Rule{Tool: "lookup", Private: &yes}}},
		{in: "mcp policy crm public", want: &policyCmd{Rule: servers.Rule{Tool: "*", Private: &no}}},
		{in: "mcp policy crm drop deny private", want: &policyCmd{Rule: servers.Rule{Tool: "drop", Mode: "deny", Private: &yes}}},
		{in: "mcp policy crm get_* clear", want: &policyCmd{Rule: servers.Rule{Tool: "get_*"}, Clear: true}},
		{in: "mcp policy", err: "Usage: `/bobbin mcp policy"},
		{in: "mcp policy crm lookup", err: "Say the policy for `lookup`"},
		{in: "mcp policy crm lookup sometimes", err: `"sometimes" is not a mode`},
		{in: "mcp policy crm ask auto", err: "Say one mode"},
		{in: "mcp policy crm private public", err: "once"},
		{in: "mcp policy bad!name auto", err: ""},
	} {
		cmd, err := parseCommand(tc.in)
		if tc.want == nil {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || cmd.Op != opPolicy || cmd.Name != "crm" {
			t.Errorf("%q = %+v, %v", tc.in, cmd, err)
			continue
		}
		if diff := cmp.Diff(tc.want, cmd.Policy); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestPolicyToolsLine(t *testing.T) {
	sp := servers.PolicyReport{Server: "crm", Tools: []servers.ToolPolicy{
		{Tool: "find", Policy: servers.Policy{Mode: "auto-in-dm", Source: "annotations"}},
		{Tool: "wipe", Policy: servers.Policy{Mode: "ask", OnceOnly: true}},
		{Tool: "lookup", Policy: servers.Policy{Mode: "ask", Private: true}},
		{Tool: "edit", Policy: servers.Policy{Mode: "ask", Source: "definition changed"}},
	}}
	want := "policy: auto-in-dm (runs without asking in DMs, asks in channels): `find` · ask (asks): `wipe` (every time), `lookup` (private), `edit` (definition changed)"
	if got := policyToolsLine(sp); got != want {
		t.Errorf("policyToolsLine =\n%s\nwant\n%s", got, want)
	}
}

// TestReadmePolicyCommands: every `/bobbin mcp policy` example in
// README.md parses.
func TestReadmePolicyCommands(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(raw), "\n") {
		cmdline, ok := strings.CutPrefix(strings.TrimSpace(line), "/bobbin ")
		if !ok || !strings.HasPrefix(cmdline, "mcp policy ") {
			continue
		}
		cmdline, _, _ = strings.Cut(cmdline, "#")
		n++
		if cmd, err := parseCommand(strings.TrimSpace(cmdline)); err != nil || cmd.Op != opPolicy {
			t.Errorf("README: /bobbin %s: %+v, %v", cmdline, cmd, err)
		}
	}
	if n < 3 {
		t.Errorf("README.md has %d /bobbin mcp policy examples, want at least 3", n)
	}
}
