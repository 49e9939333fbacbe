package session

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestToolPolicies(t *testing.T) {
	s := newStore(t, Options{})
	ctx := context.Background()
	for _, r := range [][3]string{{"crm", "*", "ask"}, {"crm", "get_*", "auto private"}, {"notes", "list_notes", "reset"}, {"crm", "tmp", "deny"}} {
		if err := s.PutToolPolicy(ctx, "T1", r[0], r[1], r[2]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutToolPolicy(ctx, "T1", "crm", "tmp", ""); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.WorkspaceVersion(ctx, "T1"); v < 5 {
		t.Errorf("workspace version %d after 5 policy writes", v)
	}
	got, err := s.ToolPolicies(ctx, "T1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"crm":   {"*": "ask", "get_*": "auto private"},
		"notes": {"list_notes": "reset"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ToolPolicies (-want +got):\n%s", diff)
	}
	if other, _ := s.ToolPolicies(ctx, "T2"); len(other) != 0 {
		t.Errorf("another workspace sees %v", other)
	}
	for _, bad := range [][2]string{{"crm", "a b"}, {"cr:m", "x"}, {"crm", ""}} {
		if err := s.PutToolPolicy(ctx, "T1", bad[0], bad[1], "ask"); err == nil {
			t.Errorf("PutToolPolicy(%q, %q) succeeded", bad[0], bad[1])
		}
	}
	if err := s.PutToolPolicy(ctx, "T1", "crm", "x", "ask"); errors.Is(err, ErrTooMany) {
		t.Fatal(err)
	}
}
