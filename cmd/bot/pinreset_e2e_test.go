package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestRedefinedToolAsksAgainInEveryThread runs two replicas on one Redis
// and one Slack (a workspace of the test's own) with an untrusted MCP
// server whose echo asks: Always allow is given in two threads, and a
// later call there runs without a prompt. Then echo's definition changes
// and an admin approves it (on one replica): the next call in each of
// those threads asks again, whichever replica runs it (both do, in the
// first thread). Always allow given after the change holds again.
func TestRedefinedToolAsksAgainInEveryThread(t *testing.T) {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "loop", Version: "1.0.0"}, nil)
	addEcho(srv, "Echoes a message back")
	hs := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv },
		&mcpsdk.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true}))
	t.Cleanup(hs.Close)
	cfgPath := filepath.Join(t.TempDir(), "mcp.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, "servers:\n  - name: loop\n    url: %s/mcp\n", hs.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	rs := newReplicaSet(t, map[string]string{"MCP_CONFIG": cfgPath})
	rs.start(2)

	seq := 0
	// call asks for loop__echo in thread ("": a new thread) and waits for
	// its answer, clicking action on the approval prompt if one comes; it
	// returns the thread, whether a prompt came, and the replica that ran
	// the turn.
	call := func(thread, action string) (string, bool, *replica) {
		t.Helper()
		seq++
		msg := fmt.Sprintf("m%d", seq)
		text := fmt.Sprintf(`mark%d. call loop__echo {"message":"%s"}`, seq, msg)
		prompts := strings.Count(rs.threadText(thread), "bobbin_approval_head")
		turns := map[*replica]int{}
		for _, r := range rs.reps {
			turns[r] = turnsDone(r, thread)
		}
		if thread == "" {
			thread = rs.mention(slackemu.UserAlice, text)
			prompts = 0
		} else {
			rs.emu.Mention(rs.team, slackemu.ChannelGen, slackemu.UserAlice, text, thread)
		}
		asked := false
		rs.waitFor("the answer or a prompt for "+msg, func() bool {
			s := rs.threadText(thread)
			asked = strings.Count(s, "bobbin_approval_head") > prompts
			return asked || strings.Contains(s, "RESULT: echo: "+msg)
		})
		if asked {
			rs.click(slackemu.UserAlice, rs.buttonMessage(thread, action), action)
		}
		rs.waitThread(thread, "RESULT: echo: "+msg)
		var by *replica
		rs.waitFor("the turn of "+msg+" done", func() bool {
			for _, r := range rs.reps {
				if turnsDone(r, thread) > turns[r] {
					by = r
					return true
				}
			}
			return false
		})
		return thread, asked, by
	}

	// Always allow in two threads: a later call there runs unasked.
	a, asked, _ := call("", "bobbin_allow_thread")
	b, askedB, _ := call("", "bobbin_allow_thread")
	if !asked || !askedB {
		t.Fatalf("the first calls of an untrusted server's tool ran without a prompt (%v, %v)", asked, askedB)
	}
	for _, th := range []string{a, b} {
		if _, asked, _ := call(th, "bobbin_allow_once"); asked {
			t.Errorf("thread %s asked again though Always allow was given there", th)
		}
	}

	// A new definition, approved by an admin on one replica.
	addEcho(srv, "Echoes a message back, in a new way")
	rs.slash(slackemu.UserAdmin, "mcp approve loop", "Approved the current definitions")

	// Every thread asks again, on every replica.
	if _, asked, _ := call(b, "bobbin_allow_thread"); !asked {
		t.Errorf("thread %s ran the redefined tool under the permission given for its old definition", b)
	}
	ran := map[*replica]bool{}
	for i := 0; len(ran) < len(rs.reps); i++ {
		if i == 30 {
			t.Fatalf("30 calls in thread %s and not every replica ran one", a)
		}
		_, asked, by := call(a, "bobbin_allow_once")
		if !asked {
			t.Fatalf("thread %s ran the redefined tool under the permission given for its old definition (replica %s)", a, by.addr)
		}
		ran[by] = true
	}
	// Always allow given for the new definition holds.
	if _, asked, _ := call(b, "bobbin_allow_once"); asked {
		t.Errorf("thread %s asked again after Always allow for the new definition", b)
	}
}

// turnsDone counts the turns r finished in thread.
func turnsDone(r *replica, thread string) int {
	if thread == "" {
		return 0
	}
	n := 0
	for _, line := range strings.Split(r.logs.String(), "\n") {
		if strings.Contains(line, "bot: turn done") && strings.Contains(line, thread) {
			n++
		}
	}
	return n
}
