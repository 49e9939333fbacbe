package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bobbinbot/bobbin/session"
)

func envFunc(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func goodEnv() map[string]string {
	return map[string]string{
		"SLACK_BOT_TOKEN": "xoxb-1-2-abc",
		"SLACK_APP_TOKEN": "xapp-1-A1-2-def",
		"LLM_PROVIDER":    "openai",
		"LLM_MODEL":       "gpt-4o",
	}
}

func TestLoadConfigDefaults(t *testing.T) {
	c, err := loadConfig(envFunc(goodEnv()))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{
		"api":      c.SlackAPIURL,
		"mode":     c.StreamMode,
		"interval": c.StreamEditInterval,
		"lifetime": c.StreamLifetime,
		"approval": c.ApprovalTimeout,
		"ttl":      c.SessionTTL,
		"turns":    c.MaxConcurrentTurns,
		"user":     c.UserTurnsPerMinute,
		"addr":     c.HTTPAddr,
		"format":   c.LogFormat,
		"sockets":  c.SocketConnections,
		"redis":    c.RedisURL,
	}
	want := map[string]any{
		"api":      "https://slack.com/api/",
		"mode":     "edit",
		"interval": time.Second,
		"lifetime": 4*time.Minute + 30*time.Second,
		"approval": 10 * time.Minute,
		"ttl":      720 * time.Hour,
		"turns":    32,
		"user":     10,
		"addr":     ":8080",
		"format":   "json",
		"sockets":  1,
		"redis":    "",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestLoadConfigParses(t *testing.T) {
	e := goodEnv()
	e["SLACK_API_URL"] = "http://127.0.0.1:9999/api"
	e["BOT_ADMINS"] = "U1, U2"
	e["SECRET_KEY"] = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	e["STREAM_EDIT_INTERVAL"] = "250ms"
	e["STREAM_LIFETIME"] = "2m"
	e["LOG_LEVEL"] = "debug"
	c, err := loadConfig(envFunc(e))
	if err != nil {
		t.Fatal(err)
	}
	if c.SlackAPIURL != "http://127.0.0.1:9999/api/" {
		t.Errorf("SlackAPIURL = %q, want a trailing slash added", c.SlackAPIURL)
	}
	if diff := cmp.Diff([]string{"U1", "U2"}, c.BotAdmins); diff != "" {
		t.Errorf("BotAdmins (-want +got):\n%s", diff)
	}
	if len(c.secretKey) != 32 || c.StreamEditInterval != 250*time.Millisecond || c.logLevel.String() != "DEBUG" {
		t.Errorf("parsed key %d bytes, interval %v, level %v", len(c.secretKey), c.StreamEditInterval, c.logLevel)
	}
	if c.StreamLifetime != 2*time.Minute {
		t.Errorf("StreamLifetime = %v, want 2m", c.StreamLifetime)
	}
}

// TestLoadConfigStreamLifetime: STREAM_LIFETIME is a Go duration above 0
// and below Slack's ~5 minute stream lifetime; anything else is one
// problem naming the variable (never its value).
func TestLoadConfigStreamLifetime(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  time.Duration // 0: refused
	}{
		{"4m59s", 4*time.Minute + 59*time.Second},
		{"20s", 20 * time.Second},
		{"1ms", time.Millisecond},
		{"0s", 0},
		{"-1m", 0},
		{"5m", 0},
		{"1h", 0},
		{"270", 0},
		{"soon", 0},
	} {
		e := goodEnv()
		e["STREAM_LIFETIME"] = tt.value
		c, err := loadConfig(envFunc(e))
		if tt.want != 0 {
			if err != nil || c.StreamLifetime != tt.want {
				t.Errorf("STREAM_LIFETIME=%s: %v, %v; want %v", tt.value, c.StreamLifetime, err, tt.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("STREAM_LIFETIME=%s accepted (%v)", tt.value, c.StreamLifetime)
			continue
		}
		var ce *configError
		if !errors.As(err, &ce) || len(ce.problems) != 1 || !strings.HasPrefix(ce.problems[0], "STREAM_LIFETIME ") {
			t.Errorf("STREAM_LIFETIME=%s: error %q, want one problem naming STREAM_LIFETIME", tt.value, err)
		}
		if strings.Contains(err.Error(), tt.value) && tt.value != "5m" {
			t.Errorf("STREAM_LIFETIME=%s: the error quotes the value: %q", tt.value, err)
		}
	}
}

// TestLoadConfigReportsAll checks that every problem is reported in one
// error and that no value (tokens) is echoed.
func TestLoadConfigReportsAll(t *testing.T) {
	e := map[string]string{
		"SLACK_BOT_TOKEN":      "xoxp-user-token-canary",
		"LLM_PROVIDER":         "gemini",
		"STREAM_MODE":          "fast",
		"SECRET_KEY":           "c2hvcnQ=",
		"MAX_CONCURRENT_TURNS": "0",
		"STREAM_EDIT_INTERVAL": "soon",
		"LOG_FORMAT":           "xml",
		"SLACK_API_URL":        "ftp://x",
	}
	_, err := loadConfig(envFunc(e))
	if err == nil {
		t.Fatal("loadConfig accepted a broken environment")
	}
	msg := err.Error()
	for _, want := range []string{"SLACK_APP_TOKEN", "LLM_MODEL", "SLACK_BOT_TOKEN must", "LLM_PROVIDER must", "STREAM_MODE", "SECRET_KEY", "MAX_CONCURRENT_TURNS", "STREAM_EDIT_INTERVAL", "LOG_FORMAT", "SLACK_API_URL"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %s:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "canary") {
		t.Errorf("error echoes a token value:\n%s", msg)
	}
}

// TestLoadConfigOldSecretKeys: SECRET_KEY_OLD takes plain keys (id derived
// like session's default) and "id:key" entries; a bad entry is reported by
// position, never by value.
func TestLoadConfigOldSecretKeys(t *testing.T) {
	const k1 = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // "0123456789abcdef0123456789abcdef"
	const k2 = "YWJjZGVmMDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODk"  // unpadded
	raw1, _ := session.DecodeSecretKey(k1)
	raw2, _ := session.DecodeSecretKey(k2)
	tests := []struct {
		name    string
		val     string
		want    map[string][]byte
		wantErr string
	}{
		{"unset", "", nil, ""},
		{"plain", k1, map[string][]byte{session.KeyID(raw1): raw1}, ""},
		{"named and plain", " old1:" + k2 + " , " + k1, map[string][]byte{"old1": raw2, session.KeyID(raw1): raw1}, ""},
		{"short key", "c2hvcnQ=canary", nil, "SECRET_KEY_OLD entry 1"},
		{"empty id", ":" + k1, nil, "SECRET_KEY_OLD entry 1"},
		{"second bad", k1 + ",x:canary", nil, "SECRET_KEY_OLD entry 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := goodEnv()
			e["SECRET_KEY_OLD"] = tt.val
			c, err := loadConfig(envFunc(e))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "canary") {
					t.Fatalf("loadConfig(SECRET_KEY_OLD=%q) error = %v, want one naming %q without the value", tt.val, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.oldSecretKeys); diff != "" {
				t.Errorf("oldSecretKeys (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadConfigSlackRateLimits: SLACK_UPDATES_PER_MINUTE still sets the
// chat.update budget; SLACK_RATE_LIMITS overrides any method, and a bad
// entry is reported by position, never by value.
func TestLoadConfigSlackRateLimits(t *testing.T) {
	e := goodEnv()
	e["SLACK_UPDATES_PER_MINUTE"] = "30"
	c, err := loadConfig(envFunc(e))
	if err != nil {
		t.Fatal(err)
	}
	if u := c.rateLimits["chat.update"]; u.PerMinute != 30 || u.Burst != 5 {
		t.Errorf("chat.update = %+v, want 30/min, burst 5", u)
	}
	e["SLACK_RATE_LIMITS"] = "chat.update=40:4, reactions.add=off, chat.postMessage@channel=30:2"
	if c, err = loadConfig(envFunc(e)); err != nil {
		t.Fatal(err)
	}
	if u := c.rateLimits["chat.update"]; u.PerMinute != 40 || u.Burst != 4 {
		t.Errorf("chat.update = %+v, want 40/min, burst 4 (SLACK_RATE_LIMITS wins)", u)
	}
	if !c.rateLimits["reactions.add"].Off {
		t.Error("reactions.add not off")
	}
	if p := c.rateLimits["chat.postMessage"]; p.ChannelPerMinute != 30 || p.ChannelBurst != 2 || p.PerMinute == 0 {
		t.Errorf("chat.postMessage = %+v, want 30/min and bursts of 2 per channel, the workspace cap kept", p)
	}
	e["SLACK_RATE_LIMITS"] = "chat.update=40, chat.update=canary-value"
	_, err = loadConfig(envFunc(e))
	if err == nil || !strings.Contains(err.Error(), "SLACK_RATE_LIMITS: entry 2") || strings.Contains(err.Error(), "canary") {
		t.Errorf("bad SLACK_RATE_LIMITS: %v, want entry 2 named and the value not echoed", err)
	}
}

// TestLoadConfigTypedErrors: a value that does not parse is reported once,
// by variable name, saying what it must look like: never the value, a Go
// field name or a Go type, and no follow-on complaint about the same
// variable.
func TestLoadConfigTypedErrors(t *testing.T) {
	e := goodEnv()
	bad := map[string]string{
		"LLM_CONTEXT_WINDOW":   "128kCANARY",
		"ALLOW_BOT_MESSAGES":   "yesCANARY",
		"SESSION_TTL":          "30dCANARY",
		"MAX_CONCURRENT_TURNS": "-CANARY",
		"HTTP_ADDR":            "CANARY",
	}
	for k, v := range bad {
		e[k] = v
	}
	delete(e, "SLACK_APP_TOKEN")
	_, err := loadConfig(envFunc(e))
	if err == nil {
		t.Fatal("loadConfig accepted unparsable values")
	}
	msg := err.Error()
	want := map[string]string{
		"LLM_CONTEXT_WINDOW":   "LLM_CONTEXT_WINDOW must be a whole number",
		"ALLOW_BOT_MESSAGES":   "ALLOW_BOT_MESSAGES must be true or false",
		"SESSION_TTL":          "SESSION_TTL must be a duration",
		"MAX_CONCURRENT_TURNS": "MAX_CONCURRENT_TURNS must be a whole number",
		"HTTP_ADDR":            "HTTP_ADDR must be host:port",
		"SLACK_APP_TOKEN":      "SLACK_APP_TOKEN is required",
	}
	lines := strings.Split(msg, "\n")[1:]
	if len(lines) != len(want) {
		t.Errorf("got %d problems, want %d (one per variable):\n%s", len(lines), len(want), msg)
	}
	for name, text := range want {
		if n := strings.Count(msg, name+" "); n != 1 {
			t.Errorf("%s is named %d times, want once:\n%s", name, n, msg)
		}
		if !strings.Contains(msg, text) {
			t.Errorf("error lacks %q:\n%s", text, msg)
		}
	}
	if strings.Contains(strings.ToLower(msg), "canary") {
		t.Errorf("error echoes a value:\n%s", msg)
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[config]()) {
		if strings.Contains(msg, f.Name) {
			t.Errorf("error names the Go field %s:\n%s", f.Name, msg)
		}
	}
	for _, s := range []string{"field", "type", "int", "time.Duration", "parse error"} {
		if strings.Contains(msg, s) {
			t.Errorf("error contains %q:\n%s", s, msg)
		}
	}
}

// TestLeadingVar: problems are deduplicated by the variable a message
// starts with.
func TestLeadingVar(t *testing.T) {
	for in, want := range map[string]string{
		"SECRET_KEY_OLD entry 2 must be": "SECRET_KEY_OLD",
		"LLM_MAX_TOKENS must not be":     "LLM_MAX_TOKENS",
		"an environment variable has":    "",
		"MCP_CONFIG: mcp config f.yaml":  "",
		"HTTP_ADDR":                      "HTTP_ADDR",
		"123 is not a name":              "",
	} {
		if got := leadingVar(in); got != want {
			t.Errorf("leadingVar(%q) = %q, want %q", in, got, want)
		}
	}
}
