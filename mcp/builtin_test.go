package mcp

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBuiltinDemoConfig(t *testing.T) {
	cfg, err := parseConfig("mcp.yaml", []byte("servers:\n  - name: notes\n    builtin: demo\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers[0].Builtin; got != BuiltinDemo {
		t.Fatalf("builtin = %q", got)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"servers:\n  - name: x\n    builtin: nope\n", `builtin: unknown built-in server "nope" (known: demo)`},
		{"servers:\n  - name: x\n    builtin: demo\n    url: https://example.com/mcp\n", "builtin: set one of command, url and builtin"},
		{"servers:\n  - name: x\n    builtin: demo\n    command: [ls]\n", "builtin: set one of command, url and builtin"},
		{"servers:\n  - name: x\n    builtin: demo\n    env: {A: b}\n", "env: env applies to command servers only"},
		{"servers:\n  - name: x\n    builtin: demo\n    auth: user\n", "auth: OAuth applies to url servers only"},
		{"servers:\n  - name: x\n", "or builtin: demo"},
	} {
		_, err := parseConfig("mcp.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
}

func TestBuiltinDemoServer(t *testing.T) {
	m := newTestManager(t, &Config{Servers: []ServerConfig{{Name: "demo", Builtin: BuiltinDemo}}}, nil)
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"demo__add_note", "demo__list_notes"}, toolNames(tools)); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	list, add := toolByName(t, tools, "demo__list_notes"), toolByName(t, tools, "demo__add_note")
	if h := list.Hints(); !h.ReadOnly || h.Destructive || h.OpenWorld || h.Trusted {
		t.Errorf("list_notes hints = %+v", h)
	}
	if h := add.Hints(); h.ReadOnly || h.Destructive || h.OpenWorld {
		t.Errorf("add_note hints = %+v", h)
	}
	if got, err := call(t, list, `{}`); err != nil || !strings.Contains(got, "No notes yet") {
		t.Fatalf("list_notes = %q, %v", got, err)
	}
	if got, err := call(t, add, `{"text":"buy thread"}`); err != nil || !strings.Contains(got, "Saved note 1: buy thread") {
		t.Fatalf("add_note = %q, %v", got, err)
	}
	if got, err := call(t, add, `{"text":"  "}`); err == nil && !strings.Contains(got, "empty") {
		t.Errorf("an empty note = %q, %v; want a tool error", got, err)
	}
	if got, err := call(t, list, `{}`); err != nil || !strings.Contains(got, "1. buy thread") {
		t.Fatalf("list_notes = %q, %v", got, err)
	}
	st := statusOf(t, m.Manager, "T1", "demo")
	if st.Transport != transportBuiltin || st.State != StateConnected || st.Tools != 2 {
		t.Errorf("status = %+v", st)
	}
	// Notes are per workspace.
	tools2, err := m.Tools(context.Background(), "T2")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := call(t, toolByName(t, tools2, "demo__list_notes"), `{}`); err != nil || !strings.Contains(got, "No notes yet") {
		t.Fatalf("another workspace's list_notes = %q, %v", got, err)
	}
}
