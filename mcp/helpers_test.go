package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/internal/testlog"
)

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = testlog.Buffer

// fakeRegs is an in-memory RegistrationStore: set stores registrations
// in their record form, as the session store keeps them.
type fakeRegs struct {
	mu    sync.Mutex
	regs  map[string][]StoredRegistration
	calls int
}

func (f *fakeRegs) Registrations(_ context.Context, team string) ([]StoredRegistration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return slices.Clone(f.regs[team]), nil
}

func (f *fakeRegs) Registration(_ context.Context, team, name string) (StoredRegistration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.regs[team] {
		if r.Name == name {
			return r, nil
		}
	}
	return StoredRegistration{}, errFakeNotFound
}

func (f *fakeRegs) AddRegistration(_ context.Context, team string, r StoredRegistration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cur := range f.regs[team] {
		if cur.Name == r.Name {
			return errFakeExists
		}
	}
	if f.regs == nil {
		f.regs = map[string][]StoredRegistration{}
	}
	f.regs[team] = append(f.regs[team], r)
	return nil
}

func (f *fakeRegs) UpdateRegistration(_ context.Context, team, name string, update func(json.RawMessage) (json.RawMessage, error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.regs[team] {
		if r.Name == name {
			rec, err := update(r.Record)
			if err != nil {
				return err
			}
			f.regs[team][i].Record = rec
			return nil
		}
	}
	return errFakeNotFound
}

func (f *fakeRegs) DeleteRegistration(_ context.Context, team, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.regs[team] {
		if r.Name == name {
			f.regs[team] = slices.Delete(f.regs[team], i, i+1)
			return nil
		}
	}
	return errFakeNotFound
}

var (
	errFakeNotFound = errors.New("fake: not found")
	errFakeExists   = errors.New("fake: exists")
)

func (f *fakeRegs) set(team string, regs ...Registered) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.regs == nil {
		f.regs = map[string][]StoredRegistration{}
	}
	rows := make([]StoredRegistration, len(regs))
	for i, r := range regs {
		s, err := EncodeRegistration(r)
		if err != nil {
			panic(err)
		}
		rows[i] = s
	}
	f.regs[team] = rows
}

// testEnv is the bot's pretend environment: PATH and HOME for the children,
// and secrets that must never reach them.
func testGetenv(extra map[string]string) func(string) string {
	return func(k string) string {
		switch k {
		case "PATH", "HOME":
			return os.Getenv(k)
		case "SECRET_KEY":
			return "super-secret-kek"
		case "SLACK_BOT_TOKEN":
			return "xoxb-not-for-children"
		}
		return extra[k]
	}
}

// stubResolver maps every *.test name to 127.0.0.1 and nothing else: tests
// never dial a non-loopback address.
func stubResolver(_ context.Context, host string) ([]netip.Addr, error) {
	if strings.HasSuffix(host, ".test") {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, fmt.Errorf("stub resolver: unknown host %s", host)
}

type testManager struct {
	*Manager
	logs *syncBuffer
	regs *fakeRegs
}

func newTestManager(t testing.TB, cfg *Config, tweak func(*Options)) *testManager {
	t.Helper()
	logs := &syncBuffer{}
	regs := &fakeRegs{}
	opts := Options{
		Config:       cfg,
		Store:        regs,
		Getenv:       testGetenv(nil),
		Logger:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ProbeTimeout: 10 * time.Second,
		Resolver:     stubResolver,
		// Tests wait for their servers; the 2 s default is tested in
		// slowstart_test.go.
		ToolWait: time.Minute,
	}
	if tweak != nil {
		tweak(&opts)
	}
	m := NewManager(opts)
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &testManager{Manager: m, logs: logs, regs: regs}
}

func toolByName(t testing.TB, tools []agent.Tool, name string) agent.HintedTool {
	t.Helper()
	for _, tl := range tools {
		if tl.Spec().Name == name {
			return tl.(agent.HintedTool)
		}
	}
	t.Fatalf("tool %s not found in %v", name, toolNames(tools))
	return nil
}

func toolNames(tools []agent.Tool) []string {
	var out []string
	for _, tl := range tools {
		out = append(out, tl.Spec().Name)
	}
	slices.Sort(out)
	return out
}

func statusOf(t testing.TB, m *Manager, team, server string) servers.Status {
	t.Helper()
	for _, s := range m.Status(context.Background(), team) {
		if s.Name == server {
			return s
		}
	}
	t.Fatalf("no status for %s/%s", team, server)
	return servers.Status{}
}

func call(t testing.TB, tl agent.Tool, args string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return tl.Call(ctx, json.RawMessage(args))
}

// startModernHTTP serves the modern test server on 127.0.0.1 until the end
// of the test (after the test's Manager is closed: cleanups run last-in
// first-out) and returns its port.
func startModernHTTP(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(modernHTTPHandler())
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

// waitFor polls cond (for state that changes asynchronously, e.g. a
// notification); it is not a timing assertion.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
