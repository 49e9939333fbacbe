package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/agent/servers"
)

func TestModernStdioServer(t *testing.T) {
	cfg := &Config{Servers: []ServerConfig{testServerConfig(t, "modern", "modern", nil)}}
	m := newTestManager(t, cfg, nil)
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"modern__delete_everything", "modern__echo"}, toolNames(tools)); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	echo := toolByName(t, tools, "modern__echo")
	got, err := call(t, echo, `{"message":"hi there"}`)
	if err != nil || got != "hi there" {
		t.Fatalf("echo = %q, %v; want \"hi there\"", got, err)
	}
	if h := echo.Hints(); !h.ReadOnly || h.Destructive || h.OpenWorld || h.Trusted || h.Server != "modern" || h.Tool != "echo" {
		t.Errorf("echo hints = %+v", h)
	}
	if h := toolByName(t, tools, "modern__delete_everything").Hints(); !h.Destructive || h.ReadOnly {
		t.Errorf("delete_everything hints = %+v", h)
	}
	if !strings.HasPrefix(echo.Spec().Description, "[modern] ") {
		t.Errorf("description %q lacks the server prefix", echo.Spec().Description)
	}
	st := statusOf(t, m.Manager, "T1", "modern")
	// The modern server rejects initialize: connecting proves no legacy fallback happened.
	if st.Era != EraModern || st.Transport != "stdio" || st.State != StateConnected || st.Tools != 2 || st.Source != "config" {
		t.Errorf("status = %+v", st)
	}
}

func TestModernHTTPServer(t *testing.T) {
	port := startModernHTTP(t)
	m := newTestManager(t, nil, func(o *Options) { o.AllowPrivateNetworks = true })
	m.regs.set("T1", Registered{Name: "remote", URL: "http://modern.test:" + port + "/"})
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := call(t, toolByName(t, tools, "remote__echo"), `{"message":"over http"}`)
	if err != nil || got != "over http" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	st := statusOf(t, m.Manager, "T1", "remote")
	if st.Era != EraModern || st.Transport != "streamable" || st.Source != "registered" {
		t.Errorf("status = %+v", st)
	}
}

func TestSSRFRefusesLoopbackRegistration(t *testing.T) {
	port := startModernHTTP(t)
	m := newTestManager(t, nil, nil) // private networks not allowed
	m.regs.set("T1", Registered{Name: "sneaky", URL: "https://rebind.test:" + port + "/"})
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 0 {
		t.Fatalf("tools = %v, want none", toolNames(tools))
	}
	st := statusOf(t, m.Manager, "T1", "sneaky")
	if st.State != StateFailed || !strings.Contains(st.Error, "address not allowed") {
		t.Errorf("status = %+v, want failed with a blocked address", st)
	}
	if _, err := m.Probe(context.Background(), "x", "https://rebind.test:"+port+"/", nil); !errors.Is(err, ErrBlockedAddress) {
		t.Errorf("Probe err = %v, want ErrBlockedAddress", err)
	}
}

func TestProbe(t *testing.T) {
	port := startModernHTTP(t)
	m := newTestManager(t, nil, func(o *Options) { o.AllowPrivateNetworks = true })
	infos, err := m.Probe(context.Background(), "docs", "http://docs.test:"+port+"/", map[string]string{"Authorization": "Bearer abc"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range infos {
		names = append(names, i.Name)
		if i.Hash == "" || len(i.InputSchema) == 0 {
			t.Errorf("info %+v lacks hash or schema", i)
		}
	}
	if diff := cmp.Diff([]string{"delete_everything", "echo"}, names); diff != "" {
		t.Errorf("probe tools (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"npx -y @evil/server", "/usr/bin/server", "stdio://x", "file:///etc/passwd"} {
		if _, err := m.Probe(context.Background(), "docs", bad, nil); err == nil {
			t.Errorf("Probe(%q) succeeded, want refusal", bad)
		}
	}
	if strings.Contains(m.logs.String(), "Bearer abc") {
		t.Error("a header value reached the log")
	}
}

func TestStdioEnvironmentAndStderr(t *testing.T) {
	sc := testServerConfig(t, "legacy", "legacy", map[string]string{"GREETING": "hello ${WHO}"})
	m := newTestManager(t, &Config{Servers: []ServerConfig{sc}}, func(o *Options) {
		o.Getenv = testGetenv(map[string]string{"WHO": "world"})
	})
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	out, err := call(t, toolByName(t, tools, "legacy__env"), `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, line := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(line, "=")
		keys = append(keys, k)
		if k == "GREETING" && v != "hello world" {
			t.Errorf("GREETING = %q, want expanded", v)
		}
	}
	slices.Sort(keys)
	if diff := cmp.Diff([]string{testServerEnv, "GREETING", "HOME", "PATH"}, keys); diff != "" {
		t.Errorf("child environment keys (-want +got):\n%s", diff)
	}
	if st := statusOf(t, m.Manager, "T1", "legacy"); st.Era != EraLegacy {
		t.Errorf("era = %q, want %s", st.Era, EraLegacy)
	}
	waitFor(t, func() bool { return strings.Contains(m.logs.String(), "legacy test server up") })
	if !strings.Contains(m.logs.String(), "server=legacy") {
		t.Errorf("stderr lines are not logged with the server name:\n%s", m.logs.String())
	}
}

func TestProbeFallback(t *testing.T) {
	for _, mode := range []string{"silent", "exit-on-probe"} {
		t.Run(mode, func(t *testing.T) {
			cfg := &Config{Servers: []ServerConfig{testServerConfig(t, "old", mode, nil)}}
			m := newTestManager(t, cfg, func(o *Options) { o.ProbeTimeout = 2 * time.Second })
			tools, err := m.Tools(context.Background(), "T1")
			if err != nil {
				t.Fatal(err)
			}
			got, err := call(t, toolByName(t, tools, "old__echo"), `{"message":"legacy"}`)
			if err != nil || got != "legacy" {
				t.Fatalf("echo = %q, %v", got, err)
			}
			if st := statusOf(t, m.Manager, "T1", "old"); st.Era != EraLegacy || st.State != StateConnected {
				t.Errorf("status = %+v, want connected at %s", st, EraLegacy)
			}
		})
	}
}

func TestCrashRestart(t *testing.T) {
	cfg := &Config{Servers: []ServerConfig{testServerConfig(t, "fragile", "legacy", nil)}}
	m := newTestManager(t, cfg, nil)
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, toolByName(t, tools, "fragile__crash"), `{}`); err == nil {
		t.Fatal("crash returned no error")
	}
	// The adapter from before the crash works again once the supervisor
	// has restarted the server.
	got, err := call(t, toolByName(t, tools, "fragile__echo"), `{"message":"back"}`)
	if err != nil || got != "back" {
		t.Fatalf("echo after crash = %q, %v", got, err)
	}
	if st := statusOf(t, m.Manager, "T1", "fragile"); st.Restarts < 1 || st.State != StateConnected {
		t.Errorf("status = %+v, want a restart and connected", st)
	}
	if !strings.Contains(m.logs.String(), "mcp server went away") {
		t.Error("the crash was not logged")
	}
}

func TestMaliciousServer(t *testing.T) {
	cfg := &Config{Servers: []ServerConfig{testServerConfig(t, "evil", "legacy", map[string]string{"RUG_PULL": "1"})}}
	m := newTestManager(t, cfg, nil)
	ctx := context.Background()
	tools, err := m.Tools(ctx, "T1")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("big result is capped", func(t *testing.T) {
		out, err := call(t, toolByName(t, tools, "evil__big"), `{}`)
		if err != nil {
			t.Fatal(err)
		}
		// Within the agent's default cap (the same 32 KiB), so the agent
		// leaves it, and this marker's count is the true one: the kept
		// bytes and the count add up to the 10 MiB the server sent.
		i := strings.LastIndex(out, "\n…[truncated ")
		var n int
		if i >= 0 {
			fmt.Sscanf(out[i:], "\n…[truncated %d bytes]", &n)
		}
		if len(out) > 32<<10 || i < 0 || i+n != 10<<20 {
			t.Errorf("output: %d bytes, tail %q; want at most %d bytes whose marker counts the rest of %d", len(out), out[max(0, len(out)-60):], 32<<10, 10<<20)
		}
	})
	t.Run("tool error", func(t *testing.T) {
		_, err := call(t, toolByName(t, tools, "evil__fail"), `{}`)
		if err == nil || !strings.Contains(err.Error(), "it failed on purpose") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("hidden instructions are flagged", func(t *testing.T) {
		infos, err := m.ServerTools(ctx, "T1", "evil")
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range infos {
			if i.Name != "helper" {
				continue
			}
			want := []string{FlagImportantTag, FlagSecrecy, FlagInstructions, FlagInvisibleUnicode, FlagSensitivePath}
			slices.Sort(want)
			if diff := cmp.Diff(want, i.Flags); diff != "" {
				t.Errorf("helper flags (-want +got):\n%s", diff)
			}
		}
	})
	t.Run("changed description disables the tool until approved", func(t *testing.T) {
		waitFor(t, func() bool {
			return slices.Contains(statusOf(t, m.Manager, "T1", "evil").Disabled, "shifty")
		})
		tools, err := m.Tools(ctx, "T1")
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(toolNames(tools), "evil__shifty") {
			t.Error("the changed tool is still offered to the model")
		}
		// The old adapter refuses too.
		if _, err := call(t, toolByName(t, tools, "evil__echo"), `{"message":"x"}`); err != nil {
			t.Errorf("echo: %v", err)
		}
		infos, err := m.Approve(ctx, "T1", "evil")
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range infos {
			if i.Disabled {
				t.Errorf("%s still disabled after Approve", i.Name)
			}
		}
		tools, err = m.Tools(ctx, "T1")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(toolByName(t, tools, "evil__shifty").Spec().Description, "evil.example") {
			t.Error("the approved description is not the new one")
		}
	})
	t.Run("a 100 MB line is an error, not memory", func(t *testing.T) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := call(t, toolByName(t, tools, "evil__flood"), `{}`)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "maximum line length") {
			t.Fatalf("flood: err = %v, want the line-length cap", err)
		}
		// Buffering the line would allocate well over 100 MB.
		if n := after.TotalAlloc - before.TotalAlloc; n > 100<<20 {
			t.Errorf("reading the flood allocated %d MB", n>>20)
		}
		// The server is restarted and usable again.
		got, err := call(t, toolByName(t, tools, "evil__echo"), `{"message":"alive"}`)
		if err != nil || got != "alive" {
			t.Errorf("echo after flood = %q, %v", got, err)
		}
	})
}

func TestCancellationReachesServer(t *testing.T) {
	cfg := &Config{Servers: []ServerConfig{testServerConfig(t, "slow", "legacy", nil)}}
	dir := t.TempDir() // before the manager: removed after the server is stopped
	m := newTestManager(t, cfg, nil)
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := toolByName(t, tools, "slow__wait").Call(ctx, json.RawMessage(fmt.Sprintf(`{"dir":%q}`, dir)))
		errc <- err
	}()
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(dir, "started")); return err == nil })
	cancel()
	if err := <-errc; err == nil {
		t.Error("cancelled call returned no error")
	}
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(dir, "cancelled")); return err == nil })
}

func TestCallTimeout(t *testing.T) {
	sc := testServerConfig(t, "slow", "legacy", nil)
	sc.Timeout = 300 * time.Millisecond
	dir := t.TempDir() // before the manager: removed after the server is stopped
	m := newTestManager(t, &Config{Servers: []ServerConfig{sc}}, nil)
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = call(t, toolByName(t, tools, "slow__wait"), fmt.Sprintf(`{"dir":%q}`, dir))
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("err = %v, want a timeout", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	cfg := &Config{Servers: []ServerConfig{testServerConfig(t, "busy", "legacy", nil)}}
	m := newTestManager(t, cfg, nil)
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	echo := toolByName(t, tools, "busy__echo")
	var wg sync.WaitGroup
	errs := make([]error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf("call %d", i)
			got, err := echo.Call(context.Background(), json.RawMessage(fmt.Sprintf(`{"message":%q}`, want)))
			if err == nil && got != want {
				err = fmt.Errorf("got %q, want %q", got, want)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, m.Manager, "T1", "busy"); st.Restarts != 0 {
		t.Errorf("restarts = %d, want one connection throughout", st.Restarts)
	}
}

func TestWorkspaceIsolation(t *testing.T) {
	port := startModernHTTP(t)
	cfg := &Config{
		Servers: []ServerConfig{testServerConfig(t, "shared", "modern", nil)},
		Workspaces: map[string]WorkspaceConfig{
			"TA": {Servers: []ServerConfig{testServerConfig(t, "alpha", "modern", nil)}},
			"TB": {Servers: []ServerConfig{testServerConfig(t, "beta", "modern", nil)}},
		},
	}
	m := newTestManager(t, cfg, func(o *Options) { o.AllowPrivateNetworks = true; o.RegistrationTTL = time.Hour })
	m.regs.set("TA", Registered{Name: "regA", URL: "http://a.test:" + port + "/"})
	ctx := context.Background()
	names := func(team string) []string {
		tools, err := m.Tools(ctx, team)
		if err != nil {
			t.Fatal(err)
		}
		return toolNames(tools)
	}
	wantA := []string{"alpha__delete_everything", "alpha__echo", "regA__delete_everything", "regA__echo", "shared__delete_everything", "shared__echo"}
	wantB := []string{"beta__delete_everything", "beta__echo", "shared__delete_everything", "shared__echo"}
	if diff := cmp.Diff(wantA, names("TA")); diff != "" {
		t.Errorf("TA tools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantB, names("TB")); diff != "" {
		t.Errorf("TB tools (-want +got):\n%s", diff)
	}
	if _, err := m.ServerTools(ctx, "TB", "regA"); !errors.Is(err, servers.ErrUnknownServer) {
		t.Errorf("TB sees regA: %v", err)
	}
	// A registration removed on another replica disappears after Invalidate
	// (or the TTL); a new one appears.
	m.regs.set("TA", Registered{Name: "regA2", URL: "http://a.test:" + port + "/"})
	m.Invalidate("TA")
	got := names("TA")
	if slices.Contains(got, "regA__echo") || !slices.Contains(got, "regA2__echo") {
		t.Errorf("after Invalidate TA tools = %v", got)
	}
}

func TestIdleClose(t *testing.T) {
	cfg := &Config{Servers: []ServerConfig{testServerConfig(t, "sleepy", "legacy", nil)}}
	m := newTestManager(t, cfg, func(o *Options) { o.IdleTimeout = 200 * time.Millisecond })
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		for _, mt := range m.allMounts() {
			mt.mu.Lock()
			c := mt.conn
			mt.mu.Unlock()
			if c != nil {
				return false
			}
		}
		return true
	})
	// A call reconnects.
	if got, err := call(t, toolByName(t, tools, "sleepy__echo"), `{"message":"awake"}`); err != nil || got != "awake" {
		t.Errorf("echo after idle close = %q, %v", got, err)
	}
}

func TestDeadServerIsLeftOut(t *testing.T) {
	cfg := &Config{Servers: []ServerConfig{
		{Name: "missing", Command: []string{"/nonexistent/mcp-server"}},
		testServerConfig(t, "ok", "modern", nil),
	}}
	m := newTestManager(t, cfg, nil)
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ok__delete_everything", "ok__echo"}, toolNames(tools)); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if st := statusOf(t, m.Manager, "T1", "missing"); st.State != StateFailed || st.Error == "" {
		t.Errorf("status = %+v", st)
	}
	if !strings.Contains(m.logs.String(), "its tools are left out") {
		t.Error("no log line for the dead server")
	}
}

func TestEmptyClientCapabilities(t *testing.T) {
	m := newTestManager(t, &Config{Servers: []ServerConfig{testServerConfig(t, "c", "legacy", nil)}}, nil)
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := call(t, toolByName(t, tools, "c__caps"), `{}`)
	want := `{"elicitation":false,"experimental":false,"roots":false,"sampling":false}`
	if err != nil || got != want {
		t.Errorf("capabilities seen by the server = %q, %v; want %s", got, err, want)
	}
}

func TestCloseKillsProcessGroup(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The server leaves a grandchild behind; Close must take it down too.
	sc := ServerConfig{Name: "parent", Command: []string{"/bin/sh", "-c", `sleep 300 & echo $! > "$PID_FILE"; exec "$SERVER"`},
		Env: map[string]string{testServerEnv: "legacy", "PID_FILE": pidFile, "SERVER": exe}}
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	m := NewManager(Options{Config: &Config{Servers: []ServerConfig{sc}}, Getenv: testGetenv(nil)})
	if _, err := m.Tools(context.Background(), "T1"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(b))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return true // gone
		}
		_, rest, _ := strings.Cut(string(stat), ") ")
		return strings.HasPrefix(rest, "Z") // killed, waiting to be reaped by init
	})
}

func TestModernToolListTTL(t *testing.T) {
	// The modern server answers ttlMs 0: every Tools call lists again and
	// still returns the same pinned tools.
	m := newTestManager(t, &Config{Servers: []ServerConfig{testServerConfig(t, "modern", "modern", nil)}}, nil)
	for range 3 {
		tools, err := m.Tools(context.Background(), "T1")
		if err != nil || len(tools) != 2 {
			t.Fatalf("Tools = %v, %v", toolNames(tools), err)
		}
	}
	if st := statusOf(t, m.Manager, "T1", "modern"); len(st.Disabled) != 0 {
		t.Errorf("disabled = %v", st.Disabled)
	}
}

func TestStderrRateLimited(t *testing.T) {
	var lines []string
	for i := range 100 {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	lines = append(lines, strings.Repeat("x", 10000))
	logs := &syncBuffer{}
	logStderr(strings.NewReader(strings.Join(lines, "\n")), "noisy", slog.New(slog.NewTextHandler(logs, nil)))
	out := logs.String()
	if n := strings.Count(out, `msg="mcp server stderr"`); n != stderrBurst {
		t.Errorf("%d stderr lines logged, want %d", n, stderrBurst)
	}
	if !strings.Contains(out, "count=81") || !strings.Contains(out, "server=noisy") {
		t.Errorf("no suppression summary with the server name:\n%s", out)
	}
}

func TestHTTPHeaders(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	h := modernHTTPHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("Authorization")] = true
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	cfg := &Config{Workspaces: map[string]WorkspaceConfig{"T1": {Servers: []ServerConfig{
		{Name: "docs", URL: "http://127.0.0.1:" + port + "/", Headers: map[string]string{"Authorization": "Bearer ${DOCS_TOKEN}"}},
	}}}}
	m := newTestManager(t, cfg, func(o *Options) {
		o.AllowPrivateNetworks = true
		o.Getenv = testGetenv(map[string]string{"DOCS_TOKEN": "from-env"})
	})
	m.regs.set("T1", Registered{Name: "reg", URL: "http://reg.test:" + port + "/", Headers: map[string]string{"Authorization": "Bearer reg-secret-123"}})
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil || len(tools) != 4 {
		t.Fatalf("Tools = %v, %v", toolNames(tools), err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"Bearer from-env", "Bearer reg-secret-123"} {
		if !seen[want] {
			t.Errorf("header %q never arrived; saw %v", want, seen)
		}
	}
	if seen["Bearer ${DOCS_TOKEN}"] {
		t.Error("an unexpanded header was sent")
	}
	for _, secret := range []string{"from-env", "reg-secret-123"} {
		if strings.Contains(m.logs.String(), secret) {
			t.Errorf("header value %q reached the log", secret)
		}
	}
}

func TestCloseDuringCall(t *testing.T) {
	dir := t.TempDir()
	cfg := &Config{Servers: []ServerConfig{testServerConfig(t, "slow", "legacy", nil)}}
	m := NewManager(Options{Config: cfg, Getenv: testGetenv(nil)})
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := toolByName(t, tools, "slow__wait").Call(context.Background(), json.RawMessage(fmt.Sprintf(`{"dir":%q}`, dir)))
		errc <- err
	}()
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(dir, "started")); return err == nil })
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err == nil {
		t.Error("the call survived Close")
	}
	if _, err := toolByName(t, tools, "slow__echo").Call(context.Background(), json.RawMessage(`{"message":"x"}`)); err == nil {
		t.Error("a call after Close succeeded")
	}
}

func TestRegistrationsFromOtherReplicas(t *testing.T) {
	port := startModernHTTP(t)
	m := newTestManager(t, nil, func(o *Options) { o.AllowPrivateNetworks = true; o.RegistrationTTL = time.Nanosecond })
	if err := m.ValidateURL("http://x.test:" + port + "/"); err != nil {
		t.Fatalf("ValidateURL: %v", err)
	}
	ctx := context.Background()
	if tools, err := m.Tools(ctx, "T1"); err != nil || len(tools) != 0 {
		t.Fatalf("Tools = %v, %v", toolNames(tools), err)
	}
	// Another replica saves a registration: no Invalidate here, the TTL
	// makes the next call read the store.
	m.regs.set("T1", Registered{Name: "late", URL: "http://late.test:" + port + "/"})
	tools, err := m.Tools(ctx, "T1")
	if err != nil || !slices.Contains(toolNames(tools), "late__echo") {
		t.Fatalf("Tools = %v, %v", toolNames(tools), err)
	}
	m.regs.set("T1")
	if tools, err := m.Tools(ctx, "T1"); err != nil || len(tools) != 0 {
		t.Fatalf("after removal Tools = %v, %v", toolNames(tools), err)
	}
}

// TestHTTPSilentProbe: an HTTP server that never answers server/discover
// (the request hangs) is reached with initialize after the probe bound.
func TestHTTPSilentProbe(t *testing.T) {
	legacy := newLegacyServer(&lockedWriter{w: io.Discard})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return legacy }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"server/discover"`)) {
				<-r.Context().Done()
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := &Config{Servers: []ServerConfig{{Name: "hang", URL: srv.URL + "/mcp"}}}
	m := newTestManager(t, cfg, func(o *Options) { o.ProbeTimeout = time.Second })
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := call(t, toolByName(t, tools, "hang__echo"), `{"message":"late"}`); err != nil || got != "late" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	if st := statusOf(t, m.Manager, "T1", "hang"); st.Era != EraLegacy || st.Transport != "streamable" {
		t.Errorf("status = %+v", st)
	}
}
