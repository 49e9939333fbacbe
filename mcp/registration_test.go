package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bobbinbot/bobbin/agent/servers"
)

// TestRegistrationRecord: a stored record decodes to its URL, headers
// (values from the secrets), auth and scope; a damaged one is an error
// (moved from the bot with the record).
func TestRegistrationRecord(t *testing.T) {
	rec := []byte(`{"v":1,"url":"https://h/mcp","headers":["Authorization"],"tools":["a"]}`)
	r, err := DecodeRegistration(StoredRegistration{Name: "x", Record: rec, Secrets: map[string]string{"Authorization": "Bearer s"}})
	if err != nil || r.URL != "https://h/mcp" || r.Headers["Authorization"] != "Bearer s" || len(r.Headers) != 1 || !r.Scope.IsZero() {
		t.Errorf("DecodeRegistration = %+v, %v", r, err)
	}
	for _, bad := range []StoredRegistration{
		{Name: "x", Record: []byte(`{"v":1}`)},
		{Name: "x", Record: []byte(`not json`)},
		{Name: "x", Record: rec}, // secret missing
		{Name: "x", Record: json.RawMessage(`{"url":"https://x.example/mcp","scope":{"channels":"C1"}}`)},
	} {
		if _, err := DecodeRegistration(bad); !errors.Is(err, servers.ErrBadRecord) {
			t.Errorf("DecodeRegistration(%s): %v, want ErrBadRecord", bad.Record, err)
		}
	}
	dm := true
	want := Scope{Channels: []string{"C1"}, Usergroups: []string{"S1"}, DM: &dm}
	raw, _ := json.Marshal(map[string]any{"v": 1, "url": "https://x.example/mcp", "auth": "user", "scope": want})
	r, err = DecodeRegistration(StoredRegistration{Name: "x", Record: raw, CreatedBy: "UADMIN"})
	if err != nil || !cmp.Equal(r.Scope, want) || r.Auth != AuthUser || r.CreatedBy != "UADMIN" {
		t.Errorf("scoped record = %+v, %v", r, err)
	}
	// A preset is stored by name only, and read back.
	st, err := EncodeRegistration(Registered{Name: "slack", URL: "https://mcp.slack.com/mcp", Auth: AuthUser, Preset: servers.PresetSlack})
	if err != nil || string(st.Record) != `{"v":1,"url":"https://mcp.slack.com/mcp","auth":"user","preset":"slack"}` {
		t.Errorf("preset record %s, %v", st.Record, err)
	}
	if r, err := DecodeRegistration(st); err != nil || r.Preset != servers.PresetSlack {
		t.Errorf("preset record read back as %+v, %v", r, err)
	}
}

// TestRegistrationBytes: the JSON stored in Redis is what the bot wrote
// before the record moved to mcp: a new record's fields in their order,
// and a scope change rewriting the object with sorted keys and keeping
// fields it does not know.
func TestRegistrationBytes(t *testing.T) {
	s, err := EncodeRegistration(Registered{Name: "x", URL: "https://h/mcp", Tools: []string{"a", "b"}, Auth: AuthWorkspace,
		Headers: map[string]string{"X-Key": "k", "Authorization": "Bearer s"}, CreatedBy: "UADMIN"})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"v":1,"url":"https://h/mcp","headers":["Authorization","X-Key"],"tools":["a","b"],"auth":"workspace"}`
	if string(s.Record) != want || s.Secrets["X-Key"] != "k" || s.CreatedBy != "UADMIN" {
		t.Errorf("EncodeRegistration = %s %v", s.Record, s)
	}
	plain, _ := EncodeRegistration(Registered{Name: "y", URL: "https://h/mcp"})
	if string(plain.Record) != `{"v":1,"url":"https://h/mcp"}` {
		t.Errorf("a record without headers, tools or auth = %s", plain.Record)
	}
	off := false
	got, err := withScope(json.RawMessage(`{"v":1,"url":"https://h/mcp","future":{"x":1}}`), &Scope{Channels: []string{"C1"}, DM: &off})
	if err != nil || string(got) != `{"future":{"x":1},"scope":{"channels":["C1"],"dm":false},"url":"https://h/mcp","v":1}` {
		t.Errorf("withScope = %s, %v", got, err)
	}
	got, err = withScope(got, nil)
	if err != nil || string(got) != `{"future":{"x":1},"url":"https://h/mcp","v":1}` {
		t.Errorf("withScope(nil) = %s, %v", got, err)
	}
	if _, err := withScope(json.RawMessage(`[1]`), nil); !errors.Is(err, servers.ErrBadRecord) {
		t.Errorf("withScope of a damaged record: %v", err)
	}
}

// TestRegisterThroughManager: Register, SetScope and Unregister go
// through the store, and the store's errors reach the caller.
func TestRegisterThroughManager(t *testing.T) {
	regs := &fakeRegs{}
	m := NewManager(Options{Store: regs, Getenv: testGetenv(nil)})
	defer m.Close()
	ctx := context.Background()
	r := Registered{Name: "docs", URL: "https://docs.example/mcp", Headers: map[string]string{"Authorization": "Bearer s"}, CreatedBy: "UADMIN"}
	if err := m.Register(ctx, "T1", r); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(ctx, "T1", r); !errors.Is(err, errFakeExists) {
		t.Errorf("a second add: %v", err)
	}
	if err := m.Registered(ctx, "T1", "docs"); err != nil {
		t.Errorf("Registered: %v", err)
	}
	if err := m.Registered(ctx, "T2", "docs"); !errors.Is(err, errFakeNotFound) {
		t.Errorf("Registered in another workspace: %v", err)
	}
	if err := m.SetScope(ctx, "T1", "docs", &Scope{Guests: true}); err != nil {
		t.Fatal(err)
	}
	got, err := m.loadRegistrations(ctx, "T1")
	if err != nil || len(got) != 1 || !got[0].Scope.Guests || got[0].Headers["Authorization"] != "Bearer s" || got[0].CreatedBy != "UADMIN" {
		t.Errorf("after SetScope: %+v, %v", got, err)
	}
	if err := m.SetScope(ctx, "T1", "nope", nil); !errors.Is(err, errFakeNotFound) {
		t.Errorf("SetScope of an unknown server: %v", err)
	}
	if err := m.Unregister(ctx, "T1", "docs"); err != nil {
		t.Fatal(err)
	}
	if err := m.Unregister(ctx, "T1", "docs"); !errors.Is(err, errFakeNotFound) {
		t.Errorf("a second remove: %v", err)
	}
}
