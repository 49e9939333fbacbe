package session

import (
	"errors"
	"testing"
)

// TestPaneContext: the newest report wins whatever order they arrive in,
// and the record expires with the session.
func TestPaneContext(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := ThreadKey{Team: "T1", Channel: "D1", ThreadTS: "1726133698.626339"}
	if _, err := s.PaneContext(ctx, k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("PaneContext before any = %v, want ErrNotFound", err)
	}
	started := PaneContext{ChannelID: "C222", TeamID: "T1", EventTS: "1726133698.665188"}
	changed := PaneContext{ChannelID: "C333", TeamID: "T1", EventTS: "1726133712.000100"}
	for _, step := range []struct {
		c      PaneContext
		stored bool
		want   string
	}{
		{started, true, "C222"},
		{changed, true, "C333"},
		{started, false, "C333"}, // a redelivered older report
		{changed, true, "C333"},  // the same one again is harmless
	} {
		stored, err := s.SetPaneContext(ctx, k, step.c)
		if err != nil || stored != step.stored {
			t.Fatalf("SetPaneContext(%s) = %v, %v; want stored %v", step.c.ChannelID, stored, err, step.stored)
		}
		got, err := s.PaneContext(ctx, k)
		if err != nil || got.ChannelID != step.want {
			t.Fatalf("PaneContext = %+v, %v; want channel %s", got, err, step.want)
		}
	}
	ttl, err := s.rdb.PTTL(ctx, s.k.pane(k)).Result()
	if err != nil || ttl <= 0 || ttl > s.opt.SessionTTL {
		t.Errorf("pane context TTL = %v, %v; want (0, SessionTTL]", ttl, err)
	}
	if _, err := s.SetPaneContext(ctx, ThreadKey{Team: "T1", Channel: "D:1", ThreadTS: "1"}, started); err == nil {
		t.Error("malformed thread key accepted")
	}
}
