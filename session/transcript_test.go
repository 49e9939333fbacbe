package session

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/bobbinbot/bobbin/provider"
)

func sampleMessages() []provider.Message {
	return []provider.Message{
		{Role: provider.RoleSystem, Content: "You are Bobbin."},
		{Role: provider.RoleUser, Content: "héllo <@U1> \u2028 \"quoted\"", UserID: "U1", UserName: "ann", Meta: map[string]string{"ts": "1700000000.000100"}},
		{Role: provider.RoleAssistant, Content: "checking", Reasoning: []provider.Reasoning{{Text: "think", Signature: "sig=="}, {Redacted: "opaque"}},
			ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "search", Arguments: `{"q":"x"`}}},
		{Role: provider.RoleTool, ToolCallID: "call_1", ToolName: "search", Content: "error: bad", IsError: true},
		{Role: provider.RoleAssistant, Content: "partial", Interrupted: true},
		{Role: provider.RoleSystem, Content: "summary", Summary: true},
		{Role: provider.RoleUser, Content: "what does this error mean?", UserID: "U2", Parts: []provider.Part{
			{Type: provider.PartImage, File: &provider.FileRef{ID: "F07ABCDEF12", Name: "Screenshot 2026-01-05 at 10.12.44.png", MimeType: "image/png",
				Size: 1 << 20, SHA256: strings.Repeat("ab", 32), Width: 1568, Height: 882,
				URL: "https://files.slack.com/files-pri/T0123ABCD-F07ABCDEF12/download/screenshot_2026-01-05_at_10.12.44.png"}},
			{Type: provider.PartDocument, File: &provider.FileRef{ID: "F2", Name: "spec.pdf", MimeType: "application/pdf", Size: 20480, Pages: 3}},
			{Type: provider.PartTextFile, File: &provider.FileRef{ID: "F3", Name: "app.log", MimeType: "text/plain", Size: 12}, Text: "line 1\n\tline 2 é"},
			{Type: provider.PartNote, File: &provider.FileRef{Name: "build.zip", MimeType: "application/zip", Size: 9}, Text: "unsupported file type"},
			{Type: provider.PartNote, Text: "bare note"},
		}},
		{Role: provider.RoleTool, ToolCallID: "call_2", ToolName: "shot", Content: "taken", Parts: []provider.Part{
			{Type: provider.PartImage, File: &provider.FileRef{MimeType: "image/jpeg", Size: 5000, SHA256: "00ff", Width: 10, Height: 20, Source: "tool shot"}}}},
	}
}

func TestTranscriptRoundTrip(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()

	if _, _, err := s.Load(ctx, k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Load of a new thread: err = %v, want ErrNotFound", err)
	}
	if ok, err := s.Exists(ctx, k); err != nil || ok {
		t.Fatalf("Exists of a new thread = %v, %v; want false, nil", ok, err)
	}

	l, err := s.Acquire(ctx, k, "r1")
	if err != nil {
		t.Fatal(err)
	}
	msgs := sampleMessages()
	if err := s.Append(ctx, k, l.Token(), msgs[:2]...); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs[2:] {
		if err := s.Append(ctx, k, l.Token(), m); err != nil {
			t.Fatal(err)
		}
	}
	meta := Meta{Model: "m1", System: "sys", Usage: provider.Usage{InputTokens: 10, OutputTokens: 3, Known: true},
		Calibration: 1.25, AnchorInput: 100, AnchorMessages: 4, TurnID: "turn-1", RequesterID: "U1", ReplyTS: "1700000001.000200",
		Phase: "tools", Extra: map[string]string{"a": "b"}}
	if err := s.SaveMeta(ctx, k, l.Token(), meta); err != nil {
		t.Fatal(err)
	}
	if err := s.Grant(ctx, k, "srv.search"); err != nil {
		t.Fatal(err)
	}

	gotMeta, got, err := s.Load(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(msgs, got); diff != "" {
		t.Errorf("transcript mismatch (-want +got):\n%s", diff)
	}
	meta.Grants = []string{"srv.search"}
	if diff := cmp.Diff(meta, gotMeta, cmpopts.IgnoreFields(Meta{}, "Created", "Updated")); diff != "" {
		t.Errorf("meta mismatch (-want +got):\n%s", diff)
	}
	if gotMeta.Created.IsZero() || gotMeta.Updated.Before(gotMeta.Created) {
		t.Errorf("Created/Updated = %v/%v", gotMeta.Created, gotMeta.Updated)
	}

	// Compaction replaces atomically.
	compacted := []provider.Message{{Role: provider.RoleSystem, Content: "sum", Summary: true}, msgs[4]}
	if err := s.Replace(ctx, k, l.Token(), compacted); err != nil {
		t.Fatal(err)
	}
	_, got, err = s.Load(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(compacted, got); diff != "" {
		t.Errorf("after Replace (-want +got):\n%s", diff)
	}

	if ok, err := s.HasGrant(ctx, k, "srv.search"); err != nil || !ok {
		t.Errorf("HasGrant before revoke = %v, %v; want true", ok, err)
	}
	if err := s.RevokeGrant(ctx, k, "srv.search"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.HasGrant(ctx, k, "srv.search"); err != nil || ok {
		t.Errorf("HasGrant after revoke = %v, %v; want false", ok, err)
	}
	gotMeta, _, _ = s.Load(ctx, k)
	if len(gotMeta.Grants) != 0 {
		t.Errorf("grants after revoke = %v, want none", gotMeta.Grants)
	}
	if ok, err := s.Exists(ctx, k); err != nil || !ok {
		t.Errorf("Exists = %v, %v; want true", ok, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLargeTranscriptReplace(t *testing.T) {
	// More arguments than Lua's unpack limit would allow in one call.
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	l, err := s.Acquire(ctx, k, "r1")
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]provider.Message, 9000)
	for i := range msgs {
		msgs[i] = provider.Message{Role: provider.RoleUser, Content: fmt.Sprint(i)}
	}
	if err := s.Replace(ctx, k, l.Token(), msgs); err != nil {
		t.Fatal(err)
	}
	_, got, err := s.Load(ctx, k)
	if err != nil || len(got) != len(msgs) || got[8999].Content != "8999" {
		t.Fatalf("Load: %d messages, err %v", len(got), err)
	}
}

func TestCorruptDataNamesKey(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	l, err := s.Acquire(ctx, k, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, k, l.Token(), provider.Message{Role: provider.RoleUser, Content: "ok"}); err != nil {
		t.Fatal(err)
	}
	tk := s.k.thread(k)
	s.rdb.RPush(ctx, tk.msgs, "{not json")
	_, _, err = s.Load(ctx, k)
	if err == nil || !strings.Contains(err.Error(), tk.msgs) || !strings.Contains(err.Error(), "message 1") {
		t.Errorf("Load with a corrupt message: err = %v, want one naming %s and index 1", err, tk.msgs)
	}
	// Appending does not repair or drop the corrupt element.
	if err := s.Append(ctx, k, l.Token(), provider.Message{Role: provider.RoleUser, Content: "more"}); err != nil {
		t.Fatal(err)
	}
	if n := s.rdb.LLen(ctx, tk.msgs).Val(); n != 3 {
		t.Errorf("LLEN = %d, want 3 (nothing dropped)", n)
	}

	k2 := testThread()
	s.rdb.Set(ctx, s.k.thread(k2).meta, "[]garbage", 0)
	defer s.rdb.Del(ctx, s.k.thread(k2).meta)
	if _, _, err := s.Load(ctx, k2); err == nil || !strings.Contains(err.Error(), s.k.thread(k2).meta) {
		t.Errorf("Load with corrupt meta: err = %v, want one naming the key", err)
	}
}

func TestBadThreadKeys(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	for _, k := range []ThreadKey{{}, {"T1", "C1", ""}, {"T1", "C:1", "1.2"}, {"T{1}", "C1", "1.2"}, {"T1", "C1", "1 2"}} {
		if _, _, err := s.Load(ctx, k); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Load(%+v): err = %v, want a validation error", k, err)
		}
		if _, err := s.Acquire(ctx, k, "r"); err == nil {
			t.Errorf("Acquire(%+v): want a validation error", k)
		}
	}
}

func FuzzParseThreadKey(f *testing.F) {
	for _, s := range []string{"T1:C1:1700000000.000100", "", ":::", "T1:C1", "a:b:c:d", "T{1}:C:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := parseThreadKey(s)
		if err != nil {
			return
		}
		if k.String() != s {
			t.Errorf("parseThreadKey(%q).String() = %q", s, k.String())
		}
		if err := k.validate(); err != nil {
			t.Errorf("parsed key %q does not validate: %v", s, err)
		}
	})
}

// TestPartsStoredWithoutBytes: a message whose image carries its bytes is
// stored as a reference (no base64), and loads back with every field of
// the reference.
func TestPartsStoredWithoutBytes(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	l, err := s.Acquire(ctx, k, "r1")
	if err != nil {
		t.Fatal(err)
	}
	m := sampleMessages()[6]
	withBytes := m
	withBytes.Parts = append([]provider.Part(nil), m.Parts...)
	withBytes.Parts[0].Data = bytes.Repeat([]byte("\x89PNG"), 1<<18)
	if err := s.Append(ctx, k, l.Token(), withBytes); err != nil {
		t.Fatal(err)
	}
	raw, err := s.rdb.LIndex(ctx, s.k.thread(k).msgs, 0).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 2048 || strings.Contains(raw, "iVBOR") {
		t.Errorf("stored message is %d bytes: %.300s", len(raw), raw)
	}
	_, got, err := s.Load(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]provider.Message{m}, got); diff != "" {
		t.Errorf("loaded (-want +got):\n%s", diff)
	}
}
