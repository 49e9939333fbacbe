package mcp

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/oauthtest"
)

// countingClaims counts the claims a replica lost to another's prompt.
type countingClaims struct {
	next PromptClaimer
	lost *atomic.Int32
}

func (c countingClaims) ClaimOAuthPrompt(ctx context.Context, team, server, principal string, ttl time.Duration) (func(), bool, error) {
	release, ok, err := c.next.ClaimOAuthPrompt(ctx, team, server, principal, ttl)
	if err == nil && !ok {
		c.lost.Add(1)
	}
	return release, ok, err
}

// TestOAuthOnePromptAcrossReplicas: the same person needs the same
// connection in turns on two replicas at once; one Connect prompt is shown
// (not one per replica), and both calls go on once they connect.
func TestOAuthOnePromptAcrossReplicas(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	lost := &atomic.Int32{}
	r := newReplicas(t, 2, oauthCfg(srv.URL, AuthUser), nil, func(o *Options) {
		o.OAuth.Prompts = countingClaims{next: o.OAuth.Prompts, lost: lost}
	})
	// Alice connects, so both replicas can list the server's tools.
	alice := reqCtx(t, "UALICE")
	link, _, err := r.mgrs[0].StartConnect(alice, "T1", "acme", "UALICE")
	if err != nil {
		t.Fatal(err)
	}
	if page := r.connect(0, link, "alice"); page.Code != 200 {
		t.Fatalf("alice's callback: %d %s", page.Code, page.Body)
	}
	bob := reqCtx(t, "UBOB")
	links := make(chan string, 4)
	r.prompts.react = func(p ConnectPrompt) error { links <- p.URL; return nil }
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	for i, m := range r.mgrs {
		tools, err := m.Tools(bob, "T1")
		if err != nil {
			t.Fatal(err)
		}
		whoami := toolByName(t, tools, "acme__whoami")
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = whoami.Call(bob, nil)
		}()
	}
	// One replica prompts; the other finds the prompt out and waits.
	var first string
	select {
	case first = <-links:
	case <-bob.Done():
		t.Fatal("no Connect prompt")
	}
	for lost.Load() == 0 {
		select {
		case <-bob.Done():
			t.Fatal("the second replica never found the first one's prompt")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if page := r.connect(1, first, "bob"); page.Code != 200 {
		t.Fatalf("bob's callback: %d %s", page.Code, page.Body)
	}
	wg.Wait()
	for i := range outs {
		if errs[i] != nil || outs[i] != "bob" {
			t.Errorf("replica %d: bob's call = %q, %v; want it to run as bob", i, outs[i], errs[i])
		}
	}
	if n := r.prompts.count(); n != 1 {
		t.Errorf("%d Connect prompts for one connection needed on two replicas; want 1", n)
	}
	r.noCanary()
}
