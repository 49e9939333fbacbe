package faulttest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestDuplicationStorm (R1): messages over many threads, two replicas,
// with every duplicate shape Slack produces: the same envelope again
// (30 %), the same message under a new event_id (10 %), lost acks (20 %:
// Slack redelivers with retry_attempt ≥ 1), and app_mention + message for
// every mention. Each thread gets its messages one at a time (a message
// that arrives mid-turn would be batched into the next turn). Wants: one
// turn per message, one complete answer per message, nothing lost.
func TestDuplicationStorm(t *testing.T) {
	threads := pick(20, 100)
	perThread := pick(10, 10)
	c := newCluster(t, clusterOpts{
		emu: slackemu.Options{
			AckDropRate: 0.2,
			RetryDelays: []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second},
			Seed:        1,
		},
	})
	c.start()
	c.start()
	rng := rand.New(rand.NewPCG(7, 11))

	roots := make([]string, threads)
	var envelopes []string
	var redelivered, resent, late int
	start := time.Now()
	n := 0
	for round := range perThread {
		ids := make([]string, threads)
		for i := range threads {
			n++
			ids[i] = fmt.Sprintf("msg-%d", n)
			text := "please answer " + ids[i]
			p := c.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, text, roots[i])
			if round == 0 {
				roots[i] = p.TS
			}
			envelopes = append(envelopes, p.Envelope)
			if rng.Float64() < 0.3 {
				if err := c.emu.Redeliver(p.Envelope); err == nil {
					redelivered++
				}
			}
			if rng.Float64() < 0.1 {
				if _, _, err := c.emu.Resend(p.Envelope); err == nil {
					resent++
				}
			}
		}
		c.waitFor(fmt.Sprintf("round %d answered", round+1), 90*time.Second, func() bool {
			all := c.threads(slackemu.ChannelGen)
			for i := range threads {
				st := all[roots[i]]
				if st.complete[ids[i]] == 0 || st.live > 0 {
					return false
				}
			}
			return true
		})
	}
	elapsed := time.Since(start)
	// Duplicates long after the answer: the same envelopes again and the
	// same messages under new event ids.
	for _, e := range envelopes {
		switch r := rng.Float64(); {
		case r < 0.1:
			if c.emu.Redeliver(e) == nil {
				late++
			}
		case r < 0.2:
			if _, _, err := c.emu.Resend(e); err == nil {
				late++
			}
		}
	}
	// Late redeliveries (retries of dropped acks) must change nothing.
	c.waitFor("every envelope acked or given up", 30*time.Second, c.settled)
	time.Sleep(2 * time.Second)

	calls := c.llmCalls()
	var lost, dupReplies, dupTurns, turns int
	all := c.threads(slackemu.ChannelGen)
	for i := range threads {
		st := all[roots[i]]
		for r := range perThread {
			id := fmt.Sprintf("msg-%d", r*threads+i+1)
			switch st.complete[id] {
			case 0:
				lost++
			case 1:
			default:
				dupReplies += st.complete[id] - 1
			}
		}
	}
	for id, k := range calls {
		turns += k
		if k > 1 {
			dupTurns += k - 1
			t.Errorf("message %s ran %d turns", id, k)
		}
	}
	stats := c.emu.AckStats()
	report(t, "duplication-storm", "messages", n, "threads", threads, "replicas", 2,
		"redelivered_same_envelope", redelivered, "resent_new_event_id", resent, "late_duplicates", late,
		"timeout_redeliveries", stats.Redeliveries, "envelopes", stats.Envelopes,
		"turns", turns, "duplicate_turns", dupTurns, "duplicate_replies", dupReplies, "lost", lost,
		"elapsed", elapsed.Round(time.Millisecond))
	if turns != n || lost != 0 || dupReplies != 0 {
		t.Errorf("turns=%d (want %d), lost=%d, duplicate replies=%d; want exactly one answer per message", turns, n, lost, dupReplies)
	}
}
