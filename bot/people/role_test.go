package people

import (
	"context"
	"testing"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestMayDecide is the authorization matrix of approval buttons (and of
// admin commands) against users.info of the Slack emulator.
func TestMayDecide(t *testing.T) {
	emu := newEmu(t)
	const team = slackemu.TeamID
	const requester = slackemu.UserAlice

	tests := []struct {
		name     string
		user     string
		userTeam string
		admins   []string
		req      string
		wantRole Role
		wantOK   bool
	}{
		{"requester", slackemu.UserAlice, team, nil, requester, Member, true},
		{"other member", slackemu.UserBob, team, nil, requester, Member, false},
		{"admin via users.info", slackemu.UserAdmin, team, nil, requester, Admin, true},
		{"owner via users.info", slackemu.UserOwner, team, nil, requester, Admin, true},
		{"admin via BOT_ADMINS", slackemu.UserBob, team, []string{"UX", slackemu.UserBob}, requester, Admin, true},
		{"BOT_ADMINS from another team", slackemu.UserBob, slackemu.TeamID2, []string{slackemu.UserBob}, requester, None, false},
		{"guest", slackemu.UserGuest, team, nil, requester, None, false},
		{"guest who asked", slackemu.UserGuest, team, nil, slackemu.UserGuest, None, false},
		{"single-channel guest", slackemu.UserSingle, team, nil, requester, None, false},
		{"stranger", slackemu.UserStranger, "T999", nil, requester, None, false},
		{"stranger without payload team", slackemu.UserStranger, "", nil, requester, None, false},
		{"deleted", slackemu.UserDeleted, team, nil, requester, None, false},
		{"deleted who asked", slackemu.UserDeleted, team, nil, slackemu.UserDeleted, None, false},
		{"bot", slackemu.UserOtherBot, team, nil, requester, None, false},
		{"other workspace", slackemu.UserT2, slackemu.TeamID2, nil, requester, None, false},
		{"unknown user", "UNOBODY", team, nil, requester, None, false},
		{"empty user", "", team, nil, requester, None, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDir(emu, nil, tt.admins...)
			r, why := d.Role(context.Background(), team, tt.user, tt.userTeam)
			if r != tt.wantRole {
				t.Errorf("Role(%s) = %v (%s), want %v", tt.user, r, why, tt.wantRole)
			}
			ok, msg := d.MayDecide(context.Background(), team, tt.user, tt.userTeam, tt.req)
			if ok != tt.wantOK {
				t.Errorf("MayDecide(%s, requester %s) = %v (%q), want %v", tt.user, tt.req, ok, msg, tt.wantOK)
			}
			if !ok && msg == "" {
				t.Errorf("refusal without an explanation")
			}
		})
	}
}

// TestDecideRuleTexts: what a refused person reads, by reason.
func TestDecideRuleTexts(t *testing.T) {
	tests := []struct {
		r    Role
		why  Reason
		user string
		want string
	}{
		{None, Guest, "U1", "Only the person who asked, or a workspace admin, can stop this answer (guests can't). Nothing happened."},
		{None, OtherWorkspace, "U1", "Only the person who asked, or a workspace admin, can stop this answer (members of another workspace can't). Nothing happened."},
		{None, Deactivated, "U1", "Only the person who asked, or a workspace admin, can stop this answer (deactivated accounts can't). Nothing happened."},
		{None, LookupFailed, "U1", "I couldn't check your account just now, so nothing happened. Please try again in a moment."},
		{Member, NoReason, "U2", "Only the person who asked, or a workspace admin, can stop this answer. Nothing happened."},
		{Member, NoReason, "U1", ""},
		{Admin, NoReason, "U2", ""},
	}
	for _, tt := range tests {
		ok, got := decideRule(tt.r, tt.why, tt.user, "U1", "stop this answer")
		if got != tt.want || ok != (tt.want == "") {
			t.Errorf("decideRule(%v, %v, %s) = %v, %q, want %q", tt.r, tt.why, tt.user, ok, got, tt.want)
		}
	}
}

// TestRoleReusesLookups: one users.info per person within the TTL; a
// failed lookup is not cached.
func TestRoleReusesLookups(t *testing.T) {
	emu := newEmu(t)
	d := newDir(emu, nil)
	ctx := context.Background()
	for range 3 {
		if r, _ := d.Role(ctx, slackemu.TeamID, slackemu.UserAdmin, ""); r != Admin {
			t.Fatalf("Role = %v, want admin", r)
		}
	}
	if n := len(emu.Calls("users.info")); n != 1 {
		t.Errorf("users.info called %d times for 3 checks, want 1", n)
	}
	// A failed lookup is not cached.
	emu.InjectFault("users.info", slackemu.Fault{Error: "fatal_error"})
	if r, why := d.Role(ctx, slackemu.TeamID, slackemu.UserBob, ""); r != None || why != LookupFailed {
		t.Errorf("failed lookup: Role %v (%s), want none (lookup failed)", r, why)
	}
	if r, _ := d.Role(ctx, slackemu.TeamID, slackemu.UserBob, ""); r != Member {
		t.Errorf("after a failed lookup: Role %v, want member", r)
	}
}

// TestOneLookupServesAll: a person's name, role and scope facts come from
// one users.info.
func TestOneLookupServesAll(t *testing.T) {
	emu := newEmu(t)
	d := newDir(emu, nil)
	ctx := context.Background()
	if n := d.Name(ctx, slackemu.TeamID, slackemu.UserGuest); n == "" || n == slackemu.UserGuest {
		t.Errorf("Name = %q, want the guest's name", n)
	}
	if r, why := d.Role(ctx, slackemu.TeamID, slackemu.UserGuest, ""); r != None || why != Guest {
		t.Errorf("Role = %v (%s), want none (guest)", r, why)
	}
	if p := d.Person(ctx, slackemu.TeamID, slackemu.UserGuest, ""); !p.Guest || p.Unverified {
		t.Errorf("Person = %+v, want a verified guest", p)
	}
	// And the other way round: a role check names the person.
	if r, _ := d.Role(ctx, slackemu.TeamID, slackemu.UserAlice, ""); r != Member {
		t.Errorf("Role(alice) = %v, want member", r)
	}
	if n := d.Name(ctx, slackemu.TeamID, slackemu.UserAlice); n == "" || n == slackemu.UserAlice {
		t.Errorf("Name(alice) = %q", n)
	}
	if n := len(emu.Calls("users.info")); n != 2 {
		t.Errorf("users.info called %d times for two people, want 2", n)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		u    slack.User
		want Role
	}{
		{"member", slack.User{TeamID: "T1"}, Member},
		{"no team id", slack.User{}, Member},
		{"admin", slack.User{TeamID: "T1", IsAdmin: true}, Admin},
		{"enterprise admin", slack.User{TeamID: "T1", Enterprise: slack.EnterpriseUser{IsAdmin: true}}, Admin},
		{"admin guest", slack.User{TeamID: "T1", IsAdmin: true, IsRestricted: true}, None},
		{"admin of another team", slack.User{TeamID: "T2", IsAdmin: true}, None},
		{"stranger admin", slack.User{TeamID: "T1", IsAdmin: true, IsStranger: true}, None},
		{"deleted admin", slack.User{TeamID: "T1", IsAdmin: true, Deleted: true}, None},
		{"bot", slack.User{TeamID: "T1", IsBot: true}, None},
		{"workflow bot", slack.User{TeamID: "T1", IsWorkflowBot: true}, None},
		{"app user", slack.User{TeamID: "T1", IsAppUser: true}, None},
	}
	for _, tt := range tests {
		if got, why := classify(&tt.u, "T1"); got != tt.want {
			t.Errorf("%s: classify = %v (%s), want %v", tt.name, got, why, tt.want)
		}
	}
}
