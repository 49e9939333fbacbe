package mcp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcp.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfig(t *testing.T) {
	path := writeConfig(t, `
servers:                     # mounted in every workspace
  - name: memory
    command: [npx, -y, "@modelcontextprotocol/server-memory"]
    env: {MEMORY_FILE_PATH: /data/memory.json}
    allow: [read_graph, search_nodes]   # run without asking
workspaces:
  T0123456:
    servers:
      - name: docs
        url: https://mcp.example.com/mcp
        headers: {Authorization: "Bearer ${DOCS_TOKEN}"}
        trusted: true
        timeout: 30s
`)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Servers: []ServerConfig{{Name: "memory", Command: []string{"npx", "-y", "@modelcontextprotocol/server-memory"},
			Env: map[string]string{"MEMORY_FILE_PATH": "/data/memory.json"}, Allow: []string{"read_graph", "search_nodes"}}},
		Workspaces: map[string]WorkspaceConfig{"T0123456": {Servers: []ServerConfig{{Name: "docs", URL: "https://mcp.example.com/mcp",
			Headers: map[string]string{"Authorization": "Bearer ${DOCS_TOKEN}"}, Trusted: true, Timeout: 30 * time.Second}}}},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string // substrings of the error
	}{
		{"unknown field", "servers:\n  - name: a\n    command: [x]\n    comand: [y]\n", []string{"mcp.yaml", "comand"}},
		{"both command and url", "servers:\n  - name: a\n    command: [x]\n    url: https://x\n", []string{"servers[0] (a): command"}},
		{"neither", "servers:\n  - name: a\n", []string{"servers[0] (a): url"}},
		{"bad name", "servers:\n  - name: 'a b'\n    command: [x]\n", []string{"servers[0] (a b): name"}},
		{"duplicate", "servers:\n  - {name: a, command: [x]}\nworkspaces:\n  T1:\n    servers:\n      - {name: a, url: 'https://x'}\n", []string{"workspaces.T1.servers[0] (a): name: duplicate"}},
		{"bad scheme", "workspaces:\n  T1:\n    servers:\n      - {name: d, url: 'ftp://x'}\n", []string{"workspaces.T1.servers[0] (d): url: scheme"}},
		{"bad transport", "servers:\n  - {name: a, url: 'https://x', transport: ws}\n", []string{"(a): transport"}},
		{"headers on stdio", "servers:\n  - {name: a, command: [x], headers: {A: b}}\n", []string{"(a): headers"}},
		{"bad env name", "servers:\n  - {name: a, command: [x], env: {'1X': b}}\n", []string{"(a): env"}},
		{"header newline", "servers:\n  - {name: a, url: 'https://x', headers: {A: \"b\\nc\"}}\n", []string{"(a): headers"}},
		{"url credentials", "servers:\n  - {name: a, url: 'https://u:p@x'}\n", []string{"(a): url: credentials"}},
		{"all problems at once", "servers:\n  - {name: a}\n  - {name: '', command: [x]}\n", []string{"servers[0] (a): url", "servers[1] (): name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(writeConfig(t, tc.body))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), "mcp.yaml") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestExpandVars(t *testing.T) {
	env := map[string]string{"TOKEN": "abc", "EMPTY": ""}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{"plain", "plain", false},
		{"Bearer ${TOKEN}", "Bearer abc", false},
		{"${TOKEN}-${TOKEN}", "abc-abc", false},
		{"cost $5", "cost $5", false},
		{"${MISSING}", "", true},
		{"${EMPTY}", "", true},
		{"${TOKEN", "", true},
		{"${1BAD}", "", true},
	} {
		got, err := expandVars(tc.in, getenv)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("expandVars(%q) = %q, %v; want %q, err=%v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestStdioEnv(t *testing.T) {
	getenv := testGetenv(map[string]string{"TOKEN": "t0k"})
	env, err := stdioEnv(ServerConfig{Env: map[string]string{"API_TOKEN": "${TOKEN}", "HOME": "/srv/mcp"}}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	want := map[string]string{"PATH": os.Getenv("PATH"), "HOME": "/srv/mcp", "API_TOKEN": "t0k"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}
