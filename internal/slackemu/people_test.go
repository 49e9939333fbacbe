package slackemu_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

func TestUsergroupsUsersList(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)
	oncall := emu.AddUsergroup(slackemu.Usergroup{Team: slackemu.TeamID, Handle: "oncall", Name: "On-call", Users: []string{slackemu.UserAlice, slackemu.UserBob}})
	old := emu.AddUsergroup(slackemu.Usergroup{Team: slackemu.TeamID, Handle: "old", Users: []string{slackemu.UserAdmin}, Disabled: true})
	other := emu.AddUsergroup(slackemu.Usergroup{Team: slackemu.TeamID2, Handle: "x", Users: []string{slackemu.UserT2}})

	users, err := api.GetUserGroupMembers(oncall)
	if err != nil || !slices.Equal(users, []string{slackemu.UserAlice, slackemu.UserBob}) {
		t.Fatalf("members = %v, %v", users, err)
	}
	if err := emu.SetUsergroupMembers(oncall, slackemu.UserBob); err != nil {
		t.Fatal(err)
	}
	if users, _ := api.GetUserGroupMembers(oncall); !slices.Equal(users, []string{slackemu.UserBob}) {
		t.Errorf("after the change: %v", users)
	}
	for _, tc := range []struct {
		name, group string
		opts        []slack.GetUserGroupMembersOption
		want        string
	}{
		{"unknown", "SNOPE", nil, "no_such_subteam"},
		{"other workspace's group", other, nil, "no_such_subteam"},
		{"disabled", old, nil, "no_such_subteam"},
		{"disabled, include_disabled", old, []slack.GetUserGroupMembersOption{slack.GetUserGroupMembersOptionIncludeDisabled(true)}, ""},
	} {
		_, err := api.GetUserGroupMembers(tc.group, tc.opts...)
		if got := errString(err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	emu.SetFreePlan(slackemu.TeamID, true)
	if _, err := api.GetUserGroupMembers(oncall); errString(err) != "plan_upgrade_required" {
		t.Errorf("free plan: %v", err)
	}
	emu.SetFreePlan(slackemu.TeamID, false)
	if gs := emu.Usergroups(slackemu.TeamID); len(gs) != 2 {
		t.Errorf("Usergroups = %+v", gs)
	}
	// Tier 2: bursts past ten are limited.
	var limited bool
	for range 12 {
		_, err := api.GetUserGroupMembers(oncall)
		var rl *slack.RateLimitedError
		if errors.As(err, &rl) {
			limited = true
		}
	}
	if !limited {
		t.Error("usergroups.users.list never rate limited")
	}
}

func TestPeopleAcrossWorkspaces(t *testing.T) {
	teams := slackemu.DefaultTeams()
	teams[0].EnterpriseID, teams[0].EnterpriseName = "E1", "Acme Corp"
	teams[0].Users = append(teams[0].Users, slackemu.User{ID: "WGRID", Name: "gwen", RealName: "Gwen Grid", EnterpriseID: "E1"})
	emu := newEmu(t, slackemu.Options{Teams: teams})
	api := botClient(emu)
	u, err := api.GetUserInfo("WGRID")
	if err != nil || u.Enterprise.EnterpriseID != "E1" || u.Enterprise.ID != "WGRID" || u.Enterprise.EnterpriseName != "Acme Corp" {
		t.Errorf("enterprise user = %+v, %v", u.Enterprise, err)
	}
	if u, err := api.GetUserInfo(slackemu.UserStranger); err != nil || !u.IsStranger || u.TeamID != "T999" {
		t.Errorf("stranger = %+v, %v", u, err)
	}
	// A user of an unrelated workspace is not visible.
	if _, err := api.GetUserInfo(slackemu.UserT2); errString(err) != "user_not_found" {
		t.Errorf("users.info across workspaces: %v", err)
	}
	if ch, err := api.GetConversationInfo(&slack.GetConversationInfoInput{ChannelID: slackemu.ChannelT2}); err == nil {
		t.Errorf("conversations.info across workspaces: %+v", ch)
	}
}

func TestGuestsAndExternalUsersInEvents(t *testing.T) {
	emu := newEmu(t, fastOpts())
	c := startSocket(t, emu, true)
	c.next(t, socketmode.EventTypeHello)
	emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserGuest, "can I use tools?", "")
	ev := c.next(t, socketmode.EventTypeEventsAPI).Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AppMentionEvent)
	if ev.UserTeam != slackemu.TeamID || ev.SourceTeam != slackemu.TeamID {
		t.Errorf("guest event teams %q %q", ev.UserTeam, ev.SourceTeam)
	}
	u, err := botClient(emu).GetUserInfo(ev.User)
	if err != nil || !u.IsRestricted || u.IsUltraRestricted {
		t.Errorf("guest users.info = %+v, %v", u, err)
	}
	if _, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserStranger, Text: "hi", SourceTeam: "T998"}); err != nil {
		t.Fatal(err)
	}
	msg := c.next(t, socketmode.EventTypeEventsAPI).Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
	if msg.UserTeam != "T999" || msg.SourceTeam != "T998" {
		t.Errorf("external message event teams %q %q", msg.UserTeam, msg.SourceTeam)
	}
}
