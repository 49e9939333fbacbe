package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/bobbinbot/bobbin/mcp"
	"github.com/bobbinbot/bobbin/session"
)

// The start-up checks of what the environment points at: Redis, the MCP
// config file, the HTTP listen address. Each records its problems in probs
// (naming the variable, never its value) and is skipped when the variable
// itself was already reported, so run reports everything in one pass.

// redisCheckTimeout bounds connecting to Redis at start-up.
const redisCheckTimeout = 10 * time.Second

// openStore opens the session store; nil when it could not, or when there
// is nothing to check (the embedded Redis) and start-up fails anyway.
func openStore(ctx context.Context, cfg config, log *slog.Logger, probs *problems) *session.Store {
	if probs.seen["REDIS_URL"] || (cfg.RedisURL == "" && len(probs.list) > 0) {
		return nil
	}
	octx, cancel := context.WithTimeout(ctx, redisCheckTimeout)
	defer cancel()
	store, err := session.Open(octx, session.Options{
		URL:           cfg.RedisURL,
		SessionTTL:    cfg.SessionTTL,
		LeaseTTL:      cfg.LeaseTTL,
		SecretKey:     cfg.secretKey,
		OldSecretKeys: cfg.oldSecretKeys,
		Logger:        log,
	})
	if err != nil {
		probs.add("REDIS_URL points at a Redis that does not answer: " + redisReason(err, cfg.RedisURL))
		return nil
	}
	return store
}

// redisReason says why Redis could not be used, without the URL (its
// password) and without the host it names.
func redisReason(err error, rawURL string) string {
	msg := err.Error()
	for _, code := range []string{"WRONGPASS", "NOAUTH", "NOPERM", "LOADING", "MASTERDOWN"} {
		if strings.Contains(msg, code) {
			return "Redis answered " + code + " (check the user and password in the URL)"
		}
	}
	var dns *net.DNSError
	var errno syscall.Errno
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within " + redisCheckTimeout.String()
	case errors.As(err, &dns):
		return "its host name does not resolve"
	case errors.As(err, &errno):
		return errno.Error()
	case strings.Contains(msg, "tls:"), strings.Contains(msg, "x509:"):
		return "the TLS handshake failed"
	case strings.Contains(msg, "all sentinels"):
		return "no Sentinel answered"
	}
	// Anything else: the message, minus credentials and the host.
	msg = scrub(msg)
	if u, perr := url.Parse(rawURL); perr == nil && u.Host != "" {
		msg = strings.ReplaceAll(msg, u.Host, "<host>")
		if h := u.Hostname(); h != "" {
			msg = strings.ReplaceAll(msg, h, "<host>")
		}
	}
	return msg
}

// loadMCPConfig reads MCP_CONFIG and checks the ${VARS} it references;
// nil when it is unset or has problems (each one recorded).
func loadMCPConfig(path string, getenv func(string) string, probs *problems) *mcp.Config {
	if path == "" {
		return nil
	}
	cfg, err := mcp.LoadConfigChecked(path, getenv)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			probs.add("MCP_CONFIG: " + line)
		}
		return nil
	}
	return cfg
}

// listenHTTP opens HTTP_ADDR; nil when it could not.
func listenHTTP(addr string, probs *problems) net.Listener {
	if probs.seen["HTTP_ADDR"] {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		reason := "the address cannot be used"
		var errno syscall.Errno
		if errors.As(err, &errno) {
			reason = errno.Error()
		}
		probs.add("HTTP_ADDR cannot be listened on: " + reason)
		return nil
	}
	return ln
}
