package install

import (
	"context"
	"slices"
	"testing"

	"github.com/bobbinbot/bobbin/session"
)

// memStore is a Store of installations in memory.
type memStore struct {
	Store // the methods these tests do not use panic
	insts map[string]session.Installation
	alias map[string]string
}

func (s *memStore) Installation(_ context.Context, id string) (session.Installation, error) {
	in, ok := s.insts[id]
	if !ok {
		return in, session.ErrNotFound
	}
	return in, nil
}

func (s *memStore) DeleteInstallation(_ context.Context, id string) ([]string, error) {
	delete(s.insts, id)
	var teams []string
	for t, v := range s.alias {
		if v == id {
			teams = append(teams, t)
			delete(s.alias, t)
		}
	}
	slices.Sort(teams)
	return teams, nil
}

func (s *memStore) InstallAlias(_ context.Context, team string) (string, error) {
	return s.alias[team], nil
}

func (s *memStore) PutInstallAlias(_ context.Context, team, id string) error {
	s.alias[team] = id
	return nil
}

// TestAdmitAndUninstall: an org-wide installation serves the org's teams
// (recorded as aliases); its uninstall retires the org and those teams,
// after which their envelopes are no longer admitted. The pinned token's
// workspace is always admitted.
func TestAdmitAndUninstall(t *testing.T) {
	ctx := context.Background()
	s := &memStore{insts: map[string]session.Installation{
		"E1": {EnterpriseID: "E1", OrgWide: true, BotToken: "xoxb-org"},
		"TA": {TeamID: "TA", BotToken: "xoxb-a"},
	}, alias: map[string]string{}}
	env, _ := pinned()
	var events []string
	env.Count = func(e string) { events = append(events, e) }
	in := New(s, Options{}, env)
	for _, tt := range []struct {
		ref  Ref
		want bool
	}{
		{Ref{Team: "TPIN"}, true},
		{Ref{Team: "TA"}, true},
		{Ref{Team: "T1", Enterprise: "E1", Org: true}, true},
		{Ref{Team: "T2", Enterprise: "E1"}, true},
		{Ref{Team: "TX"}, false},
	} {
		if ok, err := in.Admit(ctx, tt.ref); ok != tt.want || err != nil {
			t.Errorf("Admit(%+v) = %v, %v; want %v", tt.ref, ok, err, tt.want)
		}
	}
	retire, removed, err := in.Uninstall(ctx, "T1", "E1", "app_uninstalled")
	if err != nil || !removed || !slices.Equal(retire, []string{"E1", "T1", "T2"}) {
		t.Fatalf("Uninstall = %v, %v, %v", retire, removed, err)
	}
	in.mu.Lock()
	clear(in.missed) // past installMissTTL
	in.mu.Unlock()
	if ok, err := in.Admit(ctx, Ref{Team: "T2", Enterprise: "E1"}); ok || err != nil {
		t.Errorf("Admit after uninstall = %v, %v", ok, err)
	}
	if _, removed, err := in.Uninstall(ctx, "TX", "", "tokens_revoked"); removed || err != nil {
		t.Errorf("Uninstall of a team without installation = %v, %v", removed, err)
	}
	if !slices.Equal(events, []string{"uninstalled"}) {
		t.Errorf("events = %v", events)
	}
	if tok, err := in.Token(ctx, "TA"); tok != "xoxb-a" || err != nil {
		t.Errorf("Token(TA) = %q, %v", tok, err)
	}
	if tok, err := in.Token(ctx, "TPIN"); tok != "xoxb-pinned" || err != nil {
		t.Errorf("Token(TPIN) = %q, %v", tok, err)
	}
	if _, err := in.Token(ctx, "TX"); err == nil {
		t.Error("Token(TX): no error for a workspace without installation")
	}
}
