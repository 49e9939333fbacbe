package provider

import (
	"log/slog"
	"net/http"
	"time"
)

// ClientOptions are the settings every HTTP model client takes. Zero values
// mean the defaults noted on each field.
type ClientOptions struct {
	// BaseURL is the endpoint root (OpenAI: ".../v1"; Anthropic: without
	// "/v1").
	BaseURL string
	// APIKey is sent as the protocol's auth header and never logged.
	APIKey string
	// HTTPClient is used for requests; nil means a client with a dialer that
	// honours ConnectTimeout.
	HTTPClient *http.Client
	// Headers are extra request headers.
	Headers map[string]string
	// ConnectTimeout bounds the TCP/TLS connect (default 10 s).
	ConnectTimeout time.Duration
	// FirstByteTimeout bounds the wait for response headers (default 60 s).
	FirstByteTimeout time.Duration
	// IdleTimeout bounds the gap between data events; comments do not reset
	// it (default 90 s).
	IdleTimeout time.Duration
	// RequestTimeout bounds a whole stream (default 10 min).
	RequestTimeout time.Duration
	// MaxAttempts is how many times a request is tried before the first byte
	// (default 3).
	MaxAttempts int
	// Logger receives warnings (never secrets); nil discards.
	Logger *slog.Logger
}
