package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// ranTurn waits for the replica that logged "bot: turn done" for thread
// and returns it.
func (rs *replicaSet) ranTurn(thread string) *replica {
	rs.t.Helper()
	var by *replica
	rs.waitFor("the turn of "+thread+" done", func() bool {
		for _, r := range rs.reps {
			for _, line := range strings.Split(r.logs.String(), "\n") {
				if strings.Contains(line, "bot: turn done") && strings.Contains(line, thread) {
					by = r
					return true
				}
			}
		}
		return false
	})
	return by
}

// TestToolPolicyReachesTheOtherReplica runs two replicas on one Redis and
// one Slack (a workspace of the test's own) with a trusted annotated MCP
// server: its read-only find asks in a channel; both replicas have served
// a turn; an admin's `/bobbin mcp policy crm find auto` lands on one of
// them, and the next turn the other replica runs in #general calls find
// without a prompt. Then `mcp policy crm find admin` (again on one
// replica): the next prompt, whichever replica posts it and whichever
// takes the click, refuses the asker's click and runs the tool on an
// admin's.
func TestToolPolicyReachesTheOtherReplica(t *testing.T) {
	crmURL, crmCalls := annotatedMCP(t)
	cfgPath := filepath.Join(t.TempDir(), "mcp.yaml")
	cfg := fmt.Sprintf("servers:\n  - name: crm\n    url: %s\n    trusted: true\n", crmURL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	rs := newReplicaSet(t, map[string]string{"MCP_CONFIG": cfgPath})
	rs.start(2)

	seq := 0
	// call mentions the bot in #general asking for crm__find and returns
	// the thread and the message the tool is to echo.
	call := func(tool string) (thread, msg string) {
		t.Helper()
		seq++
		msg = fmt.Sprintf("m%d", seq)
		return rs.mention(slackemu.UserAlice, fmt.Sprintf(`mark%d. call crm__%s {"message":"%s"}`, seq, tool, msg)), msg
	}
	prompted := func(thread string) bool {
		return strings.Contains(rs.threadText(thread), "bobbin_approval_head")
	}

	// Before any admin rule, find asks in a channel (and the asker's
	// Allow once runs it).
	th, msg := call("find")
	rs.allow(slackemu.UserAlice, th)
	rs.waitThread(th, "RESULT: find: "+msg)

	// Both replicas run a turn in #general (each has listed the tools
	// with the policies as they were).
	served := map[*replica]bool{}
	for len(served) < len(rs.reps) {
		if seq > 100 {
			t.Fatal("100 mentions and not every replica ran a turn")
		}
		seq++
		th := rs.mention(slackemu.UserAlice, fmt.Sprintf("mark%d. hello", seq))
		served[rs.ranTurn(th)] = true
	}

	rs.slash(slackemu.UserAdmin, "mcp policy crm find auto", "`find` is now auto")
	other := rs.other(`"event":"mcp_policy"`, `"team":"`+rs.team+`"`)
	for start := seq; ; {
		if seq-start > 100 {
			t.Fatal("100 mentions after the policy and none ran on the other replica")
		}
		th, msg := call("find")
		rs.waitFor("the answer or a prompt in "+th, func() bool {
			return prompted(th) || strings.Contains(rs.threadText(th), "RESULT: find: "+msg)
		})
		if prompted(th) {
			t.Fatalf("find with policy auto posted an approval prompt in %s:\n%s", th, rs.threadText(th))
		}
		if rs.ranTurn(th) == other {
			break
		}
	}

	// admin: set on one replica, the asker's click is refused and an
	// admin's runs the tool, whichever replica posts the prompt or takes
	// the clicks.
	rs.slash(slackemu.UserAdmin, "mcp policy crm find admin", "`find` is now admin")
	th, msg = call("find")
	ts := rs.buttonMessage(th, "bobbin_allow_once")
	if !strings.Contains(rs.threadText(th), "Only a workspace admin can decide") {
		t.Errorf("the admin prompt does not say who decides:\n%s", rs.threadText(th))
	}
	before, eph := crmCalls("find"), len(rs.emu.Ephemerals(slackemu.UserAlice))
	rs.click(slackemu.UserAlice, ts, "bobbin_allow_once")
	rs.ephemeral(slackemu.UserAlice, eph, "Only a workspace admin can approve this tool", "alice's click on an admin-only prompt")
	if n := crmCalls("find"); n != before {
		t.Errorf("find ran after the asker's click on an admin-only prompt")
	}
	rs.click(slackemu.UserAdmin, ts, "bobbin_allow_once")
	rs.waitThread(th, "RESULT: find: "+msg)
	if n := crmCalls("find"); n != before+1 {
		t.Errorf("find ran %d times after the admin's click, want %d", n-before, 1)
	}
}
