package session

import (
	"errors"
	"testing"
)

func TestSaveReplyFencedAndPerTurn(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	if ts, err := s.ReplyOf(ctx, k, "turn1"); err != nil || ts != "" {
		t.Fatalf("ReplyOf before any reply = %q, %v; want empty", ts, err)
	}
	a, err := s.Acquire(ctx, k, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveReply(ctx, k, a.Token(), "turn1", "1700000000.000200"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		turn, want string
	}{
		{"turn1", "1700000000.000200"},
		{"turn2", ""}, // another turn's record is not this turn's reply
	}
	for _, tt := range tests {
		if got, err := s.ReplyOf(ctx, k, tt.turn); err != nil || got != tt.want {
			t.Errorf("ReplyOf(%s) = %q, %v; want %q", tt.turn, got, err, tt.want)
		}
	}
	// A replica that lost the thread cannot move the record.
	if err := a.Handover(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := s.Acquire(ctx, k, "r2")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveReply(ctx, k, a.Token(), "turn1", "1700000000.000300"); !errors.Is(err, ErrStaleFence) {
		t.Errorf("SaveReply with a stale token: err = %v, want ErrStaleFence", err)
	}
	if err := s.SaveReply(ctx, k, b.Token(), "turn2", "1700000000.000400"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ReplyOf(ctx, k, "turn2"); got != "1700000000.000400" {
		t.Errorf("ReplyOf(turn2) = %q after the new holder's write", got)
	}
	if err := s.SaveReply(ctx, k, b.Token(), "bad id", "1"); err == nil {
		t.Error("SaveReply accepted a turn id with a space")
	}
	_ = b.Release(ctx)
}

// TestEnqueueMarkedIsFoundByOrphans: a message queued by a replica that
// died before acquiring the thread is found by the orphan scan.
func TestEnqueueMarkedIsFoundByOrphans(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	leased, err := s.EnqueueMarked(ctx, k, []byte("hello"))
	if err != nil || leased {
		t.Fatalf("EnqueueMarked = %v, %v; want not leased, no error", leased, err)
	}
	if ttl := s.rdb.PTTL(ctx, s.k.active()).Val(); ttl <= 0 {
		t.Errorf("active index created by EnqueueMarked has PTTL %v, want a TTL", ttl)
	}
	orph, err := s.Orphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !sameKeys(orph, []ThreadKey{k}) {
		t.Fatalf("Orphans = %v, want [%v]", orph, k)
	}
	l, err := s.Acquire(ctx, k, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok, err := s.Dequeue(ctx, k, l.Token()); err != nil || !ok || string(p) != "hello" {
		t.Fatalf("Dequeue = %q, %v, %v", p, ok, err)
	}
	if leased, err := s.EnqueueMarked(ctx, k, []byte("more")); err != nil || !leased {
		t.Fatalf("EnqueueMarked while leased = %v, %v; want leased", leased, err)
	}
	if orph, _ := s.Orphans(ctx); len(orph) != 0 {
		t.Errorf("Orphans while the lease is held = %v, want none", orph)
	}
	if _, err := l.ReleaseIfIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLoadMeta(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	if _, err := s.LoadMeta(ctx, k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("LoadMeta of a new thread: err = %v, want ErrNotFound", err)
	}
	l, err := s.Acquire(ctx, k, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveMeta(ctx, k, l.Token(), Meta{Phase: "model", TurnID: "t1"}); err != nil {
		t.Fatal(err)
	}
	m, err := s.LoadMeta(ctx, k)
	if err != nil || m.Phase != "model" || m.TurnID != "t1" {
		t.Errorf("LoadMeta = %+v, %v; want phase model, turn t1", m, err)
	}
	_ = l.Release(ctx)
}
