package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/mcp"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/anthropic"
	"github.com/bobbinbot/bobbin/provider/openai"
	"github.com/bobbinbot/bobbin/session"
)

// run is the whole program: load the configuration, build every component,
// serve until ctx ends, then shut down in reverse order.
func run(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := newLogger(stdout, cfg.LogFormat, cfg.logLevel)
	// go-redis's own lines (dial failures, pool warnings) would go to
	// stderr unredacted; send them through our handler. It is one
	// process-wide setting, made here because the logger is built here.
	session.RouteRedisLogs(log)

	// Redis (or the embedded one).
	store, err := session.Open(ctx, session.Options{
		URL:           cfg.RedisURL,
		SessionTTL:    cfg.SessionTTL,
		LeaseTTL:      cfg.LeaseTTL,
		SecretKey:     cfg.secretKey,
		OldSecretKeys: cfg.oldSecretKeys,
		Logger:        log,
	})
	if err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	defer func() {
		if err := store.Close(); err != nil {
			log.Warn("closing the session store", "err", err)
		}
	}()

	// The model.
	co := provider.ClientOptions{BaseURL: cfg.LLMBaseURL, APIKey: cfg.LLMAPIKey, Logger: log}
	var prov provider.Provider
	switch cfg.LLMProvider {
	case "anthropic":
		prov = anthropic.New(anthropic.Options{ClientOptions: co, DefaultMaxTokens: cfg.LLMMaxTokens})
	default:
		prov = openai.New(openai.Options{ClientOptions: co})
	}
	ag := agent.New(prov, agent.Options{
		Model:           cfg.LLMModel,
		MaxTokens:       cfg.LLMMaxTokens,
		ContextWindow:   cfg.LLMContextWindow,
		ApprovalTimeout: cfg.ApprovalTimeout,
		Logger:          log,
	})

	// Tools: MCP servers from the operator's file and from registrations.
	var mcfg *mcp.Config
	if cfg.MCPConfig != "" {
		if mcfg, err = mcp.LoadConfig(cfg.MCPConfig); err != nil {
			return fmt.Errorf("MCP_CONFIG: %w", err)
		}
	}
	mgr := mcp.NewManager(mcp.Options{
		Config:               mcfg,
		Store:                registrations{store},
		Pins:                 store,
		AllowPrivateNetworks: cfg.MCPAllowPrivateNetworks,
		Getenv:               getenv,
		Logger:               log,
		OAuth:                mcpOAuth(store, cfg.PublicURL, nil, cfg.ApprovalTimeout),
	})
	defer func() {
		if err := mgr.Close(); err != nil {
			log.Warn("closing MCP connections", "err", err)
		}
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := bot.NewMetrics(reg)

	host, _ := os.Hostname()
	b, err := bot.New(bot.Options{
		BotToken:           cfg.SlackBotToken,
		AppToken:           cfg.SlackAppToken,
		APIURL:             cfg.SlackAPIURL,
		Store:              store,
		Agent:              ag,
		Tools:              mgr,
		MCP:                mcpAdmin{m: mgr, allowPrivate: cfg.MCPAllowPrivateNetworks},
		ApprovalTimeout:    cfg.ApprovalTimeout,
		Logger:             log,
		Metrics:            metrics,
		Model:              cfg.LLMModel,
		SystemPrompt:       cfg.LLMSystemPrompt,
		StreamMode:         cfg.StreamMode,
		EditInterval:       cfg.StreamEditInterval,
		UpdatesPerMinute:   cfg.UpdatesPerMinute,
		PingInterval:       cfg.SocketPingTimeout,
		MaxConcurrentTurns: cfg.MaxConcurrentTurns,
		UserTurnsPerMinute: cfg.UserTurnsPerMinute,
		Admins:             cfg.BotAdmins,
		AllowBots:          cfg.AllowBotMessages,
		SocketConnections:  cfg.SocketConnections,
		ShutdownGrace:      cfg.ShutdownGrace,
		ReplicaID:          replicaID(host),
	})
	if err != nil {
		return err
	}

	// HTTP: health, readiness, metrics.
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("HTTP_ADDR: %w", err)
	}
	srv := &http.Server{Handler: httpHandler(b, reg, mgr.CallbackHandler(nil)), ReadHeaderTimeout: 5 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	log.Info("bobbin: serving", "http", ln.Addr().String(), "provider", cfg.LLMProvider, "model", cfg.LLMModel, "stream_mode", cfg.StreamMode)

	runErr := b.Run(ctx)

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("HTTP shutdown", "err", err)
	}
	if err := <-httpDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("HTTP server", "err", err)
	}
	log.Info("bobbin: stopped")
	return runErr
}

// httpHandler serves /healthz (the process is up), /readyz (socket
// connected and Redis answering), /metrics and, for MCP OAuth, the
// callback and client metadata document under /oauth/ (PUBLIC_URL points
// here).
func httpHandler(b *bot.Bot, reg *prometheus.Registry, oauth http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /oauth/", oauth)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := b.Ready(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

// replicaID names this process in leases and logs: host and pid, no colon.
func replicaID(host string) string {
	if host == "" {
		host = "bobbin"
	}
	id := fmt.Sprintf("%s-%d", host, os.Getpid())
	out := make([]byte, 0, len(id))
	for i := 0; i < len(id); i++ {
		if c := id[i]; c != ':' && c > ' ' && c < 0x7f {
			out = append(out, c)
		}
	}
	return string(out)
}
