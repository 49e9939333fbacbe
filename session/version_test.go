package session

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// Two admins add the same server name at once (on two replicas): exactly
// one add wins, the others hear ErrExists, and the stored record is the
// winner's.
func TestRegistrationConcurrentAdds(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1)})
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	const n = 8
	stores := []*Store{s, peer(t, s, Options{SecretKey: testKey(1)})}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := sampleRegistration("docs")
			r.CreatedBy = "U" + string(rune('A'+i))
			errs[i] = stores[i%2].PutRegistration(ctx, team, r)
		}()
	}
	wg.Wait()
	winner := ""
	for i, err := range errs {
		switch {
		case err == nil && winner == "":
			winner = "U" + string(rune('A'+i))
		case err == nil:
			t.Errorf("add %d also succeeded after %s won", i, winner)
		case !errors.Is(err, ErrExists):
			t.Errorf("add %d: err = %v, want ErrExists", i, err)
		}
	}
	r, err := s.Registration(ctx, team, "docs")
	if err != nil || r.CreatedBy != winner {
		t.Errorf("stored registration = %+v, %v; want the one by %s", r, err, winner)
	}
}

// A scope change (read, change, write) racing a remove never brings the
// server back: either the scope lands before the remove, or it fails with
// ErrNotFound and the server stays removed.
func TestRegistrationScopeRacesRemove(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1)})
	other := peer(t, s, Options{SecretKey: testKey(1)})
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	for round := range 40 {
		if err := s.PutRegistration(ctx, team, sampleRegistration("docs")); err != nil {
			t.Fatalf("round %d: add: %v", round, err)
		}
		read, err := s.Registration(ctx, team, "docs")
		if err != nil {
			t.Fatal(err)
		}
		var scopeErr, removeErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			r := read
			r.Record = json.RawMessage(`{"url":"https://mcp.example.com/mcp","scope":{"channels":["C1"]}}`)
			scopeErr = s.PutRegistration(ctx, team, r)
		}()
		go func() {
			defer wg.Done()
			removeErr = other.DeleteRegistration(ctx, team, "docs")
		}()
		wg.Wait()
		if removeErr != nil {
			t.Fatalf("round %d: remove: %v", round, removeErr)
		}
		if scopeErr != nil && !errors.Is(scopeErr, ErrNotFound) {
			t.Errorf("round %d: scope after a concurrent remove: err = %v, want nil or ErrNotFound", round, scopeErr)
		}
		if r, err := s.Registration(ctx, team, "docs"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("round %d: after remove and a racing scope change, Registration = %+v, %v; want ErrNotFound (resurrected)", round, r, err)
		}
	}
}

// A write based on a stale read fails with ErrConflict instead of undoing
// the write in between.
func TestRegistrationStaleWrite(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	plain := Registration{Name: "plain", Record: json.RawMessage(`{"url":"https://x.example/mcp"}`)}
	if err := s.PutRegistration(ctx, team, plain); err != nil {
		t.Fatal(err)
	}
	a, _ := s.Registration(ctx, team, "plain")
	b, _ := s.Registration(ctx, team, "plain")
	a.Record = json.RawMessage(`{"url":"https://x.example/mcp","scope":{"dm":false}}`)
	if err := s.PutRegistration(ctx, team, a); err != nil {
		t.Fatalf("first change: %v", err)
	}
	b.Record = json.RawMessage(`{"url":"https://x.example/mcp","scope":{"channels":["C9"]}}`)
	if err := s.PutRegistration(ctx, team, b); !errors.Is(err, ErrConflict) {
		t.Errorf("change based on a stale read: err = %v, want ErrConflict", err)
	}
	got, _ := s.Registration(ctx, team, "plain")
	if string(got.Record) != string(a.Record) {
		t.Errorf("record = %s, want the first change %s", got.Record, a.Record)
	}
	// Read again, change again: fine.
	got.Record = b.Record
	if err := s.PutRegistration(ctx, team, got); err != nil {
		t.Errorf("change after a fresh read: %v", err)
	}
}

// Every change other replicas must see moves the workspace's version, and
// only the workspace's own.
func TestWorkspaceVersionMoves(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1)})
	ctx := ctxT(t)
	team, otherTeam := "T"+strings.ToUpper(randomID()), "T"+strings.ToUpper(randomID())
	ver := func(team string) int64 {
		t.Helper()
		v, err := s.WorkspaceVersion(ctx, team)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := ver(team); v != 0 {
		t.Fatalf("version before any change = %d, want 0", v)
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"add", func() error { return s.PutRegistration(ctx, team, sampleRegistration("docs")) }},
		{"scope", func() error {
			r, err := s.Registration(ctx, team, "docs")
			if err != nil {
				return err
			}
			r.Record = json.RawMessage(`{"scope":{"dm":false}}`)
			return s.PutRegistration(ctx, team, r)
		}},
		{"connect", func() error { return s.PutOAuthConnection(ctx, team, "docs", "U1", []byte(`{"a":1}`)) }},
		{"disconnect", func() error { return s.DeleteOAuthConnection(ctx, team, "docs", "U1") }},
		{"disconnect all", func() error { return s.DeleteOAuthConnections(ctx, team, "docs") }},
		{"remove", func() error { return s.DeleteRegistration(ctx, team, "docs") }},
		{"approve (pins)", func() error { return s.PutToolPins(ctx, team, "docs", map[string]string{"echo": "h1"}) }},
		{"bump", func() error { return s.BumpWorkspace(ctx, team) }},
	}
	for _, st := range steps {
		before := ver(team)
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if after := ver(team); after == before {
			t.Errorf("%s: version stayed %d", st.name, after)
		}
	}
	if v := ver(otherTeam); v != 0 {
		t.Errorf("another workspace's version = %d, want 0", v)
	}
	// The counter is indexed: an uninstall's clean-up gives it a TTL.
	if err := s.RetireWorkspace(ctx, team); err != nil {
		t.Fatal(err)
	}
	if ttl := s.rdb.PTTL(ctx, s.k.version(team)).Val(); ttl <= 0 {
		t.Errorf("version key TTL after retire = %v, want one", ttl)
	}
}

// One Connect prompt per connection across replicas: the second claim
// loses while the first is out, and wins once it is released (or expired).
func TestClaimOAuthPrompt(t *testing.T) {
	s := newStore(t, Options{})
	other := peer(t, s, Options{})
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	release, ok, err := s.ClaimOAuthPrompt(ctx, team, "docs", "U1", time.Minute)
	if err != nil || !ok {
		t.Fatalf("first claim = %v, %v; want claimed", ok, err)
	}
	if _, ok, err := other.ClaimOAuthPrompt(ctx, team, "docs", "U1", time.Minute); err != nil || ok {
		t.Fatalf("second claim while the first is out = %v, %v; want lost", ok, err)
	}
	if _, ok, err := other.ClaimOAuthPrompt(ctx, team, "docs", "U2", time.Minute); err != nil || !ok {
		t.Fatalf("another person's claim = %v, %v; want claimed", ok, err)
	}
	release()
	release2, ok, err := other.ClaimOAuthPrompt(ctx, team, "docs", "U1", 50*time.Millisecond)
	if err != nil || !ok {
		t.Fatalf("claim after release = %v, %v; want claimed", ok, err)
	}
	release() // a stale release does not end the new holder's claim
	if _, ok, _ := s.ClaimOAuthPrompt(ctx, team, "docs", "U1", time.Minute); ok {
		t.Fatal("an old holder's release ended the new claim")
	}
	release2()
}
