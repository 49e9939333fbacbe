package admin

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bobbinbot/bobbin/agent/access"
)

func TestParseScopeCommand(t *testing.T) {
	f, tr := false, true
	ok := []struct {
		text  string
		want  access.Scope
		clear bool
	}{
		// As Slack sends them with escaping on.
		{"mcp scope db <#C0ONCALL|oncall> <@U0ALICE|alice> <!subteam^S0TEAM|@oncall-team> guests dm:off",
			access.Scope{Channels: []string{"C0ONCALL"}, Users: []string{"U0ALICE"}, Usergroups: []string{"S0TEAM"}, Guests: true, DM: &f}, false},
		{"mcp scope db <#C1> <@U2> <!subteam^S3>", access.Scope{Channels: []string{"C1"}, Users: []string{"U2"}, Usergroups: []string{"S3"}}, false},
		// Bare ids, duplicates dropped, a private channel, a Grid user.
		{"mcp scope db C1 C1 G2 U3 W4 S5 dm:on", access.Scope{Channels: []string{"C1", "G2"}, Users: []string{"U3", "W4"}, Usergroups: []string{"S5"}, DM: &tr}, false},
		// A label with spaces, split by the tokenizer, is put back together.
		{"mcp scope db <@U1|Alice Archer> <#C2|general>", access.Scope{Channels: []string{"C2"}, Users: []string{"U1"}}, false},
		{"mcp scope db guests", access.Scope{Guests: true}, false},
		{"mcp scope db clear", access.Scope{}, true},
		{"MCP SCOPE db CLEAR", access.Scope{}, true},
	}
	for _, tc := range ok {
		cmd, err := parseCommand(tc.text)
		if err != nil {
			t.Errorf("%q: %v", tc.text, err)
			continue
		}
		if cmd.Op != opScope || cmd.Name != "db" || cmd.ClearScope != tc.clear {
			t.Errorf("%q parsed as %+v", tc.text, cmd)
		}
		if diff := cmp.Diff(tc.want, cmd.Scope); diff != "" {
			t.Errorf("%q scope (-want +got):\n%s", tc.text, diff)
		}
	}
	bad := map[string]string{
		"mcp scope":                       "Usage: `/bobbin mcp scope",
		"mcp scope db":                    "Usage: `/bobbin mcp scope",
		"mcp scope bad/name C1":           "is not a server name",
		"mcp scope db #general":           "I can't tell which channel",
		"mcp scope db @alice":             "I can't tell who",
		"mcp scope db <#D0ALICE|alice>":   "Direct messages are not channels",
		"mcp scope db D0ALICE":            "Direct messages are not channels",
		"mcp scope db <!subteam^x|@team>": "is not a user group",
		"mcp scope db C1 clear":           "use it alone",
		"mcp scope db everyone":           "I don't understand",
		"mcp scope db <!channel>":         "I don't understand",
	}
	for text, want := range bad {
		_, err := parseCommand(text)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", text, err, want)
		}
	}
	many := "mcp scope db"
	for i := range maxScopeEntries + 1 {
		many += " U" + strings.Repeat("A", 1+i%5) + strings.Repeat("B", i/5)
	}
	if _, err := parseCommand(many); err == nil || !strings.Contains(err.Error(), "At most") {
		t.Errorf("too many entries: %v", err)
	}
}

func TestDescribeScope(t *testing.T) {
	f := false
	cases := []struct {
		s    access.Scope
		want string
	}{
		{access.Scope{}, "every channel and DMs · every member · no guests or people of other organizations"},
		{access.Scope{Channels: []string{"C1"}}, "only in <#C1>, not in DMs · every member · no guests or people of other organizations"},
		{access.Scope{DM: &f, Guests: true}, "every channel, not in DMs · every member · guests and people of other organizations too"},
		{access.Scope{Users: []string{"U1"}, Usergroups: []string{"S1"}}, "every channel and DMs · only <@U1>, members of `S1` · no guests or people of other organizations"},
	}
	for _, tc := range cases {
		if got := describeScope(tc.s); got != tc.want {
			t.Errorf("describeScope(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
	if got := scopeSummary(access.Scope{Channels: []string{"C1", "C2"}, Usergroups: []string{"S1"}, Guests: true, DM: &f}); got != "channels=C1,C2 usergroups=S1 guests dm=false" {
		t.Errorf("scopeSummary = %q", got)
	}
}
