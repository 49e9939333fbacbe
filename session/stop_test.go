package session

import "testing"

// TestStopRequestFollowsTheTurn: a stop request is seen by the holder only
// while the turn it names runs; a request for an earlier turn is dropped.
func TestStopRequestFollowsTheTurn(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	l, err := s.Acquire(ctx, k, "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	if err := s.SaveMeta(ctx, k, l.Token(), Meta{TurnID: "turn1"}); err != nil {
		t.Fatal(err)
	}
	if by, err := s.StopRequest(ctx, k); err != nil || by != "" {
		t.Fatalf("StopRequest before any = %q, %v; want none", by, err)
	}
	if err := s.RequestStop(ctx, k, "turn1", "UALICE"); err != nil {
		t.Fatal(err)
	}
	for range 2 { // seen until cleared
		if by, err := s.StopRequest(ctx, k); err != nil || by != "UALICE" {
			t.Fatalf("StopRequest = %q, %v; want UALICE", by, err)
		}
	}
	if err := s.ClearStop(ctx, k); err != nil {
		t.Fatal(err)
	}
	if by, _ := s.StopRequest(ctx, k); by != "" {
		t.Errorf("StopRequest after ClearStop = %q", by)
	}

	// A click that arrives after turn1 ended must not stop turn2.
	if err := s.RequestStop(ctx, k, "turn1", "UBOB"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveMeta(ctx, k, l.Token(), Meta{TurnID: "turn2"}); err != nil {
		t.Fatal(err)
	}
	if by, err := s.StopRequest(ctx, k); err != nil || by != "" {
		t.Errorf("StopRequest for an earlier turn = %q, %v; want none", by, err)
	}
	if n, _ := s.rdb.Exists(ctx, s.k.stop(k)).Result(); n != 0 {
		t.Error("a stale stop request was kept")
	}

	for _, bad := range []struct{ turn, by string }{{"", "U1"}, {"a b", "U1"}, {"t", ""}} {
		if err := s.RequestStop(ctx, k, bad.turn, bad.by); err == nil {
			t.Errorf("RequestStop(%q, %q) accepted", bad.turn, bad.by)
		}
	}
}
