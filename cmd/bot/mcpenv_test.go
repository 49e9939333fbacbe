package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// mcpEnv is the environment of a whole-program test with the MCP servers
// of the file at cfgPath (loopback servers allowed), the emulated Slack
// and model, real Redis and a fresh SECRET_KEY; extra adds or overrides.
func mcpEnv(t *testing.T, emu *slackemu.Server, llm *llmemu.Server, cfgPath string, extra map[string]string) map[string]string {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	env := map[string]string{
		"SLACK_BOT_TOKEN":            slackemu.BotToken,
		"SLACK_APP_TOKEN":            slackemu.AppToken,
		"SLACK_API_URL":              emu.APIURL(),
		"REDIS_URL":                  os.Getenv("REDIS_URL"),
		"LLM_PROVIDER":               "openai",
		"LLM_BASE_URL":               llm.URL() + "/v1",
		"LLM_API_KEY":                "sk-test",
		"LLM_MODEL":                  "gpt-4o",
		"HTTP_ADDR":                  freeAddr(t),
		"LOG_LEVEL":                  "debug",
		"SECRET_KEY":                 base64.StdEncoding.EncodeToString(key),
		"MCP_CONFIG":                 cfgPath,
		"MCP_ALLOW_PRIVATE_NETWORKS": "true",
		"STREAM_EDIT_INTERVAL":       "100ms",
		"SHUTDOWN_GRACE":             "4s",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// startMCPRun starts the whole program with env and waits for its socket.
// ctx ends 3 minutes on (the test's hang guard); wait polls a condition
// within it.
func startMCPRun(t *testing.T, emu *slackemu.Server, env map[string]string) (ctx context.Context, wait func(what string, cond func() bool), stop func() error) {
	t.Helper()
	_, stop = startRun(t, env)
	wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(wcancel)
	wait = func(what string, cond func() bool) {
		t.Helper()
		if err := emu.WaitFor(wctx, cond); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	wait("bot connected", func() bool { return emu.LiveConnections() > 0 })
	return wctx, wait, stop
}
