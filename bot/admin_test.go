package bot

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/session"
)

// TestMayDecide is the authorization matrix of approval buttons (and of
// admin commands) against users.info of the Slack emulator.
func TestMayDecide(t *testing.T) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	t.Cleanup(emu.Close)
	api := slack.New(slackemu.BotToken, slack.OptionAPIURL(emu.APIURL()))
	lookup := func(ctx context.Context, id string) (*slack.User, error) { return api.GetUserInfoContext(ctx, id) }
	const team = slackemu.TeamID
	const requester = slackemu.UserAlice

	tests := []struct {
		name     string
		user     string
		userTeam string
		admins   []string
		req      string
		wantRole role
		wantOK   bool
	}{
		{"requester", slackemu.UserAlice, team, nil, requester, roleMember, true},
		{"other member", slackemu.UserBob, team, nil, requester, roleMember, false},
		{"admin via users.info", slackemu.UserAdmin, team, nil, requester, roleAdmin, true},
		{"owner via users.info", slackemu.UserOwner, team, nil, requester, roleAdmin, true},
		{"admin via BOT_ADMINS", slackemu.UserBob, team, []string{"UX", slackemu.UserBob}, requester, roleAdmin, true},
		{"BOT_ADMINS from another team", slackemu.UserBob, slackemu.TeamID2, []string{slackemu.UserBob}, requester, roleNone, false},
		{"guest", slackemu.UserGuest, team, nil, requester, roleNone, false},
		{"guest who asked", slackemu.UserGuest, team, nil, slackemu.UserGuest, roleNone, false},
		{"single-channel guest", slackemu.UserSingle, team, nil, requester, roleNone, false},
		{"stranger", slackemu.UserStranger, "T999", nil, requester, roleNone, false},
		{"stranger without payload team", slackemu.UserStranger, "", nil, requester, roleNone, false},
		{"deleted", slackemu.UserDeleted, team, nil, requester, roleNone, false},
		{"deleted who asked", slackemu.UserDeleted, team, nil, slackemu.UserDeleted, roleNone, false},
		{"bot", slackemu.UserOtherBot, team, nil, requester, roleNone, false},
		{"other workspace", slackemu.UserT2, slackemu.TeamID2, nil, requester, roleNone, false},
		{"unknown user", "UNOBODY", team, nil, requester, roleNone, false},
		{"empty user", "", team, nil, requester, roleNone, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c roleCache
			r, why := c.role(context.Background(), lookup, tt.admins, team, tt.user, tt.userTeam)
			if r != tt.wantRole {
				t.Errorf("role(%s) = %v (%s), want %v", tt.user, r, why, tt.wantRole)
			}
			ok, msg := decideRule(r, why, tt.user, tt.req, "answer this request")
			if ok != tt.wantOK {
				t.Errorf("decideRule(%s, requester %s) = %v (%q), want %v", tt.user, tt.req, ok, msg, tt.wantOK)
			}
			if !ok && msg == "" {
				t.Errorf("refusal without an explanation")
			}
		})
	}
}

func TestRoleCacheReusesLookups(t *testing.T) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	t.Cleanup(emu.Close)
	api := slack.New(slackemu.BotToken, slack.OptionAPIURL(emu.APIURL()))
	lookup := func(ctx context.Context, id string) (*slack.User, error) { return api.GetUserInfoContext(ctx, id) }
	var c roleCache
	for range 3 {
		if r, _ := c.role(context.Background(), lookup, nil, slackemu.TeamID, slackemu.UserAdmin, ""); r != roleAdmin {
			t.Fatalf("role = %v, want admin", r)
		}
	}
	if n := len(emu.Calls("users.info")); n != 1 {
		t.Errorf("users.info called %d times for 3 checks, want 1", n)
	}
	// A failed lookup is not cached.
	failing := func(context.Context, string) (*slack.User, error) { return nil, context.DeadlineExceeded }
	if r, why := c.role(context.Background(), failing, nil, slackemu.TeamID, slackemu.UserBob, ""); r != roleNone || why != "lookup failed" {
		t.Errorf("failed lookup: role %v (%s), want none (lookup failed)", r, why)
	}
	if r, _ := c.role(context.Background(), lookup, nil, slackemu.TeamID, slackemu.UserBob, ""); r != roleMember {
		t.Errorf("after a failed lookup: role %v, want member", r)
	}
}

func TestAdminFormatting(t *testing.T) {
	if got := publicURL("https://h/mcp?token=abc#x"); strings.Contains(got, "abc") {
		t.Errorf("publicURL kept the query: %q", got)
	}
	tools := []servers.ToolInfo{
		{Name: "rm`rf", Exposed: "srv__rm_rf", Description: "Deletes <!channel> & more\nlines", Hints: agent.Hints{Destructive: true},
			Disabled: true, DisabledReason: "definition changed", Flags: []string{"instructions"}, InputSchema: json.RawMessage(`{"type":"object","description":"<@U1>"}`)},
	}
	got := formatTools(tools, 300, true)
	for _, want := range []string{"`rm'rf`", "srv__rm_rf", "destructive", "unverified server", "&lt;!channel&gt; &amp; more lines", "disabled (definition changed)", "flagged: instructions", "&lt;@U1&gt;"} {
		if !strings.Contains(got, want) {
			t.Errorf("formatTools lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "<!channel>") || strings.Contains(got, "<@U1>") {
		t.Errorf("formatTools left a live mention:\n%s", got)
	}
	if got := scrubSecrets("401 from server: bad key sk-12345", map[string]string{"X-Key": "sk-12345"}); strings.Contains(got, "sk-12345") {
		t.Errorf("scrubSecrets = %q", got)
	}
	audit := formatAudit([]session.AuditEntry{{Fields: map[string]string{"event": "tool_call", "user": "U1", "tool": "<!here>"}}})
	if !strings.Contains(audit, "<@U1>") || strings.Contains(audit, "<!here>") {
		t.Errorf("formatAudit = %q", audit)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		u    slack.User
		want role
	}{
		{"member", slack.User{TeamID: "T1"}, roleMember},
		{"no team id", slack.User{}, roleMember},
		{"admin", slack.User{TeamID: "T1", IsAdmin: true}, roleAdmin},
		{"enterprise admin", slack.User{TeamID: "T1", Enterprise: slack.EnterpriseUser{IsAdmin: true}}, roleAdmin},
		{"admin guest", slack.User{TeamID: "T1", IsAdmin: true, IsRestricted: true}, roleNone},
		{"admin of another team", slack.User{TeamID: "T2", IsAdmin: true}, roleNone},
		{"stranger admin", slack.User{TeamID: "T1", IsAdmin: true, IsStranger: true}, roleNone},
		{"deleted admin", slack.User{TeamID: "T1", IsAdmin: true, Deleted: true}, roleNone},
		{"bot", slack.User{TeamID: "T1", IsBot: true}, roleNone},
		{"workflow bot", slack.User{TeamID: "T1", IsWorkflowBot: true}, roleNone},
		{"app user", slack.User{TeamID: "T1", IsAppUser: true}, roleNone},
	}
	for _, tt := range tests {
		if got, why := classify(&tt.u, "T1"); got != tt.want {
			t.Errorf("%s: classify = %v (%s), want %v", tt.name, got, why, tt.want)
		}
	}
}
