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
