package bot

import (
	"context"
	"testing"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/internal/slackemu"
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
			ok, msg := decideRule(r, why, tt.user, tt.req)
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
