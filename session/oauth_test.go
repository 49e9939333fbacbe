package session

import (
	"bytes"
	"context"
	"crypto/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func oauthStore(t *testing.T) *Store {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return newStore(t, Options{SecretKey: key})
}

// rawValues returns every value under the store's prefix, as Redis has it.
func rawValues(t *testing.T, s *Store) string {
	t.Helper()
	ctx := ctxT(t)
	var b strings.Builder
	for _, k := range scanKeys(t, s) {
		switch s.rdb.Type(ctx, k).Val() {
		case "string":
			b.WriteString(s.rdb.Get(ctx, k).Val())
		case "hash":
			for f, v := range s.rdb.HGetAll(ctx, k).Val() {
				b.WriteString(f + "=" + v + "\n")
			}
		}
	}
	return b.String()
}

func TestOAuthConnectionSealedAndBound(t *testing.T) {
	s := oauthStore(t)
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	const canary = "canary-access-token-6f1c"
	rec := []byte(`{"access_token":"` + canary + `"}`)
	if got, err := s.OAuthConnection(ctx, team, "linear", "U1"); err != nil || got != nil {
		t.Fatalf("before put: %q, %v; want nil, nil", got, err)
	}
	for _, p := range []string{"U1", ""} {
		if err := s.PutOAuthConnection(ctx, team, "linear", p, rec); err != nil {
			t.Fatalf("put %q: %v", p, err)
		}
		got, err := s.OAuthConnection(ctx, team, "linear", p)
		if err != nil || !bytes.Equal(got, rec) {
			t.Fatalf("get %q: %q, %v; want %q", p, got, err, rec)
		}
	}
	if raw := rawValues(t, s); strings.Contains(raw, canary) {
		t.Fatalf("token in clear in Redis: %s", raw)
	}
	// A sealed record moved to another principal does not open.
	key := s.k.oauthConns(team, "linear")
	v := s.rdb.HGet(ctx, key, "U1").Val()
	s.rdb.HSet(ctx, key, "U2", v)
	if _, err := s.OAuthConnection(ctx, team, "linear", "U2"); err == nil {
		t.Fatal("record copied to U2 opened")
	}
	if err := s.DeleteOAuthConnection(ctx, team, "linear", "U1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.OAuthConnection(ctx, team, "linear", "U1"); got != nil {
		t.Fatalf("after delete: %q", got)
	}
	if got, _ := s.OAuthConnection(ctx, team, "linear", ""); got == nil {
		t.Fatal("workspace connection deleted with U1's")
	}
	if err := s.PutOAuthConnection(ctx, team, "linear", "-", rec); err == nil {
		t.Fatal("principal \"-\" accepted")
	}
}

func TestOAuthClientByIssuer(t *testing.T) {
	s := oauthStore(t)
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	rec := []byte(`{"client_id":"abc","client_secret":"canary-secret-91"}`)
	if err := s.PutOAuthClient(ctx, team, "https://as.example/tenant", rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.OAuthClient(ctx, team, "https://as.example/tenant")
	if err != nil || !bytes.Equal(got, rec) {
		t.Fatalf("got %q, %v", got, err)
	}
	if got, err := s.OAuthClient(ctx, team, "https://other.example"); err != nil || got != nil {
		t.Fatalf("other issuer: %q, %v", got, err)
	}
	if strings.Contains(rawValues(t, s), "canary-secret-91") {
		t.Fatal("client secret in clear")
	}
}

func TestOAuthStateSingleUseAcrossReplicas(t *testing.T) {
	s := oauthStore(t)
	p := peer(t, s, Options{SecretKey: nil})
	p.kek = s.kek // same SECRET_KEY on both replicas
	ctx := ctxT(t)
	state := "st" + randomID() + randomID()
	if err := s.PutOAuthState(ctx, state, "T1", []byte(`{"verifier":"canary-verifier"}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.PutOAuthState(ctx, state, "T1", []byte(`{}`), time.Minute); err == nil {
		t.Fatal("state replaced")
	}
	if strings.Contains(rawValues(t, s), "canary-verifier") {
		t.Fatal("verifier in clear")
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(st *Store) {
			defer wg.Done()
			team, rec, err := st.TakeOAuthState(ctx, state)
			if err != nil {
				t.Error(err)
			}
			if rec != nil {
				if team != "T1" || !strings.Contains(string(rec), "canary-verifier") {
					t.Errorf("took %q %q", team, rec)
				}
				wins.Add(1)
			}
		}([]*Store{s, p}[i%2])
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d takers won, want 1", wins.Load())
	}
	// Expiry.
	state2 := "st" + randomID() + randomID()
	if err := s.PutOAuthState(ctx, state2, "T1", []byte(`{}`), 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(120 * time.Millisecond)
	if _, rec, err := s.TakeOAuthState(ctx, state2); err != nil || rec != nil {
		t.Fatalf("expired state: %q, %v", rec, err)
	}
	if _, rec, err := s.TakeOAuthState(ctx, "short"); err != nil || rec != nil {
		t.Fatalf("malformed state: %q, %v", rec, err)
	}
}

func TestOAuthLockExcludesOtherReplica(t *testing.T) {
	s := oauthStore(t)
	p := peer(t, s, Options{})
	ctx := ctxT(t)
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func(st *Store) {
			defer wg.Done()
			unlock, err := st.LockOAuth(ctx, "T1", "linear", "U1", 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			if n > maxInside.Load() {
				maxInside.Store(n)
			}
			time.Sleep(10 * time.Millisecond)
			inside.Add(-1)
			unlock()
		}([]*Store{s, p}[i%2])
	}
	wg.Wait()
	if maxInside.Load() != 1 {
		t.Fatalf("%d holders at once", maxInside.Load())
	}
	// A dead holder's lock expires.
	if _, err := s.LockOAuth(ctx, "T1", "x", "", 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	unlock, err := p.LockOAuth(lctx, "T1", "x", "", time.Second)
	if err != nil {
		t.Fatalf("lock after expiry: %v", err)
	}
	unlock()
}

func TestOAuthWakeAcrossReplicas(t *testing.T) {
	s := oauthStore(t)
	p := peer(t, s, Options{})
	ctx := ctxT(t)
	// A stale outcome from before the wait is not reported.
	if err := p.NotifyOAuth(ctx, "T1", "linear", "U1", "old"); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	var started sync.WaitGroup
	for i := 0; i < 2; i++ {
		started.Add(1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			started.Done()
			out, err := s.WaitOAuth(wctx, "T1", "linear", "U1")
			if err != nil {
				t.Error(err)
			}
			got <- out
		}()
	}
	started.Wait()
	time.Sleep(100 * time.Millisecond) // let both waiters read the last outcome
	if err := p.NotifyOAuth(ctx, "T1", "linear", "U1", "connected"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if out := <-got; out != "connected" {
			t.Fatalf("waiter %d got %q", i, out)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.WaitOAuth(wctx, "T1", "linear", "U1"); err == nil {
		t.Fatal("wait without a notification returned no error")
	}
}
