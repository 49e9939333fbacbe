package importcheck

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestStoreAssertions: the scan finds assertions and type switches on
// anything named like a store in non-test files, and nothing else.
func TestStoreAssertions(t *testing.T) {
	root := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a/a.go", `package a

type X interface{ M() }

type B struct{ store any }

func f(b B, opts struct{ Store any }, sessionStore any, other any) {
	_, _ = b.store.(X)
	_ = opts.Store.(X)
	switch sessionStore.(type) {
	}
	_, _ = other.(X)
	_, _ = (b.store).(X)
}
`)
	write("a/a_test.go", "package a\n\nfunc g(b B) { _, _ = b.store.(X) }\n")
	write("a/testdata/t.go", "package t\n\nfunc h(store any) { _ = store.(int) }\n")
	got := StoreAssertions(t, root)
	for i := range got {
		got[i], _ = filepath.Rel(root, got[i])
	}
	want := []string{"a/a.go:8:9", "a/a.go:9:6", "a/a.go:10:9", "a/a.go:13:9"}
	if !slices.Equal(got, want) {
		t.Errorf("found %v, want %v", got, want)
	}
}
