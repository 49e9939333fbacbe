package session

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestUsergroupCacheSharedAndExpires: one replica caches a group's
// members, another reads them; they expire after the ttl; an empty group
// is an answer, not a miss.
func TestUsergroupCacheSharedAndExpires(t *testing.T) {
	s := newStore(t, Options{})
	other := peer(t, s, Options{})
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	if _, ok, err := s.CachedUsergroup(ctx, team, "S1"); err != nil || ok {
		t.Fatalf("before caching: ok=%v err=%v", ok, err)
	}
	if err := s.CacheUsergroup(ctx, team, "S1", []string{"U1", "U2"}, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := s.CacheUsergroup(ctx, team, "SEMPTY", nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, ok, err := other.CachedUsergroup(ctx, team, "S1")
	if err != nil || !ok || !slices.Equal(got, []string{"U1", "U2"}) {
		t.Fatalf("other replica read %v ok=%v err=%v", got, ok, err)
	}
	if got, ok, err := other.CachedUsergroup(ctx, team, "SEMPTY"); err != nil || !ok || len(got) != 0 {
		t.Fatalf("empty group read %v ok=%v err=%v", got, ok, err)
	}
	if _, ok, _ := s.CachedUsergroup(ctx, "T"+strings.ToUpper(randomID()), "S1"); ok {
		t.Error("another workspace sees the group")
	}
	waitGone(t, "the cached group", 10*time.Second, func() (bool, error) {
		_, ok, err := other.CachedUsergroup(ctx, team, "S1")
		return ok, err
	})
	for _, bad := range []string{"", "S:1", "S 1"} {
		if err := s.CacheUsergroup(ctx, team, bad, nil, time.Minute); err == nil {
			t.Errorf("group id %q accepted", bad)
		}
	}
	if err := s.CacheUsergroup(ctx, team, "S2", nil, 0); err == nil {
		t.Error("zero ttl accepted")
	}
}
