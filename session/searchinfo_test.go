package session

import (
	"strings"
	"testing"
	"time"
)

// TestSearchInfoShared: one replica caches whether a workspace has Slack
// search, another reads it; "not available" is an answer too; it expires.
func TestSearchInfoShared(t *testing.T) {
	s := newStore(t, Options{})
	other := peer(t, s, Options{})
	ctx := ctxT(t)
	team, off := "T"+strings.ToUpper(randomID()), "T"+strings.ToUpper(randomID())
	if _, known, err := other.CachedSearchInfo(ctx, team); err != nil || known {
		t.Fatalf("before caching: known=%v err=%v", known, err)
	}
	if err := s.CacheSearchInfo(ctx, team, true, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := s.CacheSearchInfo(ctx, off, false, time.Minute); err != nil {
		t.Fatal(err)
	}
	if on, known, err := other.CachedSearchInfo(ctx, team); err != nil || !known || !on {
		t.Fatalf("other replica read on=%v known=%v err=%v", on, known, err)
	}
	if on, known, err := other.CachedSearchInfo(ctx, off); err != nil || !known || on {
		t.Fatalf("unavailable read on=%v known=%v err=%v", on, known, err)
	}
	if err := s.CacheSearchInfo(ctx, team, true, 0); err == nil {
		t.Error("a zero ttl was accepted")
	}
	if _, _, err := s.CachedSearchInfo(ctx, "bad team"); err == nil {
		t.Error("an invalid team was accepted")
	}
	waitGone(t, "the cached answer", 10*time.Second, func() (bool, error) {
		_, known, err := other.CachedSearchInfo(ctx, team)
		return known, err
	})
}
