package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v10"

	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// config is the whole configuration, read from the environment. The env
// names are a contract documented in README.md: extend, never rename.
type config struct {
	// SlackBotToken is required unless installations are on
	// (SLACK_CLIENT_ID, SLACK_CLIENT_SECRET and PUBLIC_URL).
	SlackBotToken string `env:"SLACK_BOT_TOKEN"`
	SlackAppToken string `env:"SLACK_APP_TOKEN,required"`
	SlackAPIURL   string `env:"SLACK_API_URL" envDefault:"https://slack.com/api/"`
	// OAuth installations (multi-workspace): the app's credentials and
	// Slack's authorize page (tests point it at the emulator).
	SlackClientID          string `env:"SLACK_CLIENT_ID"`
	SlackClientSecret      string `env:"SLACK_CLIENT_SECRET"`
	SlackOAuthAuthorizeURL string `env:"SLACK_OAUTH_AUTHORIZE_URL" envDefault:"https://slack.com/oauth/v2/authorize"`

	RedisURL string `env:"REDIS_URL"`

	LLMProvider      string `env:"LLM_PROVIDER,required"`
	LLMBaseURL       string `env:"LLM_BASE_URL"`
	LLMAPIKey        string `env:"LLM_API_KEY"`
	LLMModel         string `env:"LLM_MODEL,required"`
	LLMContextWindow int    `env:"LLM_CONTEXT_WINDOW" envDefault:"128000"`
	LLMMaxTokens     int    `env:"LLM_MAX_TOKENS" envDefault:"4096"`
	LLMSystemPrompt  string `env:"LLM_SYSTEM_PROMPT"`
	// Model-endpoint quirks and image input (see llm.go).
	LLMOpenAITokenParam string `env:"LLM_OPENAI_TOKEN_PARAM" envDefault:"auto"`
	LLMStreamUsage      bool   `env:"LLM_STREAM_USAGE" envDefault:"true"`
	LLMMidSystem        bool   `env:"LLM_MID_SYSTEM" envDefault:"false"`
	LLMImages           bool   `env:"LLM_IMAGES" envDefault:"true"`

	MCPConfig               string `env:"MCP_CONFIG"`
	MCPAllowPrivateNetworks bool   `env:"MCP_ALLOW_PRIVATE_NETWORKS" envDefault:"false"`
	// SlackMCPURL is the server /bobbin mcp add slack registers (Slack's
	// MCP server; GovSlack and tests point it elsewhere).
	SlackMCPURL string `env:"SLACK_MCP_URL" envDefault:"https://mcp.slack.com/mcp"`
	// ProfilesConfig names the agent profiles, budgets and prices file
	// (agent/profile).
	ProfilesConfig string `env:"PROFILES_CONFIG"`

	BotAdmins []string `env:"BOT_ADMINS" envSeparator:","`
	SecretKey string   `env:"SECRET_KEY"`
	// SecretKeyOld lists keys retired by a rotation, comma-separated, each
	// "base64key" or "id:base64key" (id as sealed records name it; the
	// default id is derived from the key, so plain keys are enough).
	SecretKeyOld []string `env:"SECRET_KEY_OLD" envSeparator:","`

	StreamMode         string        `env:"STREAM_MODE" envDefault:"edit"`
	StreamEditInterval time.Duration `env:"STREAM_EDIT_INTERVAL" envDefault:"1s"`
	StreamLifetime     time.Duration `env:"STREAM_LIFETIME" envDefault:"4m30s"`
	ApprovalTimeout    time.Duration `env:"APPROVAL_TIMEOUT" envDefault:"10m"`
	SessionTTL         time.Duration `env:"SESSION_TTL" envDefault:"720h"`
	MaxConcurrentTurns int           `env:"MAX_CONCURRENT_TURNS" envDefault:"32"`
	UserTurnsPerMinute int           `env:"USER_TURNS_PER_MINUTE" envDefault:"10"`
	SocketConnections  int           `env:"SOCKET_CONNECTIONS" envDefault:"1"`
	AllowBotMessages   bool          `env:"ALLOW_BOT_MESSAGES" envDefault:"false"`
	ShutdownGrace      time.Duration `env:"SHUTDOWN_GRACE" envDefault:"25s"`
	LeaseTTL           time.Duration `env:"LEASE_TTL" envDefault:"20s"`
	UpdatesPerMinute   int           `env:"SLACK_UPDATES_PER_MINUTE" envDefault:"45"`
	SlackRateLimits    string        `env:"SLACK_RATE_LIMITS"`
	SocketPingTimeout  time.Duration `env:"SOCKET_PING_TIMEOUT" envDefault:"30s"`
	UsergroupCacheTTL  time.Duration `env:"USERGROUP_CACHE_TTL" envDefault:"5m"`
	// ToolFileMaxBytes bounds files tools return that are uploaded into
	// the thread (bot/toolfiles.go).
	ToolFileMaxBytes int64 `env:"TOOL_FILE_MAX_BYTES" envDefault:"20971520"`
	// Thread context (bot/threadctx.go).
	ThreadFollowups       string `env:"THREAD_FOLLOWUPS" envDefault:"all"`
	ThreadContextMessages int    `env:"THREAD_CONTEXT_MESSAGES" envDefault:"100"`

	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8080"`
	// PublicURL is HTTP_ADDR's externally reachable base URL (one for all
	// replicas): OAuth redirects to PUBLIC_URL/oauth/callback.
	PublicURL string `env:"PUBLIC_URL"`
	LogLevel  string `env:"LOG_LEVEL" envDefault:"info"`
	LogFormat string `env:"LOG_FORMAT" envDefault:"json"`

	// Derived by loadConfig.
	secretKey     []byte
	oldSecretKeys map[string][]byte
	logLevel      slog.Level
	rateLimits    map[string]slackapi.RateLimit
}

// loadConfig reads and validates the configuration, reporting every problem
// at once, at most one per variable. Error texts name variables, never their
// values (tokens, keys and URLs with passwords must not reach a log).
func loadConfig(getenv func(string) string) (config, error) {
	var c config
	params, err := env.GetFieldParams(&c)
	if err != nil {
		return c, err
	}
	environ := make(map[string]string, len(params))
	for _, p := range params {
		if v := getenv(p.Key); v != "" {
			environ[p.Key] = v
		}
	}
	var probs problems
	if err := env.ParseWithOptions(&c, env.Options{Environment: environ}); err != nil {
		for _, msg := range envProblems(err, reflect.TypeOf(c)) {
			probs.add(msg)
		}
	}
	// bad records a problem; its text starts with the variable's name.
	bad := func(format string, a ...any) { probs.add(fmt.Sprintf(format, a...)) }

	if c.SlackBotToken != "" && !strings.HasPrefix(c.SlackBotToken, "xoxb-") {
		bad("SLACK_BOT_TOKEN must be a bot token starting with xoxb-")
	}
	c.installProblems(bad)
	if c.SlackAppToken != "" && !strings.HasPrefix(c.SlackAppToken, "xapp-") {
		bad("SLACK_APP_TOKEN must be an app-level token starting with xapp-")
	}
	if !httpURL(c.SlackAPIURL) {
		bad("SLACK_API_URL must be an http(s) URL")
	} else if !strings.HasSuffix(c.SlackAPIURL, "/") {
		c.SlackAPIURL += "/" // slack-go appends method names
	}
	if !httpURL(c.SlackMCPURL) {
		bad("SLACK_MCP_URL must be an http(s) URL")
	}
	if c.RedisURL != "" {
		if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix") {
			bad("REDIS_URL must be a redis://, rediss:// or unix:// URL")
		}
	}
	switch c.LLMProvider {
	case "", "openai", "anthropic":
	default:
		bad("LLM_PROVIDER must be openai or anthropic")
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || !httpURL(c.PublicURL) || u.RawQuery != "" || u.Fragment != "" {
			bad("PUBLIC_URL must be an http(s) base URL without query or fragment (https://bobbin.example.com)")
		}
		c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	}
	if c.LLMBaseURL != "" && !httpURL(c.LLMBaseURL) {
		bad("LLM_BASE_URL must be an http(s) URL")
	}
	if c.LLMContextWindow < 1024 {
		bad("LLM_CONTEXT_WINDOW must be at least 1024")
	}
	if c.LLMMaxTokens < 0 {
		bad("LLM_MAX_TOKENS must not be negative")
	}
	if msg := c.llmOptionProblem(); msg != "" {
		bad("%s", msg)
	}
	if c.SecretKey != "" {
		k, err := session.DecodeSecretKey(c.SecretKey)
		if err != nil {
			bad("SECRET_KEY must be 32 bytes, base64-encoded (openssl rand -base64 32)")
		}
		c.secretKey = k
	}
	for i, e := range c.SecretKeyOld {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		id, b64, named := strings.Cut(e, ":") // base64 has no ':'
		if !named {
			b64 = e
		}
		k, err := session.DecodeSecretKey(b64)
		if err != nil || (named && id == "") {
			bad("SECRET_KEY_OLD entry %d must be a 32-byte base64 key, optionally prefixed with its id and ':'", i+1)
			continue
		}
		if !named {
			id = session.KeyID(k)
		}
		if c.oldSecretKeys == nil {
			c.oldSecretKeys = map[string][]byte{}
		}
		c.oldSecretKeys[id] = k
	}
	for i, a := range c.BotAdmins {
		c.BotAdmins[i] = strings.TrimSpace(a)
	}
	switch c.StreamMode {
	case "edit", "native", "auto":
	default:
		bad("STREAM_MODE must be edit, native or auto")
	}
	positive := []struct {
		name string
		d    time.Duration
	}{
		{"STREAM_EDIT_INTERVAL", c.StreamEditInterval},
		{"APPROVAL_TIMEOUT", c.ApprovalTimeout},
		{"SESSION_TTL", c.SessionTTL},
		{"SHUTDOWN_GRACE", c.ShutdownGrace},
		{"LEASE_TTL", c.LeaseTTL},
		{"SOCKET_PING_TIMEOUT", c.SocketPingTimeout},
		{"USERGROUP_CACHE_TTL", c.UsergroupCacheTTL},
	}
	for _, p := range positive {
		if p.d <= 0 {
			bad("%s must be a positive duration", p.name)
		}
	}
	// Slack ends a native stream about 5 minutes after it starts
	// (message_not_in_streaming_state): the reply must close it before.
	if c.StreamLifetime <= 0 || c.StreamLifetime >= bot.MaxStreamLifetime {
		bad("STREAM_LIFETIME must be a duration above 0 and below 5m (Slack ends a native stream about 5 minutes after it starts)")
	}
	if c.LeaseTTL > 0 && c.LeaseTTL < time.Second {
		bad("LEASE_TTL must be at least 1s")
	}
	if c.UpdatesPerMinute < 1 {
		bad("SLACK_UPDATES_PER_MINUTE must be at least 1")
	} else if rl, err := slackRateLimits(c.UpdatesPerMinute, c.SlackRateLimits); err != nil {
		bad("SLACK_RATE_LIMITS: %v", err)
	} else {
		c.rateLimits = rl
	}
	switch c.ThreadFollowups {
	case bot.FollowupsAll, bot.FollowupsMention:
	default:
		bad("THREAD_FOLLOWUPS must be all or mention")
	}
	if c.ThreadContextMessages < 0 || c.ThreadContextMessages > 1000 {
		bad("THREAD_CONTEXT_MESSAGES must be between 0 (off) and 1000")
	}
	if c.ToolFileMaxBytes < 1 || c.ToolFileMaxBytes > 1<<30 {
		bad("TOOL_FILE_MAX_BYTES must be between 1 and 1073741824 (Slack's 1 GB file limit)")
	}
	if c.MaxConcurrentTurns < 1 {
		bad("MAX_CONCURRENT_TURNS must be at least 1")
	}
	if c.UserTurnsPerMinute < 1 {
		bad("USER_TURNS_PER_MINUTE must be at least 1")
	}
	if c.SocketConnections < 1 || c.SocketConnections > 10 {
		bad("SOCKET_CONNECTIONS must be between 1 and 10")
	}
	if _, port, err := net.SplitHostPort(c.HTTPAddr); err != nil || !validPort(port) {
		bad("HTTP_ADDR must be host:port or :port, e.g. :8080")
	}
	if err := c.logLevel.UnmarshalText([]byte(c.LogLevel)); err != nil {
		bad("LOG_LEVEL must be debug, info, warn or error")
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		bad("LOG_FORMAT must be json or text")
	}
	return c, probs.err()
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// slackRateLimits is the governor's budget table: Slack's tiers, chat.update
// at SLACK_UPDATES_PER_MINUTE, then the SLACK_RATE_LIMITS overrides.
func slackRateLimits(updatesPerMinute int, overrides string) (map[string]slackapi.RateLimit, error) {
	limits := slackapi.DefaultRateLimits()
	u := limits["chat.update"]
	u.PerMinute = updatesPerMinute
	limits["chat.update"] = u
	return slackapi.ParseRateLimits(overrides, limits)
}
