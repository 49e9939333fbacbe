package session

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func newApproval(k ThreadKey, expires time.Duration) Approval {
	return Approval{Prompt: Prompt{Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS, Requester: "U1", Server: "srv", Expires: time.Now().Add(expires), MessageTS: "1700000002.000300"}, Tool: "delete_file", ArgsDigest: "sha256:abc", CallID: "call_1"}
}

// createApproval stores newApproval(k, expires) in s.
func createApproval(t *testing.T, s *Store, k ThreadKey, expires time.Duration) Approval {
	t.Helper()
	ap, err := s.CreateApproval(ctxT(t), newApproval(k, expires))
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

func TestApprovalDecideExactlyOnceAcrossClients(t *testing.T) {
	a := newStore(t, Options{})
	b := peer(t, a, Options{})
	ctx := ctxT(t)
	k := testThread()
	ap := createApproval(t, a, k, time.Minute)
	if ap.ID == "" || ap.State != ApprovalPending {
		t.Fatalf("created approval = %+v", ap)
	}
	got, err := b.GetApproval(ctx, ap.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Tool != "delete_file" || got.Requester != "U1" || !got.Expires.Equal(ap.Expires.Truncate(time.Millisecond)) {
		t.Errorf("GetApproval from the other client = %+v", got)
	}

	// 20 clicks on two replicas at once, with different answers.
	final := settleRace(t, [2]*Store{a, b}, 20,
		[]string{ApprovalAllowOnce, ApprovalDeny, ApprovalAllowSession, ApprovalWithdrawn},
		func(st *Store, state, by string) (Approval, bool, error) { return st.Decide(ctx, ap.ID, state, by) })
	// A replayed click later is a no-op.
	again, won, err := b.Decide(ctx, ap.ID, ApprovalAllowOnce, "U99")
	if err != nil || won || again.State != final.State {
		t.Errorf("replayed click = %+v, %v, %v; want no change", again, won, err)
	}
	if _, _, err := a.Decide(ctx, "nope", ApprovalDeny, "U1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Decide of an unknown id: %v, want ErrNotFound", err)
	}
	if _, _, err := a.Decide(ctx, ap.ID, ApprovalPending, "U1"); err == nil {
		t.Error("Decide to pending: want an error")
	}
}

func TestWaitApprovalWokenByOtherClient(t *testing.T) {
	a := newStore(t, Options{})
	b := peer(t, a, Options{})
	ctx := ctxT(t)
	k := testThread()
	ap := createApproval(t, a, k, time.Minute)
	// Two waiters (the turn, and a replica that resumed it) both wake.
	type res struct {
		a   Approval
		err error
	}
	done := make(chan res, 2)
	for range 2 {
		go func() {
			got, err := a.WaitApproval(ctx, ap.ID)
			done <- res{got, err}
		}()
	}
	time.Sleep(50 * time.Millisecond) // let them block; correctness does not depend on it
	if _, won, err := b.Decide(ctx, ap.ID, ApprovalAllowSession, "U1"); err != nil || !won {
		t.Fatalf("Decide = %v, %v", won, err)
	}
	for range 2 {
		r := <-done
		if r.err != nil || r.a.State != ApprovalAllowSession || r.a.DecidedBy != "U1" {
			t.Errorf("WaitApproval = %+v, %v; want allow_session by U1", r.a, r.err)
		}
	}
	pend, err := a.PendingApprovals(ctx, k)
	if err != nil || len(pend) != 0 {
		t.Errorf("PendingApprovals after decision = %v, %v; want none", pend, err)
	}
}

func TestWaitApprovalCancelled(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	ap := createApproval(t, s, k, time.Minute)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := s.WaitApproval(wctx, ap.ID); done <- err }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("WaitApproval after cancel = %v, want context.Canceled", err)
	}
	// Stop withdraws the pending approvals.
	pend, err := s.PendingApprovals(ctx, k)
	if err != nil || len(pend) != 1 || pend[0].ID != ap.ID {
		t.Fatalf("PendingApprovals = %+v, %v; want the one approval", pend, err)
	}
	if _, won, err := s.Decide(ctx, ap.ID, ApprovalWithdrawn, ""); err != nil || !won {
		t.Errorf("withdraw = %v, %v", won, err)
	}
}

func TestApprovalExpiry(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	ap := createApproval(t, s, k, 300*time.Millisecond)
	got, err := s.WaitApproval(ctx, ap.ID)
	if err != nil || got.State != ApprovalExpired {
		t.Fatalf("WaitApproval past expiry = %+v, %v; want expired", got, err)
	}
	// A click after expiry does not win and reports the expiry.
	late, won, err := s.Decide(ctx, ap.ID, ApprovalAllowOnce, "U1")
	if err != nil || won || late.State != ApprovalExpired {
		t.Errorf("late click = %+v, %v, %v; want expired, not won", late, won, err)
	}

	// A click that arrives after expiry, before any waiter noticed, decides
	// expired.
	ap2 := createApproval(t, s, k, 50*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	late, won, err = s.Decide(ctx, ap2.ID, ApprovalAllowOnce, "U1")
	if err != nil || won || late.State != ApprovalExpired {
		t.Errorf("click after expiry = %+v, %v, %v; want expired, not won", late, won, err)
	}
	if _, err := s.CreateApproval(ctx, newApproval(k, -time.Second)); err == nil {
		t.Error("CreateApproval with a past expiry: want an error")
	}
	if _, err := s.CreateApproval(ctx, Approval{Prompt: Prompt{ID: ap.ID, Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS, Expires: time.Now().Add(time.Minute)}}); err == nil {
		t.Error("CreateApproval with an existing id: want an error")
	}
}

// TestWaitersDoNotStarveThePool: turns blocked on approvals must not hold
// the connections every other operation needs. The store's pool here has
// one connection and three approvals are being waited on.
func TestWaitersDoNotStarveThePool(t *testing.T) {
	base := newStore(t, Options{})
	ctx := ctxT(t)
	s, err := Open(ctx, Options{URL: base.url() + "?pool_size=1", Prefix: base.opt.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := testThread()
	var ids []string
	for range 3 {
		ids = append(ids, createApproval(t, s, k, time.Minute).ID)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	for _, id := range ids {
		wg.Go(func() {
			_, err := s.WaitApproval(ctx, id)
			errs <- err
		})
	}
	time.Sleep(300 * time.Millisecond) // let the waiters block
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.Ping(pctx); err != nil {
		t.Errorf("Ping while %d approvals are awaited: %v", len(ids), err)
	}
	for _, id := range ids {
		if _, _, err := base.Decide(ctx, id, ApprovalDeny, "U1"); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("WaitApproval: %v", err)
		}
	}
}
