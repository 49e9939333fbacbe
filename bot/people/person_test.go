package people

import (
	"context"
	"testing"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestPersonFacts: who counts as a guest or as of another organization.
func TestPersonFacts(t *testing.T) {
	cases := []struct {
		name     string
		u        slack.User
		userTeam string
		want     access.Person
	}{
		{"member", slack.User{ID: "U1", TeamID: "T1"}, "", access.Person{ID: "U1"}},
		{"member, user_team this workspace", slack.User{ID: "U1", TeamID: "T1"}, "T1", access.Person{ID: "U1"}},
		{"multi-channel guest", slack.User{ID: "U1", TeamID: "T1", IsRestricted: true}, "", access.Person{ID: "U1", Guest: true}},
		{"single-channel guest", slack.User{ID: "U1", TeamID: "T1", IsRestricted: true, IsUltraRestricted: true}, "", access.Person{ID: "U1", Guest: true}},
		{"stranger", slack.User{ID: "U1", TeamID: "T9", IsStranger: true}, "", access.Person{ID: "U1", External: true}},
		{"another workspace's team id", slack.User{ID: "U1", TeamID: "T9"}, "", access.Person{ID: "U1", External: true}},
		{"user_team of another workspace", slack.User{ID: "U1", TeamID: "T1"}, "T9", access.Person{ID: "U1", External: true}},
		{"Grid member homed in a sibling workspace", slack.User{ID: "W1", TeamID: "T2", Enterprise: slack.EnterpriseUser{ID: "W1", EnterpriseID: "E1", Teams: []string{"T1", "T2"}}}, "T2", access.Person{ID: "W1"}},
		{"Grid member of other workspaces only", slack.User{ID: "W1", TeamID: "T2", Enterprise: slack.EnterpriseUser{ID: "W1", EnterpriseID: "E1", Teams: []string{"T2"}}}, "", access.Person{ID: "W1", External: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := factsOf(&tc.u, "T1").person(tc.u.ID, tc.userTeam, "T1"); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestPersonUnverified: a person users.info cannot describe is
// Unverified, and asked about again next time.
func TestPersonUnverified(t *testing.T) {
	emu := newEmu(t)
	d := newDir(emu, nil)
	ctx := context.Background()
	for range 2 {
		if got := d.Person(ctx, slackemu.TeamID, "UNOBODY", ""); got != (access.Person{ID: "UNOBODY", Unverified: true}) {
			t.Errorf("Person(unknown) = %+v", got)
		}
	}
	if n := len(emu.Calls("users.info")); n != 2 {
		t.Errorf("users.info called %d times, want 2 (failures are not cached)", n)
	}
	if got := d.Person(ctx, slackemu.TeamID, slackemu.UserStranger, ""); !got.External || got.Unverified {
		t.Errorf("Person(stranger) = %+v, want external", got)
	}
}
