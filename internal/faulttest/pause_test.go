package faulttest

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// openStore opens the replicas' Redis the way they do (default prefix),
// to read transcripts.
func (c *cluster) openStore() *session.Store {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := session.Open(ctx, session.Options{URL: c.redis.url()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = s.Close() })
	return s
}

// transcripts counts, per thread, the assistant messages and how many of
// them are complete answers.
func (c *cluster) transcripts(s *session.Store, roots map[string]string) (assistant, complete map[string]int, err error) {
	assistant, complete = map[string]int{}, map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for id, root := range roots {
		_, msgs, err := s.Load(ctx, session.ThreadKey{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, ThreadTS: root})
		if err != nil {
			return nil, nil, err
		}
		for _, m := range msgs {
			if m.Role != provider.RoleAssistant {
				continue
			}
			assistant[id]++
			if strings.Contains(m.Content, "End of "+id+".") {
				complete[id]++
			}
		}
	}
	return assistant, complete, nil
}

// TestPausedLeaseHolder (R11): the replica streaming answers is frozen with
// SIGSTOP past its lease TTL; the other replica takes its turns over. When
// the frozen one continues (SIGCONT) it holds stale fencing tokens: none
// of its writes may be accepted (each transcript has exactly one,
// complete, assistant answer), and it must stop writing to Slack at once.
func TestPausedLeaseHolder(t *testing.T) {
	threads := pick(4, 12)
	c := newCluster(t, clusterOpts{words: 70, interval: 80 * time.Millisecond})
	rs := []*replica{c.start(), c.start()}
	roots := c.startThreads(0, threads)
	c.waitFor("every thread streaming", 60*time.Second, func() bool { return c.streaming(roots) })

	victim, active := busiest(rs)
	paused := time.Now()
	victim.p.signal(syscall.SIGSTOP)
	c.waitFor("the other replica answering every thread", 90*time.Second, func() bool { return c.answered(roots) })
	held := time.Since(paused)
	victim.p.signal(syscall.SIGCONT)
	// Give the woken replica time to try its stale writes.
	time.Sleep(leaseTTL)
	if victim.p.exited() {
		t.Fatalf("the paused replica exited after SIGCONT: %v", victim.p.err)
	}

	o := c.tally(roots, paused)
	store := c.openStore()
	assistant, complete, err := c.transcripts(store, roots)
	if err != nil {
		t.Fatal(err)
	}
	staleAccepted := 0
	for id := range roots {
		if assistant[id] != 1 || complete[id] != 1 {
			staleAccepted += max(assistant[id]-1, 0)
			t.Errorf("%s: transcript has %d assistant messages (%d complete), want exactly one complete", id, assistant[id], complete[id])
		}
	}
	lostLines := victim.logLines("lease lost")
	// The woken replica still serves new work.
	more := c.startThreads(1000, 2)
	c.waitFor("new threads answered after SIGCONT", 60*time.Second, func() bool { return c.answered(more) })

	report(t, "sigstop-lease-holder", "threads", threads, "victim_active_turns", active,
		"paused_for", held.Round(time.Millisecond), "lease_ttl", leaseTTL, "taken_over", o.interrupted,
		"stale_writes_accepted", staleAccepted, "stale_slack_edits", o.staleEdits,
		"victim_lease_lost_logs", lostLines, "lost", o.lost, "duplicate_final_replies", o.duplicates)
	if o.lost != 0 || o.duplicates != 0 {
		t.Errorf("lost=%d duplicates=%d; want 0 and 0", o.lost, o.duplicates)
	}
	if o.staleEdits > o.interrupted {
		t.Errorf("%d stale Slack edits for %d taken-over turns; want at most one each", o.staleEdits, o.interrupted)
	}
	if active > 0 && o.interrupted == 0 {
		t.Errorf("the paused replica ran %v turns but none was taken over", active)
	}
}
