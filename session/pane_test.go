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

// TestPersonTitle: a person's title of a session is recorded, the newest
// report wins whatever order they arrive in, and the record expires
// within SessionTTL.
func TestPersonTitle(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := ThreadKey{Team: "T1", Channel: "C1", ThreadTS: "1782234671.392669"}
	if _, err := s.PersonTitle(ctx, k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("PersonTitle before any = %v, want ErrNotFound", err)
	}
	first := PersonTitle{User: "U1", Title: "Scuba diving research", EventTS: "1783536983.783769"}
	later := PersonTitle{User: "U2", Title: "Bora Bora trip prep", EventTS: "1783537000.000100"}
	for _, step := range []struct {
		pt     PersonTitle
		stored bool
		want   string
	}{
		{first, true, "Scuba diving research"},
		{later, true, "Bora Bora trip prep"},
		{first, false, "Bora Bora trip prep"}, // a redelivered older report
	} {
		stored, err := s.SetPersonTitle(ctx, k, step.pt)
		if err != nil || stored != step.stored {
			t.Fatalf("SetPersonTitle(%q) = %v, %v; want stored %v", step.pt.Title, stored, err, step.stored)
		}
		got, err := s.PersonTitle(ctx, k)
		if err != nil || got.Title != step.want {
			t.Fatalf("PersonTitle = %+v, %v; want %q", got, err, step.want)
		}
	}
	if got, _ := s.PersonTitle(ctx, k); got.User != "U2" || got.EventTS != later.EventTS {
		t.Errorf("PersonTitle = %+v, want the later report whole", got)
	}
	ttl, err := s.rdb.PTTL(ctx, s.k.title(k)).Result()
	if err != nil || ttl <= 0 || ttl > s.opt.SessionTTL {
		t.Errorf("person title TTL = %v, %v; want (0, SessionTTL]", ttl, err)
	}
	if _, err := s.SetPersonTitle(ctx, ThreadKey{Team: "T1", Channel: "C:1", ThreadTS: "1"}, first); err == nil {
		t.Error("malformed thread key accepted")
	}
}
