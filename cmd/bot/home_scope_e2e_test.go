package main

import (
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/internal/oauthtest"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestAppHomeFollowsScopes: a per-user OAuth server scoped to Alice is
// offered for connecting in Alice's App Home, not in Bob's (his Home lists
// it as not for him).
func TestAppHomeFollowsScopes(t *testing.T) {
	pu := oauthtest.New(t, oauthtest.Options{})
	rs := newReplicaSet(t, map[string]string{"PUBLIC_URL": "https://bobbin.test"})
	rs.start(1)
	admin, alice, bob := slackemu.UserAdmin, slackemu.UserAlice, slackemu.UserBob
	rs.slash(admin, "mcp add me "+pu.URL+" --per-user", "bobbin_connect_link")
	rs.slash(admin, "mcp scope me "+alice, "Scope of")

	home := func(user string) string {
		t.Helper()
		before, _ := rs.emu.HomeView(rs.team, user)
		rs.emu.OpenHome(rs.team, user, "home")
		var got string
		rs.waitFor(user+"'s Home", func() bool {
			v, ok := rs.emu.HomeView(rs.team, user)
			got = string(v.Blocks)
			return ok && got != string(before.Blocks) && strings.Contains(got, "`me`")
		})
		return got
	}
	if h := home(bob); strings.Contains(h, "bobbin_home_connect:me") || !strings.Contains(h, "not for you") {
		t.Errorf("Bob's Home (out of the server's scope) offers Connect or does not say it is not for him:\n%s", h)
	}
	if h := home(alice); !strings.Contains(h, "bobbin_home_connect:me") || strings.Contains(h, "not for you") {
		t.Errorf("Alice's Home (in scope) does not offer Connect:\n%s", h)
	}
}
