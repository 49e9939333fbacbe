package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/bobbinbot/bobbin/provider"
)

func TestAdmit(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	tests := []struct {
		name                 string
		eventID, channel, ts string
		want                 bool
	}{
		{"first copy", "Ev1", "C1", "1.1", true},
		{"same envelope again", "Ev1", "C1", "1.1", false},
		{"same message under a new event id", "Ev2", "C1", "1.1", false},
		{"the new event id is now known too", "Ev2", "", "", false},
		{"mention and message event of one message", "Ev3", "C1", "1.1", false},
		{"another message", "Ev4", "C1", "1.2", true},
		{"event without a message identity", "Ev5", "", "", true},
		{"message identity only", "", "C2", "1.1", true},
		{"nothing to dedupe on", "", "", "", true},
	}
	for _, tc := range tests {
		got, err := s.Admit(ctx, team, tc.eventID, tc.channel, tc.ts)
		if err != nil || got != tc.want {
			t.Errorf("%s: Admit(%q, %q, %q) = %v, %v; want %v", tc.name, tc.eventID, tc.channel, tc.ts, got, err, tc.want)
		}
	}
	// Another workspace with the same ids is independent.
	if got, err := s.Admit(ctx, "TOTHER"+randomID(), "Ev1", "C1", "1.1"); err != nil || !got {
		t.Errorf("other workspace: %v, %v; want first", got, err)
	}
	// Forget lets Slack's retry through.
	if err := s.Forget(ctx, team, "Ev4", "C1", "1.2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Admit(ctx, team, "Ev4", "C1", "1.2"); !got {
		t.Error("Admit after Forget: want first")
	}
	ttl := s.rdb.PTTL(ctx, s.k.dedupeEvent(team, "Ev1")).Val()
	if ttl < 23*time.Hour {
		t.Errorf("dedupe TTL = %v, want ≥ 24 h", ttl)
	}
	if _, err := s.Admit(ctx, team, "Ev{1}", "", ""); err == nil {
		t.Error("Admit with braces in the event id: want an error")
	}
	if _, err := s.Admit(ctx, team, "", "C1", ""); err == nil {
		t.Error("Admit with a channel and no ts: want an error")
	}
}

func TestAdmitConcurrentFirstWriterWins(t *testing.T) {
	a := newStore(t, Options{})
	b := peer(t, a, Options{})
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	var firsts atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		st := []*Store{a, b}[i%2]
		wg.Go(func() {
			// Half arrive as the same event, half as a re-sent message.
			ev := "EvX"
			if i%2 == 1 {
				ev = fmt.Sprintf("EvY%d", i)
			}
			ok, err := st.Admit(ctx, team, ev, "C1", "9.9")
			if err != nil {
				t.Error(err)
			}
			if ok {
				firsts.Add(1)
			}
		})
	}
	wg.Wait()
	if n := firsts.Load(); n != 1 {
		t.Errorf("%d copies admitted, want 1", n)
	}
}

func TestRateBudgetConcurrentTakers(t *testing.T) {
	s := newStore(t, Options{})
	peers := []*Store{s, peer(t, s, Options{}), peer(t, s, Options{})}
	ctx := ctxT(t)
	const perMinute, burst = 60, 10 // one token a second after the burst
	bucket := "T" + strings.ToUpper(randomID()) + ":chat.update"
	var admitted atomic.Int32
	var maxRetry atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 30 {
		p := peers[i%len(peers)]
		wg.Go(func() {
			for range 5 {
				ok, retry, err := p.Take(ctx, bucket, perMinute, burst)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					admitted.Add(1)
				} else if int64(retry) > maxRetry.Load() {
					maxRetry.Store(int64(retry))
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	// burst tokens at once, plus one per second that passed.
	lo, hi := int32(burst), int32(burst)+int32(elapsed/time.Second)+1
	if n := admitted.Load(); n < lo || n > hi {
		t.Errorf("admitted %d of 150 takes in %v, want between %d and %d", n, elapsed, lo, hi)
	}
	if r := time.Duration(maxRetry.Load()); r <= 0 || r > time.Second {
		t.Errorf("retryAfter = %v, want in (0, 1s]", r)
	}
	t.Logf("admitted %d of 150 concurrent takes (burst %d, %d/min) in %v", admitted.Load(), burst, perMinute, elapsed)
	if _, _, err := s.Take(ctx, "bad{bucket}", 1, 1); err == nil {
		t.Error("Take with braces in the bucket name: want an error")
	}
	// A different bucket has its own budget.
	if ok, _, err := s.Take(ctx, bucket+"2", perMinute, burst); err != nil || !ok {
		t.Errorf("other bucket: %v, %v", ok, err)
	}
}

func TestAuditBounded(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	const n = AuditLen + 250
	for i := range n {
		if err := s.Audit(ctx, team, map[string]string{"event": "tool_call", "seq": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.RecentAudit(ctx, team, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Fields["seq"] != fmt.Sprint(n-1) || got[2].Fields["seq"] != fmt.Sprint(n-3) {
		t.Errorf("RecentAudit = %+v, want the last three, newest first", got)
	}
	if got[0].Time.IsZero() || time.Since(got[0].Time) > time.Minute {
		t.Errorf("entry time = %v", got[0].Time)
	}
	if l := s.rdb.XLen(ctx, s.k.audit(team)).Val(); l < AuditLen || l > AuditLen+200 {
		t.Errorf("stream length %d after %d entries, want about %d", l, n, AuditLen)
	}
}

func TestRedisUnavailable(t *testing.T) {
	// A port where nothing listens: Open fails fast and says why.
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr := m.Addr()
	ctx := ctxT(t)
	s, err := Open(ctx, Options{URL: "redis://" + addr, Prefix: "test-" + randomID()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m.Close()

	if _, err := Open(ctx, Options{URL: "redis://" + addr}); !IsUnavailable(err) {
		t.Errorf("Open against a closed port: err = %v, want unavailable", err)
	}
	k := testThread()
	ops := map[string]func() error{
		"ping":    func() error { return s.Ping(ctx) },
		"admit":   func() error { _, err := s.Admit(ctx, "T1", "Ev1", "C1", "1.1"); return err },
		"load":    func() error { _, _, err := s.Load(ctx, k); return err },
		"append":  func() error { return s.Append(ctx, k, 1, provider.Message{Role: provider.RoleUser}) },
		"acquire": func() error { _, err := s.Acquire(ctx, k, "r1"); return err },
		"enqueue": func() error { _, err := s.Enqueue(ctx, k, []byte("x")); return err },
		"decide":  func() error { _, _, err := s.Decide(ctx, "id1", ApprovalDeny, "U1"); return err },
		"wait":    func() error { _, err := s.WaitApproval(ctx, "id1"); return err },
		"take":    func() error { _, _, err := s.Take(ctx, "T1:x", 1, 1); return err },
		"audit":   func() error { return s.Audit(ctx, "T1", map[string]string{"a": "b"}) },
		"orphans": func() error { _, err := s.Orphans(ctx); return err },
	}
	for name, op := range ops {
		if err := op(); !IsUnavailable(err) {
			t.Errorf("%s with Redis down: err = %v, want unavailable", name, err)
		}
	}
}

func TestOpenRejectsBadURL(t *testing.T) {
	_, err := Open(ctxT(t), Options{URL: "redis://user:hunter2@[::1"})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Open with a bad URL: err = %v, want an error without the password", err)
	}
	if _, err := Open(ctxT(t), Options{URL: "", Prefix: "a{b}"}); err == nil {
		t.Error("Open with braces in the prefix: want an error")
	}
}

// TestEveryKeyHasTTLOrBound runs every operation, then scans the test's
// keys: each must expire, or be one of the bounded configuration keys.
func TestEveryKeyHasTTLOrBound(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1), LeaseTTL: 5 * time.Second})
	ctx := ctxT(t)
	k := testThread()
	l, err := s.Acquire(ctx, k, "r1")
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Append(ctx, k, l.Token(), sampleMessages()...))
	must(s.SaveMeta(ctx, k, l.Token(), Meta{Model: "m"}))
	must(s.Grant(ctx, k, "srv.tool"))
	_, err = s.Enqueue(ctx, k, []byte("queued"))
	must(err)
	ap, err := s.CreateApproval(ctx, newApproval(k, time.Minute))
	must(err)
	waited := make(chan error, 1)
	go func() { _, err := s.WaitApproval(ctx, ap.ID); waited <- err }()
	time.Sleep(200 * time.Millisecond) // let the waiter block, so its wake-up path runs
	_, _, err = s.Decide(ctx, ap.ID, ApprovalAllowOnce, "U1")
	must(err)
	must(<-waited)
	_, err = s.CreateApproval(ctx, newApproval(k, time.Minute))
	must(err)
	_, err = s.Admit(ctx, k.Team, "Ev1", k.Channel, "1.1")
	must(err)
	must(s.PutRegistration(ctx, k.Team, sampleRegistration("docs")))
	must(s.PutToolPins(ctx, k.Team, "docs", map[string]string{"a": "h"}))
	_, _, err = s.Take(ctx, k.Team+":chat.update", 50, 5)
	must(err)
	post := SpendRequest{Team: k.Team, Method: "chat.postMessage", PerMinute: 600, Burst: 30, Channel: k.Channel, ChannelPerMinute: 60, ChannelBurst: 3,
		Slot: &SlotRequest{Pool: "live", ID: "r1", Cap: 4, TTL: time.Minute, CoverMethod: "chat.update", CoverPerMinute: 50, CoverBurst: 5}}
	_, err = s.Spend(ctx, post)
	must(err)
	_, _, err = s.Throttled(ctx, post, time.Second)
	must(err)
	must(s.Audit(ctx, k.Team, map[string]string{"e": "x"}))
	_, err = s.SetPaneContext(ctx, k, PaneContext{ChannelID: "C2", EventTS: "1.2"})
	must(err)
	_, err = s.SetPersonTitle(ctx, k, PersonTitle{User: "U1", Title: "Trip", EventTS: "1.3"})
	must(err)
	k2 := testThread()
	l2, err := s.Acquire(ctx, k2, "r1")
	must(err)
	must(l2.Handover(ctx))

	bounded := map[string]int64{
		s.k.registrations(k.Team): MaxRegistrations,
		s.k.pins(k.Team, "docs"):  MaxToolPins,
		// The workspace's index of such keys (install.go).
		s.k.workspaceIndex(k.Team): 2*MaxRegistrations + 16,
		// The workspace's version: one counter per workspace (version.go).
		s.k.version(k.Team): 1,
	}
	keys := scanKeys(t, s)
	if len(keys) < 12 {
		t.Errorf("only %d keys: %v", len(keys), keys)
	}
	for _, key := range keys {
		if !strings.HasPrefix(key, s.opt.Prefix+":") {
			t.Errorf("key %s outside the namespace", key)
		}
		ttl := s.rdb.PTTL(ctx, key).Val()
		if ttl > 0 {
			continue
		}
		limit, ok := bounded[key]
		if !ok {
			t.Errorf("key %s has no TTL (PTTL %v) and is not a bounded key", key, ttl)
			continue
		}
		if n := s.rdb.HLen(ctx, key).Val(); n > limit {
			t.Errorf("key %s has %d entries, bound %d", key, n, limit)
		}
	}
	if err := errors.Join(l.Release(ctx)); err != nil {
		t.Fatal(err)
	}
}

func TestEmbeddedLogsOnce(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	h := &lockedWriter{mu: &mu, w: &buf}
	s, err := Open(context.Background(), Options{Logger: newTextLogger(h)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if strings.Count(out, "will not survive a restart") != 1 || !strings.Contains(out, "one replica") {
		t.Errorf("log = %q, want one warning about restarts and replicas", out)
	}
}
