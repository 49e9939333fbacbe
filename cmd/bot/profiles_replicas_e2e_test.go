package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestProfileBindingReachesTheOtherReplica runs two replicas on one Redis
// and one Slack (a workspace of the test's own): both have served a turn
// in #general with no profile, then an admin's `/bobbin profile use`
// lands on one of them, and the next turn the other replica runs in that
// channel carries the profile's system prompt and model in its model
// request (no replica keeps a stale binding).
func TestProfileBindingReachesTheOtherReplica(t *testing.T) {
	path := filepath.Join(t.TempDir(), "profiles.yaml")
	if err := os.WriteFile(path, []byte(`
profiles:
  - name: support
    system_prompt: "SUPPORT-PERSONA-R2: help customers."
    model: support-model
`), 0o600); err != nil {
		t.Fatal(err)
	}
	rs := newReplicaSet(t, map[string]string{"PROFILES_CONFIG": path})
	rs.start(2)
	system := func(r llmemu.Recorded) string {
		if len(r.Messages) > 0 && r.Messages[0].Role == "system" {
			return r.Messages[0].Text
		}
		return ""
	}

	// turn mentions the bot in #general and returns the replica that ran
	// the turn and its model request.
	seq := 0
	turn := func() (*replica, llmemu.Recorded) {
		t.Helper()
		seq++
		marker := fmt.Sprintf("mark%d.", seq)
		ts := rs.mention(slackemu.UserAlice, marker+" hello")
		var req llmemu.Recorded
		rs.waitFor("the model request of "+marker, func() bool {
			for _, r := range rs.llm.Requests() {
				if strings.Contains(r.LastUserText(), marker) {
					req = r
					return true
				}
			}
			return false
		})
		by := rs.ranTurn(ts)
		return by, req
	}

	// Both replicas answer in #general without a profile (whatever they
	// cache of the channel's binding, they have it now).
	served := map[*replica]bool{}
	for len(served) < len(rs.reps) {
		if seq > 100 {
			t.Fatal("100 mentions and not every replica ran a turn")
		}
		by, req := turn()
		served[by] = true
		if req.Model != "gpt-4o" || strings.Contains(system(req), "SUPPORT-PERSONA") {
			t.Fatalf("turn before the binding: model %q system %q", req.Model, system(req))
		}
	}

	rs.slash(slackemu.UserAdmin, "profile use support", "now uses the profile `support`")
	// The replica that did not handle the command.
	other := rs.other(`"event":"profile_use"`, `"team":"`+rs.team+`"`)

	for start := seq; ; {
		if seq-start > 100 {
			t.Fatal("100 mentions after the binding and none ran on the other replica")
		}
		by, req := turn()
		if req.Model != "support-model" || !strings.Contains(system(req), "SUPPORT-PERSONA-R2") || !strings.Contains(system(req), "You are Bobbin") {
			t.Fatalf("turn after the binding: model %q system %q", req.Model, system(req))
		}
		if by == other {
			break
		}
	}
}
