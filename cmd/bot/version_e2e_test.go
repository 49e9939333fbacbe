package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestChangesReachEveryReplicaAtTheNextTurn runs two replicas on one
// emulated Slack and one Redis. Both have served a turn (so each has the
// workspace's registrations cached, and the 10 s re-read is not due); then
// an admin adds a server, re-scopes it and removes it, and right after each
// change mentions land on both replicas (Slack spreads them at random)
// until each replica has served one: every one of those turns sees the
// change, because the workspace's version moved.
func TestChangesReachEveryReplicaAtTheNextTurn(t *testing.T) {
	url, _ := countingMCP(t)
	rs := newReplicaSet(t, nil)
	rs.start(2)
	admin, alice := slackemu.UserAdmin, slackemu.UserAlice

	seq := 0
	// turnsOnBoth mentions the bot until each replica has run a turn and
	// returns, per replica, the tools its first turn was offered.
	turnsOnBoth := func(what string) map[*replica][]string {
		t.Helper()
		got := map[*replica][]string{}
		for len(got) < len(rs.reps) {
			seq++
			if seq > 200 {
				t.Fatalf("%s: 200 mentions and not every replica ran a turn", what)
			}
			marker := fmt.Sprintf("v%d", seq)
			ts := rs.mention(alice, marker+" hello")
			var tools []string
			rs.waitFor("the model request of "+marker, func() bool {
				for _, r := range rs.llm.Requests() {
					if strings.Contains(r.LastUserText(), marker+" ") {
						tools = r.Tools
						return true
					}
				}
				return false
			})
			by := rs.ranTurn(ts)
			if _, ok := got[by]; !ok {
				got[by] = tools
			}
		}
		return got
	}
	offers := func(tools []string) bool {
		return slices.ContainsFunc(tools, func(n string) bool { return strings.HasPrefix(n, "fresh__") })
	}
	check := func(what string, want bool) {
		t.Helper()
		start := time.Now()
		for r, tools := range turnsOnBoth(what) {
			if offers(tools) != want {
				t.Errorf("%s: the turn on replica %s was offered %v; want fresh__echo offered: %t", what, r.addr, tools, want)
			}
		}
		if d := time.Since(start); d > 8*time.Second {
			t.Logf("%s: the checks took %v, near the 10 s re-read: they prove less than they should", what, d)
		}
	}

	check("before any change", false)
	rs.slash(admin, "mcp add fresh "+url, "Registered")
	check("after mcp add", true)
	rs.slash(admin, "mcp scope fresh C0ELSEWHERE", "Scope of")
	check("after mcp scope to another channel", false)
	rs.slash(admin, "mcp scope fresh clear", "Lifted the scope")
	check("after the scope was lifted", true)
	rs.slash(admin, "mcp remove fresh", "Removed")
	check("after mcp remove", false)
}
