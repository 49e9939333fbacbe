package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

const canary = "sk-canary-7f3a91c2-do-not-store"

func sampleRegistration(name string) Registration {
	return Registration{
		Name:      name,
		Record:    json.RawMessage(`{"url":"https://mcp.example.com/mcp","transport":"http"}`),
		Secrets:   map[string]string{"Authorization": "Bearer " + canary, "X-Api-Key": "k2-" + canary},
		CreatedBy: "U1",
	}
}

func TestRegistrationRoundTripEncrypted(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1)})
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	want := []Registration{sampleRegistration("docs"), {Name: "plain", Record: json.RawMessage(`{"url":"https://x.example/mcp"}`)}}
	for _, r := range want {
		if err := s.PutRegistration(ctx, team, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Registrations(ctx, team)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Registration{}, "Created"), cmpopts.IgnoreUnexported(Registration{}), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Registrations (-want +got):\n%s", diff)
	}
	one, err := s.Registration(ctx, team, "docs")
	if err != nil || one.Secrets["Authorization"] != "Bearer "+canary {
		t.Errorf("Registration(docs) = %+v, %v", one, err)
	}
	// Nothing in Redis holds the secret in clear.
	for _, k := range scanKeys(t, s) {
		dump := s.rdb.HGetAll(ctx, k).String() + s.rdb.Get(ctx, k).String()
		if strings.Contains(dump, canary) {
			t.Errorf("key %s holds the secret in clear", k)
		}
	}
	// Another workspace sees nothing.
	if other, err := s.Registrations(ctx, "TOTHER"+randomID()); err != nil || len(other) != 0 {
		t.Errorf("another workspace's Registrations = %v, %v; want none", other, err)
	}
	if err := s.DeleteRegistration(ctx, team, "docs"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Registration(ctx, team, "docs"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after delete: %v, want ErrNotFound", err)
	}
	if err := s.DeleteRegistration(ctx, team, "docs"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
}

// TestRegistrationCiphertextIsBound moves sealed records where they do not
// belong: another workspace, another server name, another field.
func TestRegistrationCiphertextIsBound(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1)})
	ctx := ctxT(t)
	teamA, teamB := "TA"+strings.ToUpper(randomID()), "TB"+strings.ToUpper(randomID())
	if err := s.PutRegistration(ctx, teamA, sampleRegistration("docs")); err != nil {
		t.Fatal(err)
	}
	raw := s.rdb.HGet(ctx, s.k.registrations(teamA), "docs").Val()

	var st storedRegistration
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	renamed := st
	renamed.Name = "wiki"
	renamedJSON, _ := json.Marshal(renamed)
	swapped := st
	swapped.Name = "docs2"
	swapped.Secrets = map[string]sealed{"Authorization": st.Secrets["X-Api-Key"], "X-Api-Key": st.Secrets["Authorization"]}
	swappedJSON, _ := json.Marshal(swapped)

	tests := []struct {
		name, team, server, value string
	}{
		{"copied to another workspace", teamB, "docs", raw},
		{"renamed to another server", teamA, "wiki", string(renamedJSON)},
		{"fields swapped", teamA, "docs2", string(swappedJSON)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.rdb.HSet(ctx, s.k.registrations(tc.team), tc.server, tc.value)
			_, err := s.Registration(ctx, tc.team, tc.server)
			if err == nil || errors.Is(err, ErrNoSecretKey) || !strings.Contains(err.Error(), "does not open") {
				t.Errorf("opening a moved record: err = %v, want a decryption failure", err)
			}
			if err != nil && strings.Contains(err.Error(), canary) {
				t.Errorf("error leaks the secret: %v", err)
			}
		})
	}
}

func TestRegistrationKeyRotation(t *testing.T) {
	oldKey, newKey := testKey(1), testKey(2)
	s1 := newStore(t, Options{SecretKey: oldKey})
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	if err := s1.PutRegistration(ctx, team, sampleRegistration("docs")); err != nil {
		t.Fatal(err)
	}

	// New key, old key kept for reading.
	s2 := peer(t, s1, Options{SecretKey: newKey, OldSecretKeys: map[string][]byte{KeyID(oldKey): oldKey}})
	r, err := s2.Registration(ctx, team, "docs")
	if err != nil || r.Secrets["Authorization"] != "Bearer "+canary {
		t.Fatalf("read after rotation = %+v, %v", r, err)
	}
	// Without the old key the record cannot be opened, and says why.
	s3 := peer(t, s1, Options{SecretKey: newKey})
	if _, err := s3.Registration(ctx, team, "docs"); !errors.Is(err, ErrNoSecretKey) || !strings.Contains(err.Error(), KeyID(oldKey)) {
		t.Errorf("read without the old key: err = %v, want ErrNoSecretKey naming %s", err, KeyID(oldKey))
	}
	// Rewriting reseals with the new key; then the new key alone suffices.
	if err := s2.PutRegistration(ctx, team, r); err != nil {
		t.Fatal(err)
	}
	if r3, err := s3.Registration(ctx, team, "docs"); err != nil || r3.Secrets["X-Api-Key"] != "k2-"+canary {
		t.Errorf("read of the resealed record with the new key only = %+v, %v", r3, err)
	}
}

func TestRegistrationWithoutSecretKey(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	if err := s.PutRegistration(ctx, team, sampleRegistration("docs")); !errors.Is(err, ErrNoSecretKey) {
		t.Errorf("Put with secrets and no key: err = %v, want ErrNoSecretKey", err)
	}
	plain := Registration{Name: "plain", Record: json.RawMessage(`{}`)}
	if err := s.PutRegistration(ctx, team, plain); err != nil {
		t.Errorf("Put without secrets and no key: %v", err)
	}
	if _, err := s.Registrations(ctx, team); err != nil {
		t.Errorf("Registrations without secrets: %v", err)
	}
	keyed := peer(t, s, Options{SecretKey: testKey(3)})
	if err := keyed.PutRegistration(ctx, team, sampleRegistration("docs")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Registrations(ctx, team); !errors.Is(err, ErrNoSecretKey) {
		t.Errorf("listing sealed records without a key: err = %v, want ErrNoSecretKey", err)
	}
}

func TestRegistrationBadInput(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1)})
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	for _, r := range []Registration{{Name: ""}, {Name: "a:b"}, {Name: "x", Record: json.RawMessage(`{`)}} {
		if err := s.PutRegistration(ctx, team, r); err == nil {
			t.Errorf("PutRegistration(%+v): want an error", r)
		}
	}
	s.rdb.HSet(ctx, s.k.registrations(team), "broken", "{nope")
	if _, err := s.Registrations(ctx, team); err == nil || !strings.Contains(err.Error(), s.k.registrations(team)) {
		t.Errorf("corrupt registration: err = %v, want one naming the key", err)
	}
}

func TestSecretKeyDecoding(t *testing.T) {
	tests := []struct {
		in      string
		wantErr bool
	}{
		{"AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=", false},
		{"AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE", false},
		{"  AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n", false},
		{"AQEB", true},
		{"not base64!", true},
		{"", true},
	}
	for _, tc := range tests {
		k, err := DecodeSecretKey(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("DecodeSecretKey(%q) err = %v, wantErr %v", tc.in, err, tc.wantErr)
		}
		if err == nil && !bytes.Equal(k, testKey(1)) {
			t.Errorf("DecodeSecretKey(%q) = %x", tc.in, k)
		}
	}
	if KeyID(testKey(1)) == KeyID(testKey(2)) {
		t.Error("KeyID collides for different keys")
	}
	if _, err := Open(ctxT(t), Options{SecretKey: []byte("short")}); err == nil {
		t.Error("Open with a short key: want an error")
	}
}

func TestToolPins(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	if pins, err := s.ToolPins(ctx, team, "docs"); err != nil || len(pins) != 0 {
		t.Fatalf("ToolPins before any = %v, %v", pins, err)
	}
	want := map[string]string{"search": "sha256:1", "fetch": "sha256:2"}
	if err := s.PutToolPins(ctx, team, "docs", want); err != nil {
		t.Fatal(err)
	}
	got, err := s.ToolPins(ctx, team, "docs")
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("ToolPins = %v, %v; want %v", got, err, want)
	}
	// Replace drops tools no longer pinned.
	if err := s.PutToolPins(ctx, team, "docs", map[string]string{"search": "sha256:3"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ToolPins(ctx, team, "docs"); len(got) != 1 || got["search"] != "sha256:3" {
		t.Errorf("after replace = %v", got)
	}
	big := map[string]string{}
	for i := range MaxToolPins + 1 {
		big[strings.Repeat("t", 1+i%7)+randomID()] = "h"
	}
	if err := s.PutToolPins(ctx, team, "docs", big); !errors.Is(err, ErrTooMany) {
		t.Errorf("too many pins: err = %v, want ErrTooMany", err)
	}
}

func TestRegistrationRedacted(t *testing.T) {
	r := sampleRegistration("docs")
	var buf strings.Builder
	newTextLogger(&buf).Info("registered", "reg", r)
	for _, out := range []string{fmt.Sprint(r), fmt.Sprintf("%+v", r), fmt.Sprintf("%#v", r), fmt.Sprintf("%s", r), buf.String()} {
		if strings.Contains(out, canary) {
			t.Errorf("secret in output: %s", out)
		}
		if !strings.Contains(out, "Authorization") {
			t.Errorf("output %q does not name the secret fields", out)
		}
	}
}
