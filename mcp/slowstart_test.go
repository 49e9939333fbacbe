package mcp

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/agent/servers"
)

// runSlowServer is a stdio server that takes BOBBIN_SLOW_SECS to start,
// like a cold npx download: meanwhile it holds a half-written file in
// BOBBIN_SLOW_DIR, which SIGTERM completes before it exits (SIGKILL would
// leave it half-written).
func runSlowServer() int {
	dir := os.Getenv("BOBBIN_SLOW_DIR")
	secs, _ := strconv.Atoi(os.Getenv("BOBBIN_SLOW_SECS"))
	partial, complete := filepath.Join(dir, "partial"), filepath.Join(dir, "complete")
	if err := os.WriteFile(partial, []byte("half"), 0o600); err != nil {
		return 1
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	select {
	case <-term:
		time.Sleep(300 * time.Millisecond) // cleaning up takes a moment
		_ = os.Rename(partial, complete)
		return 0
	case <-time.After(time.Duration(secs) * time.Second):
	}
	_ = os.Rename(partial, complete)
	signal.Stop(term)
	if err := newModernServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

func slowServer(t *testing.T, name string, secs int) (ServerConfig, string) {
	dir := t.TempDir()
	cfg := testServerConfig(t, name, "slow", map[string]string{"BOBBIN_SLOW_DIR": dir, "BOBBIN_SLOW_SECS": strconv.Itoa(secs)})
	cfg.StartupTimeout = time.Minute
	return cfg, dir
}

// TestSlowStarterIsNotAFailure: a stdio server that takes 15 s to start
// is "starting" meanwhile, not failed; a turn meanwhile gets the ready
// servers' tools within about ToolWait, and is told which server is not
// ready; once it is up its tools are offered.
func TestSlowStarterIsNotAFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 15 s")
	}
	slow, _ := slowServer(t, "slow", 15)
	cfg := &Config{Servers: []ServerConfig{slow, {Name: "demo", Builtin: BuiltinDemo}}}
	m := newTestManager(t, cfg, func(o *Options) { o.ToolWait = 2 * time.Second; o.ProbeTimeout = 2 * time.Second })
	ctx := context.Background()

	start := time.Now()
	tools, notReady, err := m.ToolsReport(ctx, Access{Team: "T1"})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the first turn's tools came after %s while slow was starting", took.Round(time.Millisecond))
	if got := toolNames(tools); !slices.Equal(got, []string{"demo__add_note", "demo__list_notes"}) {
		t.Errorf("tools while slow starts = %v; want the demo server's", got)
	}
	if len(notReady) != 1 || notReady[0] != (servers.NotReady{Server: "slow", State: StateStarting}) {
		t.Errorf("not ready = %+v; want slow starting", notReady)
	}
	// Not a performance bound: the turn must not wait for the 15 s start
	// (nor the 2 s probe budget three times over).
	if took > 10*time.Second {
		t.Errorf("ToolsReport took %s; want about ToolWait (2 s)", took)
	}
	if st := statusOf(t, m.Manager, "T1", "slow"); st.State != StateStarting || st.Error != "" {
		t.Errorf("status while starting = %+v", st)
	}
	// Well past the probe timeout (2 s) the server is still starting, not failed.
	time.Sleep(3 * time.Second)
	if st := statusOf(t, m.Manager, "T1", "slow"); st.State != StateStarting {
		t.Errorf("status after the probe timeout = %+v; want starting", st)
	}
	waitFor(t, func() bool {
		tools, notReady, err := m.ToolsReport(ctx, Access{Team: "T1"})
		return err == nil && len(notReady) == 0 && slices.Contains(toolNames(tools), "slow__echo")
	})
	t.Logf("slow's tools are offered %s after the first turn", time.Since(start).Round(time.Millisecond))
	if st := statusOf(t, m.Manager, "T1", "slow"); st.State != StateConnected {
		t.Errorf("status once up = %+v", st)
	}
}

// TestStoppedMidStartLeavesFilesIntact: closing the Manager while a
// server is still starting terminates its process group with SIGTERM
// first, so it can finish what it was writing.
func TestStoppedMidStartLeavesFilesIntact(t *testing.T) {
	slow, dir := slowServer(t, "slow", 30)
	m := NewManager(Options{Config: &Config{Servers: []ServerConfig{slow}}, Getenv: testGetenv(nil), ToolWait: 100 * time.Millisecond})
	if _, notReady, err := m.ToolsReport(context.Background(), Access{Team: "T1"}); err != nil || len(notReady) != 1 {
		t.Fatalf("ToolsReport: %v, %v", notReady, err)
	}
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(dir, "partial")); return err == nil })
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "complete")); err != nil {
		t.Errorf("the server's file was left half-written: %v", err)
	}
}

// A failed server's status says what failed and what to do, then the
// detail.
func TestFailedServerExplained(t *testing.T) {
	cfg := &Config{Servers: []ServerConfig{{Name: "gone", Command: []string{"/nonexistent/bobbin-no-such-server"}}}}
	m := newTestManager(t, cfg, nil)
	st := statusOf(t, m.Manager, "T1", "gone")
	if st.State != StateFailed || !startsWith(st.Error, `Could not start: the command "/nonexistent/bobbin-no-such-server" was not found.`) {
		t.Errorf("status = %+v", st)
	}
}

func startsWith(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }
