package mcp

import (
	"strings"
	"testing"
)

// TestLoadConfigReportsEverything: unknown fields and values of the wrong
// kind are reported together with validation problems, without Go type
// names or the offending values.
func TestLoadConfigReportsEverything(t *testing.T) {
	path := writeConfig(t, `
servers:
  - name: a
    comand: [x]
  - name: "bad name"
    url: ftp://x
    timeout: 30x-CANARY
bogus: 1
`)
	_, err := LoadConfig(path)
	if err == nil {
		t.Fatal("LoadConfig accepted a broken file")
	}
	msg := err.Error()
	for _, want := range []string{
		`line 4: unknown field "comand"`,
		`line 7: expected a duration such as 30s, got a string`,
		`line 8: unknown field "bogus"`,
		"servers[0] (a): url: set either command",
		"servers[1] (bad name): name:",
		"servers[1] (bad name): url: scheme",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	for _, not := range []string{"CANARY", "mcp.ServerConfig", "time.Duration", "not found in type"} {
		if strings.Contains(msg, not) {
			t.Errorf("error contains %q:\n%s", not, msg)
		}
	}
}

func TestCheckVars(t *testing.T) {
	path := writeConfig(t, `
servers:
  - name: mem
    command: [mcp-server-memory]
    env: {A: "${SET}", B: "${UNSET_ONE}", C: "x${BROKEN"}
workspaces:
  T1:
    servers:
      - name: docs
        url: https://mcp.example.com/mcp
        headers: {Authorization: "Bearer ${DOCS_TOKEN}", X-Ok: "${SET}"}
`)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "SET" {
			return "secret-CANARY"
		}
		return ""
	}
	err = cfg.CheckVars(path, getenv)
	if err == nil {
		t.Fatal("CheckVars found nothing")
	}
	msg := err.Error()
	for _, want := range []string{
		"servers[0] (mem): env: B: variable UNSET_ONE is not set",
		"servers[0] (mem): env: C: unterminated ${",
		"workspaces.T1.servers[0] (docs): headers: Authorization: variable DOCS_TOKEN is not set",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "\n") + 1; n != 3 {
		t.Errorf("%d problems, want 3:\n%s", n, msg)
	}
	if strings.Contains(msg, "CANARY") || strings.Contains(msg, "X-Ok") {
		t.Errorf("error mentions a set variable or its value:\n%s", msg)
	}
	// With every variable set only the malformed reference is left.
	err = cfg.CheckVars(path, func(string) string { return "v" })
	if err == nil || strings.Contains(err.Error(), "not set") || !strings.Contains(err.Error(), "unterminated") {
		t.Errorf("all set: %v, want only the unterminated reference", err)
	}
}

// TestLoadConfigChecked: decoding problems and unset variables of the same
// file come back together.
func TestLoadConfigChecked(t *testing.T) {
	path := writeConfig(t, "servers:\n  - name: docs\n    url: https://x/mcp\n    headers: {A: \"${NOPE}\"}\n    bogus: 1\n")
	_, err := LoadConfigChecked(path, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), `unknown field "bogus"`) || !strings.Contains(err.Error(), "variable NOPE is not set") {
		t.Fatalf("LoadConfigChecked = %v, want both problems", err)
	}
	if _, err := LoadConfigChecked(writeConfig(t, "servers: [\n"), nil); err == nil {
		t.Error("syntax error accepted")
	}
}
