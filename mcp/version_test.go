package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/session"
)

// fakeVersions is an in-memory VersionSource.
type fakeVersions struct {
	mu    sync.Mutex
	v     map[string]int64
	err   error
	reads int
}

func (f *fakeVersions) WorkspaceVersion(_ context.Context, team string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.v[team], f.err
}

func (f *fakeVersions) bump(team string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.v == nil {
		f.v = map[string]int64{}
	}
	f.v[team]++
}

// Another replica's change applies at the next call when the workspace's
// version moved, even with a registration cache of an hour; without a move
// the cache is used (one version read, no registrations read).
func TestVersionReloadsRegistrations(t *testing.T) {
	port := startModernHTTP(t)
	vs := &fakeVersions{}
	m := newTestManager(t, nil, func(o *Options) {
		o.AllowPrivateNetworks = true
		o.RegistrationTTL = time.Hour
		o.Versions = vs
	})
	ctx := context.Background()
	if tools, err := m.Tools(ctx, "T1"); err != nil || len(tools) != 0 {
		t.Fatalf("Tools = %v, %v", toolNames(tools), err)
	}
	names := func() []string {
		t.Helper()
		tools, err := m.Tools(ctx, "T1")
		if err != nil {
			t.Fatal(err)
		}
		return toolNames(tools)
	}

	// Stored without a bump (as a replica without versions would): the
	// cache hides it.
	m.regs.set("T1", Registered{Name: "late", URL: "http://late.test:" + port + "/"})
	if got := names(); slices.Contains(got, "late__echo") {
		t.Fatalf("Tools before the version moved = %v; want the cached (empty) list", got)
	}
	// The other replica bumps the version: the next call sees the server.
	vs.bump("T1")
	if got := names(); !slices.Contains(got, "late__echo") {
		t.Fatalf("Tools after the version moved = %v; want late__echo", got)
	}
	calls := m.regs.count()
	for range 3 {
		names()
	}
	if m.regs.count() != calls {
		t.Errorf("registrations read %d more times with an unchanged version; want 0", m.regs.count()-calls)
	}
	// A scope change elsewhere: applied at the next call.
	m.regs.set("T1", Registered{Name: "late", URL: "http://late.test:" + port + "/", Scope: Scope{Channels: []string{"C9"}}})
	vs.bump("T1")
	if tools, err := m.ToolsFor(ctx, Access{Team: "T1", Channel: "C1"}); err != nil || len(tools) != 0 {
		t.Errorf("Tools in C1 after the scope moved to C9 = %v, %v; want none", toolNames(tools), err)
	}
	if tools, err := m.ToolsFor(ctx, Access{Team: "T1", Channel: "C9"}); err != nil || !slices.Contains(toolNames(tools), "late__echo") {
		t.Errorf("Tools in C9 = %v, %v; want late__echo", toolNames(tools), err)
	}
	// Removed elsewhere.
	m.regs.set("T1")
	vs.bump("T1")
	if got := names(); len(got) != 0 {
		t.Errorf("Tools after removal elsewhere = %v; want none", got)
	}
	// Another workspace's version does not reload this one.
	calls = m.regs.count()
	vs.bump("T2")
	names()
	if m.regs.count() != calls {
		t.Errorf("a bump of T2 reloaded T1's registrations")
	}
}

// When the version cannot be read, the cached registrations serve (the
// TTL stays the safety net) and the failure is logged.
func TestVersionUnavailable(t *testing.T) {
	vs := &fakeVersions{err: errors.New("redis down")}
	m := newTestManager(t, nil, func(o *Options) { o.RegistrationTTL = time.Hour; o.Versions = vs })
	ctx := context.Background()
	if _, err := m.Tools(ctx, "T1"); err != nil {
		t.Fatal(err)
	}
	calls := m.regs.count()
	if _, err := m.Tools(ctx, "T1"); err != nil {
		t.Fatal(err)
	}
	if m.regs.count() != calls {
		t.Errorf("registrations read again while the version is unavailable and the cache fresh")
	}
	if !strings.Contains(m.logs.String(), "workspace version unavailable") {
		t.Errorf("no log line about the unavailable version; logs:\n%s", m.logs.String())
	}
}

// A moved version drops the workspace's cached OAuth tokens: a person who
// disconnected on another replica is not served from this one's cache.
func TestVersionDropsCachedTokens(t *testing.T) {
	vs := &fakeVersions{}
	m := newTestManager(t, nil, func(o *Options) { o.Versions = vs })
	ctx := context.Background()
	k1, k2 := connKey{"T1", "docs", "U1"}, connKey{"T2", "docs", "U1"}
	m.oauth.mu.Lock()
	m.oauth.cache[k1], m.oauth.cache[k2] = &tokenRecord{}, &tokenRecord{}
	m.oauth.mu.Unlock()
	if _, err := m.Tools(ctx, "T1"); err != nil {
		t.Fatal(err)
	}
	if m.oauth.cached(k1) == nil {
		t.Fatal("the first load dropped cached tokens; want them kept until the version moves")
	}
	vs.bump("T1")
	if _, err := m.Tools(ctx, "T1"); err != nil {
		t.Fatal(err)
	}
	if m.oauth.cached(k1) != nil {
		t.Error("T1's cached token survived a moved version")
	}
	if m.oauth.cached(k2) == nil {
		t.Error("T2's cached token was dropped by T1's version")
	}
}

func (f *fakeRegs) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// A moved version makes the workspace's servers list their tools again at
// the next turn: pins approved on another replica (a changed tool enabled)
// apply here too, even for servers whose listing never expires.
func TestVersionRelistsTools(t *testing.T) {
	url := startLegacyHTTP(t)
	vs := &fakeVersions{}
	m := newTestManager(t, nil, func(o *Options) {
		o.AllowPrivateNetworks = true
		o.RegistrationTTL = time.Hour
		o.Versions = vs
	})
	m.regs.set("T1", Registered{Name: "srv", URL: url})
	ctx := context.Background()
	listedAt := func() time.Time {
		t.Helper()
		if _, err := m.Tools(ctx, "T1"); err != nil {
			t.Fatal(err)
		}
		m.mu.Lock()
		mt := m.teams["T1"].mounts["srv"]
		m.mu.Unlock()
		mt.mu.Lock()
		defer mt.mu.Unlock()
		return mt.listedAt
	}
	first := listedAt()
	if first.IsZero() {
		t.Fatalf("never listed: %+v\n%s", statusOf(t, m.Manager, "T1", "srv"), m.logs.String())
	}
	if again := listedAt(); !again.Equal(first) {
		t.Fatalf("listed again without a version move (%v, then %v)", first, again)
	}
	vs.bump("T1")
	if after := listedAt(); !after.After(first) {
		t.Errorf("not listed again after the version moved (%v, then %v)", first, after)
	}
}

// BenchmarkToolsForWithVersion is a turn's tool lookup with nothing
// changed: with the workspace's version read from Redis (REDIS_URL, else
// miniredis) against the cache alone.
func BenchmarkToolsForWithVersion(b *testing.B) {
	url := startLegacyHTTP(b)
	for _, withVersion := range []bool{false, true} {
		b.Run(map[bool]string{false: "cache-only", true: "version-read"}[withVersion], func(b *testing.B) {
			r := newBenchStore(b)
			m := newTestManager(b, nil, func(o *Options) {
				o.AllowPrivateNetworks = true
				o.RegistrationTTL = time.Hour
				if withVersion {
					o.Versions = r
				}
			})
			m.regs.set("T1", Registered{Name: "srv", URL: url})
			ctx := context.Background()
			if _, err := m.Tools(ctx, "T1"); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := m.Tools(ctx, "T1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// startLegacyHTTP serves the legacy test server (its tool list never
// expires) until the end of the test and returns its registered URL.
func startLegacyHTTP(t testing.TB) string {
	t.Helper()
	legacy := newLegacyServer(&lockedWriter{w: io.Discard})
	srv := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return legacy },
		&mcpsdk.StreamableHTTPOptions{DisableLocalhostProtection: true}))
	t.Cleanup(srv.Close)
	return strings.Replace(srv.URL, "127.0.0.1", "srv.test", 1) + "/mcp"
}

// newBenchStore opens a session store on REDIS_URL (else miniredis) under
// a prefix of its own.
func newBenchStore(t testing.TB) *session.Store {
	t.Helper()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		mr := miniredis.RunT(t)
		url = "redis://" + mr.Addr() + "/0"
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := session.Open(ctx, session.Options{URL: url, Prefix: "mcpbench-" + hex.EncodeToString(b[:])})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
