package faulttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestRedisRestartWithAOF (R8a): Redis (AOF, appendfsync everysec) is
// restarted while answers stream. Sessions written before must be intact
// (a follow-up in each thread is answered with its history), and the
// turns running across the restart end with exactly one complete answer.
func TestRedisRestartWithAOF(t *testing.T) {
	sessions := pick(20, 100)
	inflight := pick(4, 12)
	c := newCluster(t, clusterOpts{words: 50, interval: 60 * time.Millisecond})
	c.start()
	c.start()
	c.llm.SetTokenInterval(0)
	first := c.startThreads(0, sessions)
	c.waitFor("first answers", 90*time.Second, func() bool { return c.answered(first) })

	c.llm.SetTokenInterval(60 * time.Millisecond)
	running := c.startThreads(sessions, inflight)
	c.waitFor("streams running", 60*time.Second, func() bool { return c.streaming(running) })
	restarted := time.Now()
	c.redis.stop()
	time.Sleep(time.Second)
	c.redis.start()
	down := time.Since(restarted)
	c.waitFor("turns across the restart answered", 90*time.Second, func() bool { return c.answered(running) })

	// Every earlier session is still there: a follow-up sees its history.
	c.llm.SetTokenInterval(0)
	follow := map[string]string{}
	i := 0
	for id, root := range first {
		i++
		fid := fmt.Sprintf("msg-%d", 5000+i)
		c.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "and now "+fid, root)
		follow[fid] = root
		_ = id
	}
	c.waitFor("follow-ups answered", 90*time.Second, func() bool { return c.answered(follow) })
	withHistory := 0
	for _, r := range c.llm.Requests() {
		id := msgID(r.LastUserText())
		if _, ok := follow[id]; !ok {
			continue
		}
		users := 0
		for _, m := range r.Messages {
			if m.Role == "user" {
				users++
			}
		}
		if users >= 2 {
			withHistory++
		}
	}
	o := c.tally(running, restarted)
	report(t, "redis-restart-aof", "sessions", sessions, "sessions_intact", withHistory,
		"inflight_turns", inflight, "redis_down", down.Round(time.Millisecond),
		"resumed", o.interrupted, "lost", o.lost, "duplicate_final_replies", o.duplicates)
	if withHistory != sessions {
		t.Errorf("%d of %d sessions kept their history across the Redis restart", withHistory, sessions)
	}
	if o.lost != 0 || o.duplicates != 0 {
		t.Errorf("turns across the restart: lost=%d duplicates=%d; want 0 and 0", o.lost, o.duplicates)
	}
}

// TestRedisDown (R9): Redis is unreachable for a while (default 10 s, full
// 30 s). Events that arrive meanwhile must not be acked (Slack redelivers
// them); after Redis is back every one is answered exactly once; the
// replicas neither crash nor pile up goroutines.
func TestRedisDown(t *testing.T) {
	outage := pick(10*time.Second, 30*time.Second)
	events := pick(10, 30)
	c := newCluster(t, clusterOpts{emu: slackemu.Options{
		// Slack retries at once, then about a minute and five minutes
		// later; scaled to the outage here.
		RetryDelays: []time.Duration{0, outage, 2 * outage},
	}})
	rs := []*replica{c.start(), c.start()}
	warm := c.startThreads(0, 3)
	c.waitFor("warm-up answers", 60*time.Second, func() bool { return c.answered(warm) })
	goBefore, rssBefore := 0.0, 0.0
	for _, r := range rs {
		goBefore += r.metric("go_goroutines")
		rssBefore += r.metric("process_resident_memory_bytes")
	}

	// One answer is streaming when Redis goes away: it must fail safe
	// and be finished once after recovery.
	c.llm.SetResponder(func(req llmemu.Recorded) llmemu.Reply {
		id := msgID(req.LastUserText())
		if id == "msg-900" {
			return llmemu.Reply{Text: answer(id, 120)}
		}
		return llmemu.Reply{Text: answer(id, 8)}
	})
	c.llm.SetTokenInterval(50 * time.Millisecond)
	inflight := c.startThreads(899, 1)
	c.waitFor("the in-flight answer streaming", 30*time.Second, func() bool { return c.streaming(inflight) })

	downAt := time.Now()
	c.redis.stop()
	during := c.startThreads(100, events)
	ackedDuring := 0
	poll(time.Until(downAt.Add(outage)), func() bool {
		ackedDuring = 0
		for _, e := range c.emu.Envelopes() {
			// Only the mentions need Redis: the companion top-level
			// "message" events are ignored (and acked) without it.
			if e.Created.After(downAt) && e.EventType == "app_mention" && e.Acked {
				ackedDuring++
			}
		}
		return ackedDuring > 0 // an ack while down fails the test below
	})
	time.Sleep(time.Until(downAt.Add(outage)))
	upAt := time.Now()
	c.redis.start()
	c.waitFor("events from the outage answered", 3*outage+60*time.Second, func() bool { return c.answered(during) })
	c.waitFor("the in-flight answer finished", 60*time.Second, func() bool { return c.answered(inflight) })
	fo := c.tally(inflight, downAt)
	recovered := time.Since(upAt)
	time.Sleep(2 * time.Second)

	calls := c.llmCalls()
	dupTurns, lost, dups := 0, 0, 0
	for id := range during {
		if calls[id] > 1 {
			dupTurns += calls[id] - 1
		}
	}
	o := c.tally(during, upAt)
	lost, dups = o.lost, o.duplicates
	redeliveries := 0
	for _, e := range c.emu.Envelopes() {
		if e.Created.After(downAt) {
			redeliveries += len(e.Deliveries) - 1
		}
	}
	goAfter, rssAfter, crashed := 0.0, 0.0, 0
	for _, r := range rs {
		goAfter += r.metric("go_goroutines")
		rssAfter += r.metric("process_resident_memory_bytes")
		if r.p.exited() {
			crashed++
		}
	}
	report(t, "redis-down", "outage", outage, "events_during", events, "acked_while_down", ackedDuring,
		"redeliveries", redeliveries, "answered_after", events-lost, "recovered_in", recovered.Round(time.Millisecond),
		"duplicate_turns", dupTurns, "duplicate_replies", dups, "lost", lost, "crashed", crashed,
		"goroutines_before", goBefore, "goroutines_after", goAfter,
		"rss_mib_before", int(rssBefore/(1<<20)), "rss_mib_after", int(rssAfter/(1<<20)),
		"inflight_turn_resumed", fo.interrupted, "inflight_lost", fo.lost, "inflight_duplicates", fo.duplicates)
	if fo.lost != 0 || fo.duplicates != 0 {
		t.Errorf("the answer streaming when Redis went down: lost=%d duplicates=%d; want one complete answer", fo.lost, fo.duplicates)
	}
	if ackedDuring != 0 {
		t.Errorf("%d events were acked while Redis was down; want none (Slack must redeliver them)", ackedDuring)
	}
	if lost != 0 || dups != 0 || dupTurns != 0 {
		t.Errorf("after the outage: lost=%d duplicate replies=%d duplicate turns=%d; want exactly once", lost, dups, dupTurns)
	}
	if crashed != 0 {
		t.Errorf("%d replicas exited during the outage", crashed)
	}
	// Goroutines: a leak per failed call would show as hundreds.
	if goBefore > 0 && goAfter > 2*goBefore+100 {
		t.Errorf("goroutines grew from %v to %v across the outage", goBefore, goAfter)
	}
}
