package session

import (
	"strings"
	"testing"
	"time"
)

func spendN(t *testing.T, s *Store, r SpendRequest, n int) (ok int, last SpendResult) {
	t.Helper()
	for range n {
		res, err := s.Spend(ctxT(t), r)
		if err != nil {
			t.Fatal(err)
		}
		if res.OK {
			ok++
		}
		last = res
	}
	return ok, last
}

func TestSpendBurstReserveAndChannels(t *testing.T) {
	s := newStore(t, Options{})
	team := "T" + strings.ToUpper(randomID())
	// 6/min: after the burst, nothing for 10 s.
	upd := SpendRequest{Team: team, Method: "chat.update", PerMinute: 6, Burst: 5}
	lossy := upd
	lossy.Reserve = 2
	if ok, last := spendN(t, s, lossy, 5); ok != 3 || last.OK || last.Wait <= 0 || last.Wait > 10*time.Second {
		t.Fatalf("lossy calls with reserve 2: %d of 5 admitted (last %+v), want 3 and a wait ≤ 10s", ok, last)
	}
	if ok, last := spendN(t, s, upd, 3); ok != 2 || last.InUse < 0.99 {
		t.Fatalf("must-deliver calls after the lossy ones: %d of 3 admitted, in use %v; want 2 and ≈1.0", ok, last.InUse)
	}
	// chat.postMessage: per channel and per workspace; a busy channel
	// does not hold up another.
	post := SpendRequest{Team: team, Method: "chat.postMessage", PerMinute: 600, Burst: 30, Channel: "C1", ChannelPerMinute: 6, ChannelBurst: 3}
	if ok, _ := spendN(t, s, post, 4); ok != 3 {
		t.Errorf("channel C1: %d of 4 posts admitted, want 3", ok)
	}
	post.Channel = "C2"
	if ok, _ := spendN(t, s, post, 1); ok != 1 {
		t.Errorf("channel C2 after C1's burst: not admitted")
	}
	// Another workspace has its own budgets.
	other := upd
	other.Team = team + "X"
	if ok, _ := spendN(t, s, other, 1); ok != 1 {
		t.Errorf("another workspace: not admitted")
	}
	if _, err := s.Spend(ctxT(t), SpendRequest{Team: "T{1}", Method: "chat.update", PerMinute: 1}); err == nil {
		t.Error("a team with braces: want an error")
	}
}

func TestThrottledPausesEveryReplicaAndShrinks(t *testing.T) {
	s := newStore(t, Options{})
	p := peer(t, s, Options{})
	team := "T" + strings.ToUpper(randomID())
	r := SpendRequest{Team: team, Method: "reactions.add", PerMinute: 600, Burst: 5}
	if ok, _ := spendN(t, s, r, 1); ok != 1 {
		t.Fatal("first call not admitted")
	}
	f, pause, err := s.Throttled(ctxT(t), r, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if f != aimdDecrease || pause <= 0 || pause > 300*time.Millisecond {
		t.Errorf("after a 429: factor %v pause %v, want %v and ≤ 300ms", f, pause, aimdDecrease)
	}
	// A second 429 in the same pause (another replica's call in flight)
	// does not shrink the budget again.
	if f2, _, _ := p.Throttled(ctxT(t), r, 100*time.Millisecond); f2 != f {
		t.Errorf("second 429 within the pause: factor %v, want %v", f2, f)
	}
	res, err := p.Spend(ctxT(t), r)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Wait <= 0 || res.Factor != f {
		t.Errorf("peer during the pause: %+v, want a wait and factor %v", res, f)
	}
	time.Sleep(res.Wait + 20*time.Millisecond)
	// After the pause calls resume one at a time.
	if ok, _ := spendN(t, p, r, 3); ok != 1 {
		t.Errorf("after the pause: %d of 3 admitted at once, want 1", ok)
	}
	// A 429 after the pause shrinks again.
	if f3, _, _ := s.Throttled(ctxT(t), r, 50*time.Millisecond); f3 >= f {
		t.Errorf("repeated 429: factor %v, want below %v", f3, f)
	}
}

func TestLiveSlots(t *testing.T) {
	s := newStore(t, Options{})
	team := "T" + strings.ToUpper(randomID())
	slot := func(id string) *SlotRequest {
		return &SlotRequest{Pool: "live", ID: id, Cap: 2, TTL: time.Minute, CoverMethod: "chat.update", CoverPerMinute: 60, CoverBurst: 5}
	}
	post := func(id string) SpendRequest {
		return SpendRequest{Team: team, Method: "chat.postMessage", PerMinute: 600_000, Burst: 100_000, Slot: slot(id)}
	}
	for i, id := range []string{"a", "b"} {
		res, err := s.Spend(ctxT(t), post(id))
		if err != nil || !res.OK || !res.HasSlot || res.Slots != i+1 {
			t.Fatalf("slot %s: %+v %v", id, res, err)
		}
	}
	res, _ := s.Spend(ctxT(t), post("c"))
	if res.OK || !res.NoSlot || res.Slots != 2 {
		t.Fatalf("third slot with a cap of 2: %+v, want NoSlot", res)
	}
	// A holder keeps its slot.
	if res, _ := s.Spend(ctxT(t), post("a")); !res.OK || !res.HasSlot {
		t.Errorf("holder refresh: %+v", res)
	}
	if err := s.ReleaseSlot(ctxT(t), team, "live", "a"); err != nil {
		t.Fatal(err)
	}
	// The cover: with chat.update's budget spent, a free slot is still
	// refused, since the new reply's final edit would have to wait.
	upd := SpendRequest{Team: team, Method: "chat.update", PerMinute: 60, Burst: 5}
	spendN(t, s, upd, 4) // 1 token left, 1 holder (b): no cover for a second
	if res, _ := s.Spend(ctxT(t), post("c")); !res.NoSlot {
		t.Errorf("slot without a covered final edit: %+v, want NoSlot", res)
	}
	if err := s.ReleaseSlot(ctxT(t), team, "live", "b"); err != nil {
		t.Fatal(err)
	}
	if res, _ := s.Spend(ctxT(t), post("c")); !res.OK || !res.HasSlot {
		t.Errorf("slot with its final edit covered: %+v", res)
	}
}

// TestSpendLagMargin: a reported lag takes lag − T off the burst (T the
// emission interval; the caller's spare token covers one T), never the
// last token; the per-channel budget alike; the largest lag any replica
// reported counts for the others too (issue 23).
func TestSpendLagMargin(t *testing.T) {
	s := newStore(t, Options{})
	// 60/min: T = 1 s, and nothing comes back within the test.
	base := SpendRequest{Method: "chat.update", PerMinute: 60, Burst: 5}
	for _, tc := range []struct {
		name string
		lag  time.Duration
		want int
	}{
		{"no lag", 0, 5},
		{"lag within one interval", 900 * time.Millisecond, 5},
		// margin 1.5 s: the k-th call needs (k−1)·T ≤ (5−1)·T − 1.5 s.
		{"lag 2.5 s", 2500 * time.Millisecond, 3},
		// capped at (5−1)·T: one call still goes at once.
		{"lag past the burst", time.Hour, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			r.Team = "T" + strings.ToUpper(randomID())
			r.Lag = tc.lag
			if ok, _ := spendN(t, s, r, 6); ok != tc.want {
				t.Errorf("lag %v, burst 5: %d calls admitted at once, want %d", tc.lag, ok, tc.want)
			}
		})
	}
	t.Run("per channel", func(t *testing.T) {
		r := SpendRequest{Team: "T" + strings.ToUpper(randomID()), Method: "chat.postMessage", PerMinute: 600_000, Burst: 100_000,
			Channel: "C1", ChannelPerMinute: 60, ChannelBurst: 3, Lag: 1500 * time.Millisecond}
		// margin 0.5 s: (k−1)·T ≤ 2·T − 0.5 s.
		if ok, _ := spendN(t, s, r, 4); ok != 2 {
			t.Errorf("channel burst 3, lag 1.5 s: %d posts admitted at once, want 2", ok)
		}
	})
	t.Run("shared by replicas", func(t *testing.T) {
		p := peer(t, s, Options{})
		r := base
		r.Team = "T" + strings.ToUpper(randomID())
		r.Lag = 2500 * time.Millisecond
		if ok, _ := spendN(t, s, r, 1); ok != 1 {
			t.Fatal("the first call was refused")
		}
		// The peer measured no lag of its own; the first replica's holds.
		r.Lag = 0
		if ok, _ := spendN(t, p, r, 5); ok != 2 {
			t.Errorf("the peer after a replica reported lag 2.5 s: %d more calls admitted at once, want 2", ok)
		}
	})
}
