package main

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// startEnv is a working environment against emu (the model is never
// called in these tests).
func startEnv(emu *slackemu.Server) map[string]string {
	return map[string]string{
		"SLACK_BOT_TOKEN": slackemu.BotToken,
		"SLACK_APP_TOKEN": slackemu.AppToken,
		"SLACK_API_URL":   emu.APIURL(),
		"REDIS_URL":       os.Getenv("REDIS_URL"),
		"LLM_PROVIDER":    "openai",
		"LLM_BASE_URL":    "http://127.0.0.1:9/v1",
		"LLM_MODEL":       "gpt-4o",
		"HTTP_ADDR":       "127.0.0.1:0",
	}
}

// runFor runs the program until it returns (or the hang guard fires) and
// returns its error and log.
func runFor(t *testing.T, env map[string]string) (logs string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var buf syncBuffer
	err = run(ctx, envFunc(env), &buf, io.Discard)
	if ctx.Err() != nil {
		t.Fatalf("run did not return on its own:\n%s", buf.String())
	}
	return buf.String(), err
}

// TestRunRejectedTokens: a token Slack refuses ends the program before it
// serves, with an error naming the variable and Slack's code, never the
// token, and no doubled prefixes.
func TestRunRejectedTokens(t *testing.T) {
	emu := slackemu.New(slackemu.Options{})
	defer emu.Close()
	tests := []struct {
		name, key, val, want string
	}{
		{"bot token", "SLACK_BOT_TOKEN", "xoxb-9-9-CANARYbot", "SLACK_BOT_TOKEN was rejected by Slack (invalid_auth)"},
		{"app token", "SLACK_APP_TOKEN", "xapp-1-A9-9-CANARYapp", "SLACK_APP_TOKEN was rejected by Slack (invalid_auth)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := startEnv(emu)
			env[tt.key] = tt.val
			logs, err := runFor(t, env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run = %v, want an error containing %q\n%s", err, tt.want, logs)
			}
			if strings.Contains(logs, "bobbin: serving") {
				t.Errorf("logged serving before failing:\n%s", logs)
			}
			for _, s := range []string{"CANARY", "bot: bot:"} {
				if strings.Contains(err.Error()+logs, s) {
					t.Errorf("error or log contains %q: %v\n%s", s, err, logs)
				}
			}
		})
	}
	t.Run("revoked", func(t *testing.T) {
		emu.RevokeToken(slackemu.BotToken)
		_, err := runFor(t, startEnv(emu))
		if err == nil || !strings.Contains(err.Error(), "SLACK_BOT_TOKEN was rejected by Slack (token_revoked)") {
			t.Fatalf("run = %v, want SLACK_BOT_TOKEN rejected (token_revoked)", err)
		}
	})
}

// TestRunReportsEverything: problems in the environment and in what it
// points at (Redis, MCP_CONFIG with its ${VARS}, HTTP_ADDR) come back from
// one start, one line each, without values.
func TestRunReportsEverything(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	closed := freeAddr(t) // nothing listens there
	mcpFile := filepath.Join(t.TempDir(), "mcp.yaml")
	if err := os.WriteFile(mcpFile, []byte(`
servers:
  - name: docs
    url: https://mcp.example.com/mcp
    headers: {Authorization: "Bearer ${DOCS_TOKEN_UNSET}"}
    tiemout: 30s
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"SLACK_BOT_TOKEN":    "xoxb-1-2-CANARY",
		"LLM_PROVIDER":       "openai",
		"LLM_MODEL":          "gpt-4o",
		"LLM_CONTEXT_WINDOW": "lotsCANARY",
		"REDIS_URL":          "redis://:CANARYpass@" + closed + "/0",
		"MCP_CONFIG":         mcpFile,
		"HTTP_ADDR":          busy.Addr().String(),
	}
	logs, err := runFor(t, env)
	if err == nil {
		t.Fatal("run started with a broken configuration")
	}
	msg := err.Error()
	for _, want := range []string{
		"SLACK_APP_TOKEN is required",
		"LLM_CONTEXT_WINDOW must be a whole number",
		"REDIS_URL points at a Redis that does not answer: connection refused",
		`unknown field "tiemout"`,
		"servers[0] (docs): headers: Authorization: variable DOCS_TOKEN_UNSET is not set",
		"HTTP_ADDR cannot be listened on: address already in use",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	_, port, _ := net.SplitHostPort(closed)
	for _, s := range []string{"CANARY", port, "bot: bot:"} {
		if strings.Contains(msg, s) {
			t.Errorf("error contains %q:\n%s", s, msg)
		}
	}
	if strings.Contains(logs, "CANARY") {
		t.Errorf("log contains a value:\n%s", logs)
	}
}
