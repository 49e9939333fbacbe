package mcp

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// peersDir returns the absolute path of the installed npm peers, skipping
// the test when node or the packages are missing.
func peersDir(t testing.TB) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not on PATH: skipping the npm MCP peer tests")
	}
	dir, err = filepath.Abs(filepath.Join("testdata", "mcp-peers"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol")); err != nil {
		t.Skip("MCP peers not installed: run `cd mcp/testdata/mcp-peers && npm ci` (scripts/test.sh does)")
	}
	return node, dir
}

func peerScript(dir, pkg string) string {
	return filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
}

func TestPeerMemoryStdio(t *testing.T) {
	node, dir := peersDir(t)
	tmp := t.TempDir()
	cfg := &Config{Servers: []ServerConfig{{
		Name:    "memory",
		Command: []string{node, peerScript(dir, "server-memory")},
		Env:     map[string]string{"MEMORY_FILE_PATH": filepath.Join(tmp, "memory.jsonl")},
		Allow:   []string{"read_graph", "search_nodes"},
	}}}
	m := newTestManager(t, cfg, nil)
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"memory__add_observations", "memory__create_entities", "memory__create_relations",
		"memory__delete_entities", "memory__delete_observations", "memory__delete_relations",
		"memory__open_nodes", "memory__read_graph", "memory__search_nodes"}
	if diff := cmp.Diff(want, toolNames(tools)); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	if _, err := call(t, toolByName(t, tools, "memory__create_entities"),
		`{"entities":[{"name":"Bobbin","entityType":"bot","observations":["lives in Slack"]}]}`); err != nil {
		t.Fatal(err)
	}
	read := toolByName(t, tools, "memory__read_graph")
	out, err := call(t, read, `{}`)
	if err != nil || !strings.Contains(out, "lives in Slack") {
		t.Fatalf("read_graph = %q, %v", out, err)
	}
	if h := read.Hints(); !h.ReadOnly || !h.Allowed || h.Trusted {
		t.Errorf("read_graph hints = %+v", h)
	}
	if h := toolByName(t, tools, "memory__delete_entities").Hints(); !h.Destructive || h.Allowed {
		t.Errorf("delete_entities hints = %+v", h)
	}
	if st := statusOf(t, m.Manager, "T1", "memory"); st.Era != EraLegacy || st.Transport != "stdio" {
		t.Errorf("status = %+v", st)
	}
}

func TestPeerFilesystemStdio(t *testing.T) {
	node, dir := peersDir(t)
	root := t.TempDir()
	cfg := &Config{Servers: []ServerConfig{{Name: "fs", Command: []string{node, peerScript(dir, "server-filesystem"), root}}}}
	m := newTestManager(t, cfg, nil)
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 14 {
		t.Errorf("%d tools, want 14: %v", len(tools), toolNames(tools))
	}
	path := filepath.Join(root, "note.txt")
	if _, err := call(t, toolByName(t, tools, "fs__write_file"), fmt.Sprintf(`{"path":%q,"content":"hello from bobbin"}`, path)); err != nil {
		t.Fatal(err)
	}
	out, err := call(t, toolByName(t, tools, "fs__read_text_file"), fmt.Sprintf(`{"path":%q}`, path))
	if err != nil || !strings.Contains(out, "hello from bobbin") {
		t.Fatalf("read_text_file = %q, %v", out, err)
	}
	if _, err := call(t, toolByName(t, tools, "fs__read_text_file"), `{"path":"/etc/passwd"}`); err == nil {
		t.Error("reading outside the allowed directory succeeded")
	}
	// With empty client capabilities the server never asks for roots, and
	// the log shows no failed roots/list.
	if strings.Contains(m.logs.String(), "roots") && strings.Contains(m.logs.String(), "Method not found") {
		t.Errorf("roots were requested:\n%s", m.logs.String())
	}
}

func TestPeerEverythingStdio(t *testing.T) {
	node, dir := peersDir(t)
	cfg := &Config{Servers: []ServerConfig{{Name: "everything", Command: []string{node, peerScript(dir, "server-everything"), "stdio"}}}}
	m := newTestManager(t, cfg, nil)
	tools, err := m.Tools(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	out, err := call(t, toolByName(t, tools, "everything__echo"), `{"message":"ping"}`)
	if err != nil || !strings.Contains(out, "ping") {
		t.Fatalf("echo = %q, %v", out, err)
	}
	if !slices.Contains(toolNames(tools), "everything__get-structured-content") {
		t.Errorf("tools = %v", toolNames(tools))
	}
}

// startEverythingHTTP runs server-everything in mode (streamableHttp or sse)
// on a free 127.0.0.1 port and returns the port; the process group is
// killed at the end of the test.
func startEverythingHTTP(t *testing.T, mode string) string {
	node, dir := peersDir(t)
	for attempt := 0; attempt < 3; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(l.Addr().String())
		l.Close()
		cmd := exec.Command(node, "--require", "./force-loopback.cjs", peerScript(dir, "server-everything"), mode)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "PORT=" + port}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				deadline = time.Time{} // port taken: try another
				continue
			default:
			}
			if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 200*time.Millisecond); err == nil {
				c.Close()
				t.Cleanup(stop)
				return port
			}
			time.Sleep(50 * time.Millisecond)
		}
		stop()
	}
	t.Fatalf("server-everything %s did not start", mode)
	return ""
}

func TestPeerEverythingHTTP(t *testing.T) {
	for _, tc := range []struct {
		mode, path, transport string
	}{
		{"streamableHttp", "/mcp", "streamable"},
		{"sse", "/sse", "sse"}, // POST /sse answers 404: fall back to HTTP+SSE
	} {
		t.Run(tc.mode, func(t *testing.T) {
			port := startEverythingHTTP(t, tc.mode)
			cfg := &Config{Servers: []ServerConfig{{Name: "ev", URL: "http://127.0.0.1:" + port + tc.path}}}
			m := newTestManager(t, cfg, nil)
			tools, err := m.Tools(context.Background(), "T1")
			if err != nil {
				t.Fatal(err)
			}
			out, err := call(t, toolByName(t, tools, "ev__echo"), `{"message":"over `+tc.mode+`"}`)
			if err != nil || !strings.Contains(out, "over "+tc.mode) {
				t.Fatalf("echo = %q, %v", out, err)
			}
			if st := statusOf(t, m.Manager, "T1", "ev"); st.Transport != tc.transport || st.Era != EraLegacy {
				t.Errorf("status = %+v, want %s at %s", st, tc.transport, EraLegacy)
			}
		})
	}
}

func TestPeerEverythingHTTPRegistered(t *testing.T) {
	port := startEverythingHTTP(t, "streamableHttp")
	m := newTestManager(t, nil, func(o *Options) { o.AllowPrivateNetworks = true })
	infos, err := m.Probe(context.Background(), "ev", "http://everything.test:"+port+"/mcp", map[string]string{"X-Test": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) < 10 {
		t.Errorf("probe found %d tools", len(infos))
	}
}
