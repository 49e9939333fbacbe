package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/mcp"
	"github.com/bobbinbot/bobbin/session"
)

// run is the whole program: load the configuration and check what it
// points at, build every component, authenticate with Slack, serve until
// ctx ends, then shut down in reverse order.
func run(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(getenv)
	var probs problems
	if err != nil {
		var ce *configError
		if !errors.As(err, &ce) {
			return err
		}
		for _, p := range ce.problems {
			probs.add(p)
		}
	}
	log := newLogger(stdout, cfg.LogFormat, cfg.logLevel)
	// go-redis's own lines (dial failures, pool warnings) would go to
	// stderr unredacted; send them through our handler. It is one
	// process-wide setting, made here because the logger is built here.
	session.RouteRedisLogs(log)

	// What the environment points at is checked in the same pass, so one
	// start reports every problem.
	store := openStore(ctx, cfg, log, &probs)
	if store != nil {
		defer func() {
			if err := store.Close(); err != nil {
				log.Warn("closing the session store", "err", err)
			}
		}()
	}
	mcfg := loadMCPConfig(cfg.MCPConfig, getenv, &probs)
	profiles := loadProfiles(cfg.ProfilesConfig, getenv, mcfg, &probs)
	tr := newTracing(getenv, log, &probs)
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.shutdown(sctx); err != nil {
			log.Warn("flushing traces", "err", err)
		}
	}()
	ln := listenHTTP(cfg.HTTPAddr, &probs)
	if ln != nil {
		defer ln.Close() // Serve closes it too; this covers the early returns
	}
	if err := probs.err(); err != nil {
		return err
	}

	// The model.
	ag := agent.New(newProvider(cfg, log), agent.Options{
		Model:           cfg.LLMModel,
		MaxTokens:       cfg.LLMMaxTokens,
		ContextWindow:   cfg.LLMContextWindow,
		ApprovalTimeout: cfg.ApprovalTimeout,
		ToolTimeout:     toolHangGuard(cfg.ApprovalTimeout),
		NoImages:        !cfg.LLMImages,
		Logger:          log,
		Tracer:          tr.tracer,
		ProviderName:    cfg.LLMProvider,
		CaptureContent:  tr.capture,
	})

	// Tools: MCP servers from the operator's file and from registrations.
	// Connect prompts and servers' questions go to the bot (seams, set
	// once the bot exists).
	seams := &slackSeams{}
	// Slack's MCP server signs people in with the app's own client.
	slackPreset := mcp.SlackPreset(cfg.SlackClientID, cfg.SlackClientSecret)
	mgr := mcp.NewManager(mcp.Options{
		Config:               mcfg,
		Store:                registrations{store},
		Pins:                 store,
		Versions:             store,
		Policies:             policyStore{store},
		AllowPrivateNetworks: cfg.MCPAllowPrivateNetworks,
		Getenv:               getenv,
		Logger:               log,
		OAuth:                mcpOAuth(store, cfg.PublicURL, seams, cfg.ApprovalTimeout, log),
		Presets:              map[string]mcp.Preset{servers.PresetSlack: slackPreset},
		Elicitor:             seams,
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
		Installs:           cfg.installOptions(),
		APIURL:             cfg.SlackAPIURL,
		Store:              store,
		Agent:              ag,
		Tools:              mcpTools{mgr},
		MCP:                mcpAdmin{Manager: mgr, allowPrivate: cfg.MCPAllowPrivateNetworks, slackURL: cfg.SlackMCPURL, slack: slackPreset},
		ApprovalTimeout:    cfg.ApprovalTimeout,
		UsergroupCacheTTL:  cfg.UsergroupCacheTTL,
		ToolFileMaxBytes:   cfg.ToolFileMaxBytes,
		Logger:             log,
		Metrics:            metrics,
		Model:              cfg.LLMModel,
		SystemPrompt:       cfg.LLMSystemPrompt,
		StreamMode:         cfg.StreamMode,
		EditInterval:       cfg.StreamEditInterval,
		StreamLifetime:     cfg.StreamLifetime,
		UpdatesPerMinute:   cfg.UpdatesPerMinute,
		RateLimits:         cfg.rateLimits,
		PingInterval:       cfg.SocketPingTimeout,
		MaxConcurrentTurns: cfg.MaxConcurrentTurns,
		UserTurnsPerMinute: cfg.UserTurnsPerMinute,
		Admins:             cfg.BotAdmins,
		AllowBots:          cfg.AllowBotMessages,
		SocketConnections:  cfg.SocketConnections,
		ShutdownGrace:      cfg.ShutdownGrace,
		ReplicaID:          replicaID(host),

		ThreadFollowups:       cfg.ThreadFollowups,
		ThreadContextMessages: threadContextMessages(cfg.ThreadContextMessages),
		ThreadCache:           threadCache(store, cfg), // slackctx.go
		ContextWindow:         cfg.LLMContextWindow,
		Tokens:                tokenCounter(cfg.LLMModel),
		CheckForm:             checkForm,
		Profiles:              profileOptions(cfg, profiles, log),
		Tracer:                tr.tracer,
	})
	if err != nil {
		return err
	}
	seams.b.Store(b)

	// HTTP: health, readiness, metrics and the MCP OAuth callback.
	// /healthz answers while the bot authenticates (a slow Slack is no
	// reason to restart the pod); /readyz stays unready until a socket is
	// open.
	srv := &http.Server{Handler: httpHandler(b, reg, mgr.CallbackHandler(seams.callbackDone), b.InstallHandler()), ReadHeaderTimeout: 5 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("HTTP shutdown", "err", err)
		}
		if err := <-httpDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("HTTP server", "err", err)
		}
		log.Info("bobbin: stopped")
	}()

	// The tokens are checked before anything is served (the bot token
	// when set; installations carry their own): a token Slack rejects ends
	// the process with a message naming its variable.
	if err := b.Authenticate(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while Slack was not answering
		}
		return err
	}
	log.Info("bobbin: serving", "http", ln.Addr().String(), "provider", cfg.LLMProvider, "model", cfg.LLMModel, "stream_mode", cfg.StreamMode)
	return b.Run(ctx)
}

// toolHangGuard is the agent's bound on one tool call. MCP calls carry
// their own clock (60 s of the server's time) that pauses while a person
// connects an account or answers a server's question, each of which may
// take up to APPROVAL_TIMEOUT; this only catches a call that hangs beyond
// any of that.
func toolHangGuard(approval time.Duration) time.Duration {
	return time.Minute + 3*max(approval, time.Minute)
}

// readyTimeout bounds /readyz's Redis ping; probes must wait longer
// (deploy_test.go checks the example's).
const readyTimeout = 2 * time.Second

// httpHandler serves /healthz (the process is up), /readyz (socket
// connected and Redis answering), /metrics and, for MCP OAuth, the
// callback and client metadata document under /oauth/ (PUBLIC_URL points
// here), and with installations the Slack install pages under /slack/.
func httpHandler(b *bot.Bot, reg *prometheus.Registry, oauth, install http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /oauth/", oauth)
	mountInstall(mux, install)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
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

// threadContextMessages maps THREAD_CONTEXT_MESSAGES to bot.Options (0
// there means the default; off is negative).
func threadContextMessages(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// tokenCounter counts for the thread-context share with the model's
// tokenizer (shared with the agent's); nil (a byte estimate) without one.
func tokenCounter(model string) bot.TokenCounter {
	c, err := agent.NewCounter(model)
	if err != nil || c == nil {
		return nil
	}
	return c
}
