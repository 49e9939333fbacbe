package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProfilesConfigProblems: a bad PROFILES_CONFIG and bad OTEL_*
// settings stop the start, each problem naming the variable and field.
func TestProfilesConfigProblems(t *testing.T) {
	dir := t.TempDir()
	mcpPath := filepath.Join(dir, "mcp.yaml")
	if err := os.WriteFile(mcpPath, []byte("servers:\n  - name: docs\n    builtin: demo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "profiles.yaml")
	if err := os.WriteFile(path, []byte(`
profiles:
  - name: support
    model: m
    provider: nowhere
    servers: [docs, ghost]
    temperature: 1
budgets:
  person: {daily_cost: -1}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "LLM_PROVIDER": "openai", "LLM_MODEL": "m",
		"REDIS_URL": os.Getenv("REDIS_URL"), "HTTP_ADDR": freeAddr(t),
		"MCP_CONFIG": mcpPath, "PROFILES_CONFIG": path,
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := run(ctx, envFunc(env), io.Discard, io.Discard)
	if err == nil {
		t.Fatal("started with a bad PROFILES_CONFIG")
	}
	for _, want := range []string{
		`PROFILES_CONFIG: profiles config ` + path + `: line 7: unknown field "temperature"`,
		`profiles[0] (support): provider: unknown provider "nowhere"`,
		`profiles[0] (support): servers: unknown MCP server "ghost"`,
		`budgets.person: daily_cost: must not be negative`,
		`OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start-up error lacks %q:\n%v", want, err)
		}
	}
}
