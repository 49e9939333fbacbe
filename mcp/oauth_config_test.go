package mcp

import (
	"strings"
	"testing"
)

func TestConfigAuthFields(t *testing.T) {
	ok := `servers:
  - name: linear
    url: https://mcp.linear.app/mcp
    auth: user
    client_id: abc
    client_secret: ${LINEAR_SECRET}
    scopes: [read, write]
  - name: notion
    url: https://mcp.notion.com/mcp
    auth: workspace
`
	cfg, err := parseConfig("mcp.yaml", []byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Servers[0]; s.Auth != AuthUser || s.ClientID != "abc" || s.ClientSecret != "${LINEAR_SECRET}" || len(s.Scopes) != 2 {
		t.Fatalf("parsed %+v", s)
	}
	if err := cfg.CheckVars("mcp.yaml", func(string) string { return "" }); err == nil ||
		!strings.Contains(err.Error(), "servers[0] (linear): client_secret: variable LINEAR_SECRET is not set") {
		t.Errorf("CheckVars: %v", err)
	}
	bad := `servers:
  - name: a
    url: https://a.example/mcp
    auth: sometimes
  - name: b
    command: [x]
    auth: user
  - name: c
    url: https://c.example/mcp
    client_id: abc
  - name: d
    url: https://d.example/mcp
    auth: workspace
    transport: sse
  - name: e
    url: https://e.example/mcp
    auth: workspace
    client_secret: s
`
	_, err = parseConfig("mcp.yaml", []byte(bad))
	if err == nil {
		t.Fatal("bad auth config accepted")
	}
	for _, want := range []string{"(a): auth: must be", "(b): auth: OAuth applies to url servers only",
		"(c): client_id: client_id, client_secret and scopes need auth", "(d): auth: OAuth needs the streamable",
		"(e): client_secret: client_secret and client_issuer need client_id"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
}
