package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/provider"
)

func TestLeaseExclusiveAndFenced(t *testing.T) {
	s := newStore(t, Options{LeaseTTL: 200 * time.Millisecond})
	ctx := ctxT(t)
	k := testThread()

	a, err := s.Acquire(ctx, k, "replicaA")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, k, "replicaB"); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("second Acquire: err = %v, want ErrLeaseHeld", err)
	}
	if err := a.Renew(ctx); err != nil {
		t.Fatalf("Renew while held: %v", err)
	}
	msg := provider.Message{Role: provider.RoleUser, Content: "x"}
	if err := s.Append(ctx, k, a.Token(), msg); err != nil {
		t.Fatal(err)
	}

	// A pauses past its TTL; B takes over with a larger token.
	waitExpired(t, s, k)
	b, err := s.Acquire(ctx, k, "replicaB")
	if err != nil {
		t.Fatalf("Acquire after expiry: %v", err)
	}
	if b.Token() <= a.Token() {
		t.Errorf("tokens %d then %d, want increasing", a.Token(), b.Token())
	}
	for name, write := range map[string]func() error{
		"append":    func() error { return s.Append(ctx, k, a.Token(), msg) },
		"replace":   func() error { return s.Replace(ctx, k, a.Token(), nil) },
		"save meta": func() error { return s.SaveMeta(ctx, k, a.Token(), Meta{}) },
		"dequeue":   func() error { _, _, err := s.Dequeue(ctx, k, a.Token()); return err },
	} {
		if err := write(); !errors.Is(err, ErrStaleFence) {
			t.Errorf("%s with the stale token: err = %v, want ErrStaleFence", name, err)
		}
	}
	if err := a.Renew(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("stale Renew: err = %v, want ErrLeaseLost", err)
	}
	if err := a.Release(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("stale Release: err = %v, want ErrLeaseLost", err)
	}
	if err := s.Append(ctx, k, b.Token(), msg); err != nil {
		t.Errorf("Append by the new holder: %v", err)
	}
	_, got, _ := s.Load(ctx, k)
	if len(got) != 2 {
		t.Errorf("transcript has %d messages, want 2", len(got))
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := s.Acquire(ctx, k, "replicaC")
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	if c.Token() <= b.Token() {
		t.Errorf("token after release %d, want > %d", c.Token(), b.Token())
	}
	_ = c.Release(ctx)
}

// waitExpired waits (by polling Redis, not by timing) until the lease key is
// gone.
func waitExpired(t *testing.T, s *Store, k ThreadKey) {
	t.Helper()
	waitGone(t, "lease", 20*time.Second, func() (bool, error) {
		n, err := s.rdb.Exists(context.Background(), s.k.thread(k).lease).Result()
		return n > 0, err
	})
}

func TestLeaseRun(t *testing.T) {
	// Generous TTL: renewal must survive a loaded CI machine.
	const ttl = 2 * time.Second
	s := newStore(t, Options{LeaseTTL: ttl})
	ctx := ctxT(t)
	k := testThread()
	l, err := s.Acquire(ctx, k, "r1")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	// Still held after more than a TTL thanks to renewal.
	time.Sleep(ttl + ttl/4)
	if _, err := s.Acquire(ctx, k, "r2"); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("Acquire while Run renews: err = %v, want ErrLeaseHeld", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}

	// Losing the lease ends Run with ErrLeaseLost.
	go func() { done <- l.Run(ctx) }()
	s.rdb.Del(ctx, s.k.thread(k).lease)
	if err := <-done; !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Run after loss = %v, want ErrLeaseLost", err)
	}
}

// TestLeaseCheck: Check trusts a recent renewal without asking Redis, and
// asks once the renewal is older than its trust (at the shortest TTL,
// always). The lease is taken away behind the holder's back (which only
// expiry allows in practice) so the test can tell whether Redis was asked.
func TestLeaseCheck(t *testing.T) {
	ctx := ctxT(t)
	for _, tc := range []struct {
		ttl     time.Duration
		trusted bool
	}{
		{ttl: time.Minute, trusted: true}, // 29.5 s of trust: ample on a loaded machine
		{ttl: time.Second, trusted: false},
	} {
		t.Run(tc.ttl.String(), func(t *testing.T) {
			s := newStore(t, Options{LeaseTTL: tc.ttl})
			k := testThread()
			l, err := s.Acquire(ctx, k, "r1")
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Check(ctx); err != nil {
				t.Fatalf("Check while held: %v", err)
			}
			if err := s.rdb.Set(ctx, s.k.thread(k).lease, "r2:99", 0).Err(); err != nil {
				t.Fatal(err)
			}
			err = l.Check(ctx)
			if tc.trusted && err != nil {
				t.Errorf("Check right after acquiring, TTL %s: %v, want nil (no round trip)", tc.ttl, err)
			}
			if !tc.trusted && !errors.Is(err, ErrLeaseLost) {
				t.Errorf("Check, TTL %s: %v, want ErrLeaseLost (asked Redis)", tc.ttl, err)
			}
			if err := l.Renew(ctx); !errors.Is(err, ErrLeaseLost) {
				t.Errorf("Renew after the lease was taken: %v, want ErrLeaseLost", err)
			}
		})
	}
	// A renewal's trust runs from when it was sent: once it is older than
	// the trust, Check asks Redis.
	s := newStore(t, Options{LeaseTTL: time.Minute})
	k := testThread()
	l, err := s.Acquire(ctx, k, "r1")
	if err != nil {
		t.Fatal(err)
	}
	l.since = l.since.Add(-s.checkTrust()) // as if acquired that long ago
	if err := s.rdb.Set(ctx, s.k.thread(k).lease, "r2:99", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Check after the trust ran out: %v, want ErrLeaseLost", err)
	}

	// A lease given up (handed over at shutdown) is not vouched for by
	// the renewals before: Check asks Redis at once. An idle release that
	// kept the lease (a message was queued) keeps the trust.
	for _, mode := range []string{"release", "handover"} {
		l, err := s.Acquire(ctx, testThread(), "r1")
		if err != nil {
			t.Fatal(err)
		}
		if mode == "release" {
			err = l.Release(ctx)
		} else {
			err = l.Handover(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Check(ctx); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Check after %s: %v, want ErrLeaseLost", mode, err)
		}
	}
	k = testThread()
	if l, err = s.Acquire(ctx, k, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, k, []byte("next")); err != nil {
		t.Fatal(err)
	}
	if released, err := l.ReleaseIfIdle(ctx); err != nil || released {
		t.Fatalf("ReleaseIfIdle with a queued message: released=%v err=%v", released, err)
	}
	if !l.given.Load() && l.Check(ctx) != nil {
		t.Error("Check after an idle release that kept the lease failed")
	}
	if l.given.Load() {
		t.Error("an idle release that kept the lease dropped Check's trust")
	}
}

func TestQueueAndReleaseIfIdle(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()

	// Nobody holds the thread: the enqueuer is told to acquire.
	leased, err := s.Enqueue(ctx, k, []byte("m1"))
	if err != nil || leased {
		t.Fatalf("Enqueue on a free thread = %v, %v; want false, nil", leased, err)
	}
	l, err := s.Acquire(ctx, k, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if leased, err := s.Enqueue(ctx, k, []byte("m2")); err != nil || !leased {
		t.Fatalf("Enqueue on a held thread = %v, %v; want true, nil", leased, err)
	}
	if n, _ := s.QueueLen(ctx, k); n != 2 {
		t.Errorf("QueueLen = %d, want 2", n)
	}
	p, ok, err := s.Dequeue(ctx, k, l.Token())
	if err != nil || !ok || string(p) != "m1" {
		t.Fatalf("Dequeue = %q, %v, %v; want m1", p, ok, err)
	}
	// Not idle: the lease is kept.
	if rel, err := l.ReleaseIfIdle(ctx); err != nil || rel {
		t.Fatalf("ReleaseIfIdle with a queued message = %v, %v; want false", rel, err)
	}
	p, ok, _ = s.Dequeue(ctx, k, l.Token())
	if !ok || string(p) != "m2" {
		t.Fatalf("Dequeue = %q, %v; want m2", p, ok)
	}
	if _, ok, _ := s.Dequeue(ctx, k, l.Token()); ok {
		t.Fatal("Dequeue of an empty queue reported a payload")
	}
	if rel, err := l.ReleaseIfIdle(ctx); err != nil || !rel {
		t.Fatalf("ReleaseIfIdle on an empty queue = %v, %v; want true", rel, err)
	}
	if n, _ := s.rdb.ZScore(ctx, s.k.active(), k.String()).Result(); n != 0 {
		t.Errorf("thread still in the active index after release")
	}
}

func TestQueueBound(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	pipe := s.rdb.Pipeline()
	for range MaxQueue {
		pipe.RPush(ctx, s.k.thread(k).queue, "x")
	}
	pipe.PExpire(ctx, s.k.thread(k).queue, time.Hour)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, k, []byte("one too many")); !errors.Is(err, ErrQueueFull) {
		t.Errorf("Enqueue on a full queue: err = %v, want ErrQueueFull", err)
	}
}

func TestOrphans(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	dead, live, handed, done := testThread(), testThread(), testThread(), testThread()
	msg := provider.Message{Role: provider.RoleUser, Content: "hi"}
	leases := map[ThreadKey]*Lease{}
	for _, k := range []ThreadKey{dead, live, handed, done} {
		l, err := s.Acquire(ctx, k, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append(ctx, k, l.Token(), msg); err != nil {
			t.Fatal(err)
		}
		leases[k] = l
	}
	if err := leases[handed].Handover(ctx); err != nil {
		t.Fatal(err)
	}
	if err := leases[done].Release(ctx); err != nil {
		t.Fatal(err)
	}
	orph, err := s.Orphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []ThreadKey{handed}; !sameKeys(orph, want) {
		t.Errorf("Orphans right after handover = %v, want %v", orph, want)
	}
	// The "dead" replica's lease runs out (deleted here as if its TTL had
	// passed: expiry itself is TestLeaseExclusiveAndFenced's job); the live
	// one keeps its lease.
	s.rdb.Del(ctx, s.k.thread(dead).lease)
	orph, err = s.Orphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []ThreadKey{dead, handed}; !sameKeys(orph, want) {
		t.Errorf("Orphans after expiry = %v, want %v", orph, want)
	}
	// Takeover: a new owner acquires with a larger token; the old one is stale.
	l2, err := s.Acquire(ctx, dead, "r2")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, dead, leases[dead].Token(), msg); !errors.Is(err, ErrStaleFence) {
		t.Errorf("write by the dead owner: %v, want ErrStaleFence", err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// An index entry for a thread whose state is gone is pruned.
	s.rdb.Del(ctx, s.k.thread(handed).msgs)
	orph, err = s.Orphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(orph) != 0 {
		t.Errorf("Orphans = %v, want none", orph)
	}
	if n := s.rdb.ZCard(ctx, s.k.active()).Val(); n != 1 {
		t.Errorf("active index has %d entries, want 1 (the live turn)", n)
	}
	_ = leases[live].Release(ctx)
}

func sameKeys(a, b []ThreadKey) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[ThreadKey]int{}
	for _, k := range a {
		seen[k]++
	}
	for _, k := range b {
		seen[k]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// --- contention: goroutines and processes ---

const childEnv = "BOBBIN_SESSION_LEASE_CHILD"

type childConfig struct {
	URL, Prefix string
	Thread      ThreadKey
	Owner       string
	Acquires    int
	LeaseTTL    time.Duration
}

type workerResult struct{ Acquired, Accepted, Stale int }

// leaseWorker acquires the thread n times; each time it writes a marker and
// a few messages with random pauses, some longer than the lease TTL, so
// others take over and its later writes must be refused.
func leaseWorker(ctx context.Context, s *Store, cfg childConfig) (workerResult, error) {
	var r workerResult
	deadline := time.Now().Add(15 * time.Second)
	write := func(tok int64, kind string) (bool, error) {
		err := s.Append(ctx, cfg.Thread, tok, provider.Message{Role: provider.RoleUser, Content: kind,
			Meta: map[string]string{"owner": cfg.Owner, "token": strconv.FormatInt(tok, 10)}})
		switch {
		case err == nil:
			r.Accepted++
			return true, nil
		case errors.Is(err, ErrStaleFence):
			r.Stale++
			return false, nil
		}
		return false, err
	}
	for r.Acquired < cfg.Acquires && time.Now().Before(deadline) {
		l, err := s.Acquire(ctx, cfg.Thread, cfg.Owner)
		if errors.Is(err, ErrLeaseHeld) {
			time.Sleep(time.Duration(rand.IntN(5)+1) * time.Millisecond)
			continue
		}
		if err != nil {
			return r, err
		}
		r.Acquired++
		ok, err := write(l.Token(), "acquire")
		if err != nil {
			return r, err
		}
		for j := 0; ok && j < 3; j++ {
			pause := time.Duration(rand.IntN(3)) * time.Millisecond
			if rand.IntN(8) == 0 {
				pause = cfg.LeaseTTL + time.Duration(rand.IntN(int(cfg.LeaseTTL/time.Millisecond)))*time.Millisecond
			}
			time.Sleep(pause)
			if ok, err = write(l.Token(), "write"); err != nil {
				return r, err
			}
		}
		if err := l.Release(ctx); err != nil && !errors.Is(err, ErrLeaseLost) {
			return r, err
		}
	}
	return r, nil
}

// runLeaseChild is the child-process side of TestLeaseContention.
func runLeaseChild() int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, Options{URL: cfg.URL, Prefix: cfg.Prefix, LeaseTTL: cfg.LeaseTTL})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		return 2
	}
	defer s.Close()
	r, err := leaseWorker(ctx, s, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child worker:", err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

func TestLeaseContention(t *testing.T) {
	const ttl = 100 * time.Millisecond
	s := newStore(t, Options{LeaseTTL: ttl})
	ctx := ctxT(t)
	k := testThread()
	base := childConfig{URL: s.url(), Prefix: s.opt.Prefix, Thread: k, Acquires: 8, LeaseTTL: ttl}

	var (
		mu      sync.Mutex
		results []workerResult
		wg      sync.WaitGroup
	)
	record := func(r workerResult, err error, who string) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errorf("%s: %v", who, err)
		}
		results = append(results, r)
	}
	for i := range 3 {
		cfg := base
		cfg.Owner = fmt.Sprintf("proc%d", i)
		env, _ := json.Marshal(cfg)
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+string(env))
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			var r workerResult
			if err == nil {
				err = json.Unmarshal(out.Bytes(), &r)
			}
			if err != nil {
				err = fmt.Errorf("%w; stderr: %s", err, errb.String())
			}
			record(r, err, cfg.Owner)
		})
	}
	for i := range 3 {
		cfg := base
		cfg.Owner = fmt.Sprintf("goroutine%d", i)
		// Each goroutine is its own replica: its own client.
		p := peer(t, s, Options{LeaseTTL: ttl})
		wg.Go(func() {
			r, err := leaseWorker(ctx, p, cfg)
			record(r, err, cfg.Owner)
		})
	}
	wg.Wait()

	var total workerResult
	for _, r := range results {
		total.Acquired += r.Acquired
		total.Accepted += r.Accepted
		total.Stale += r.Stale
	}
	_, msgs, err := s.Load(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("workers=%d acquisitions=%d accepted writes=%d refused stale writes=%d", len(results), total.Acquired, total.Accepted, total.Stale)
	if len(msgs) != total.Accepted {
		t.Errorf("transcript has %d messages, workers saw %d writes accepted", len(msgs), total.Accepted)
	}
	// Every accepted write carries the token of the latest acquisition
	// recorded before it: no write with a stale token was accepted.
	var cur int64
	for i, m := range msgs {
		tok, _ := strconv.ParseInt(m.Meta["token"], 10, 64)
		if m.Content == "acquire" {
			if tok <= cur {
				t.Errorf("message %d: acquisition token %d not above %d", i, tok, cur)
			}
			cur = tok
			continue
		}
		if tok != cur {
			t.Errorf("message %d: write by %s with token %d accepted while the current token was %d", i, m.Meta["owner"], tok, cur)
		}
	}
}

// TestScriptCacheFlushed checks the pipelined scripts recover when the
// server forgot them (restart, SCRIPT FLUSH). Flushing the script cache is
// harmless to other clients: every script call here falls back the same way.
func TestScriptCacheFlushed(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	for range 2 {
		if err := s.rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		l, err := s.Acquire(ctx, k, "r1")
		if err != nil {
			t.Fatalf("Acquire after SCRIPT FLUSH: %v", err)
		}
		if err := s.rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release after SCRIPT FLUSH: %v", err)
		}
	}
	if n := s.rdb.ZCard(ctx, s.k.active()).Val(); n != 0 {
		t.Errorf("active index has %d entries after release", n)
	}
}

// TestQueueNeverStranded runs the enqueue/acquire/drain/release-if-idle
// protocol from many goroutines on two clients: every payload is taken
// exactly once, and none is left queued with nobody holding the thread.
func TestQueueNeverStranded(t *testing.T) {
	a := newStore(t, Options{})
	b := peer(t, a, Options{})
	ctx := ctxT(t)
	k := testThread()
	var (
		mu    sync.Mutex
		taken = map[string]int{}
	)
	drain := func(s *Store, owner string) error {
		l, err := s.Acquire(ctx, k, owner)
		if errors.Is(err, ErrLeaseHeld) {
			return nil // the holder sees the queue before it can release
		}
		if err != nil {
			return err
		}
		for {
			p, ok, err := s.Dequeue(ctx, k, l.Token())
			if err != nil {
				return err
			}
			if ok {
				mu.Lock()
				taken[string(p)]++
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond) // "run a turn"
				continue
			}
			released, err := l.ReleaseIfIdle(ctx)
			if err != nil || released {
				return err
			}
		}
	}
	const senders, each = 8, 25
	var wg sync.WaitGroup
	for i := range senders {
		s := []*Store{a, b}[i%2]
		owner := fmt.Sprintf("r%d", i)
		wg.Go(func() {
			for j := range each {
				leased, err := s.Enqueue(ctx, k, fmt.Appendf(nil, "%d-%d", i, j))
				if err == nil && !leased {
					err = drain(s, owner)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n, _ := a.QueueLen(ctx, k); n != 0 {
		t.Errorf("%d payloads stranded in the queue", n)
	}
	if n := a.rdb.Exists(ctx, a.k.thread(k).lease).Val(); n != 0 {
		t.Error("lease still held after all drains finished")
	}
	if len(taken) != senders*each {
		t.Errorf("%d distinct payloads taken, want %d", len(taken), senders*each)
	}
	for p, n := range taken {
		if n != 1 {
			t.Errorf("payload %s taken %d times", p, n)
		}
	}
}
