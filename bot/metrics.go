package bot

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// Metrics are the bot's Prometheus instruments, registered on a registry the
// caller owns (one per process; no globals).
type Metrics struct {
	Turns          *prometheus.CounterVec
	TurnDuration   prometheus.Histogram
	FirstText      prometheus.Histogram
	SlackCalls     *prometheus.CounterVec
	RateLimited    *prometheus.CounterVec
	ToolCalls      *prometheus.CounterVec
	Tokens         *prometheus.CounterVec
	ActiveTurns    prometheus.Gauge
	Sockets        prometheus.Gauge
	Deduped        prometheus.Counter
	Events         *prometheus.CounterVec
	AckLatency     prometheus.Histogram
	QueuedMessages prometheus.Counter
	// Signs counts signs of life by kind (reaction, note, placeholder) (sign.go).
	Signs           *prometheus.CounterVec
	UserRateLimited prometheus.Counter

	// The Slack call governor (slackapi/governor.go).
	SlackWait         *prometheus.HistogramVec
	SlackDropped      *prometheus.CounterVec
	SlackBudgetInUse  *prometheus.GaugeVec
	SlackBudgetFactor *prometheus.GaugeVec
	SlackBudgetLag    *prometheus.GaugeVec

	// Files and thread context (download.go, threadctx.go).
	FileDownloads     *prometheus.CounterVec
	FileDownloadBytes prometheus.Counter
	ThreadImports     *prometheus.CounterVec
	ContextReplies    prometheus.Counter
	// Installations (bot/install): installed, uninstalled, token_refreshed,
	// token_refresh_failed, install_failed.
	InstallEvents *prometheus.CounterVec
	// Model usage and budgets (usage_metrics.go).
	Usage *UsageMetrics
	// Feedback counts 👍/👎 clicks on answers (feedback.go).
	Feedback *prometheus.CounterVec
	// FeedbackVotes is bobbin_feedback_votes{value}, read from the store
	// at each scrape (feedback.go).
	FeedbackVotes *feedbackVotes

	// api holds the Web API call instruments above for slackapi.
	api *slackapi.Metrics
}

// NewMetrics creates the instruments and registers them on reg; a nil reg
// leaves them unregistered (tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	api := slackapi.NewMetrics()
	m := &Metrics{
		api:               api,
		SlackCalls:        api.SlackCalls,
		RateLimited:       api.RateLimited,
		SlackWait:         api.SlackWait,
		SlackDropped:      api.SlackDropped,
		SlackBudgetInUse:  api.SlackBudgetInUse,
		SlackBudgetFactor: api.SlackBudgetFactor,
		SlackBudgetLag:    api.SlackBudgetLag,
		Turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_turns_total", Help: "Turns finished, by outcome.",
		}, []string{"outcome"}),
		TurnDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "bobbin_turn_duration_seconds", Help: "Wall time of a turn.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 12),
		}),
		FirstText: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "bobbin_first_visible_text_seconds", Help: "Time from the model's first text to its first appearance in Slack.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}),
		ToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_tool_calls_total", Help: "Tool calls, by decision and result.",
		}, []string{"decision", "result"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_tokens_total", Help: "Model tokens, by kind (input, output, cache_read).",
		}, []string{"kind"}),
		ActiveTurns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bobbin_active_turns", Help: "Turns running in this process.",
		}),
		Sockets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bobbin_socket_connections", Help: "Open socket-mode connections of this process.",
		}),
		Deduped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bobbin_events_deduped_total", Help: "Events dropped as duplicates.",
		}),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_envelopes_total", Help: "Socket-mode envelopes received, by type.",
		}, []string{"type"}),
		AckLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "bobbin_ack_latency_seconds", Help: "Time from receiving an envelope to its ack.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 13),
		}),
		Signs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_signs_of_life_total",
			Help: "Signs of life shown on mentions whose reply showed nothing within a second, by kind (reaction, note, placeholder).",
		}, []string{"kind"}),
		QueuedMessages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bobbin_queued_messages_total", Help: "Messages queued behind a running turn.",
		}),
		UserRateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bobbin_user_rate_limited_total", Help: "Messages refused by the per-person turn budget.",
		}),
		FileDownloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_slack_file_downloads_total", Help: "Downloads from Slack's file host, by result (ok, sign_in, too_large, refused_host, refused_redirect, http_NNN, error).",
		}, []string{"result"}),
		FileDownloadBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bobbin_slack_file_download_bytes_total", Help: "Bytes downloaded from Slack's file host.",
		}),
		ThreadImports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_thread_context_imports_total", Help: "Imports of a thread's earlier messages at a session's first turn, by result (full, partial, failed).",
		}, []string{"result"}),
		ContextReplies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bobbin_thread_context_replies_total", Help: "Thread replies recorded as context without a turn (THREAD_FOLLOWUPS=mention).",
		}),
		Feedback: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_feedback_total", Help: "Feedback clicks on answers, by value (positive or negative).",
		}, []string{"value"}),
		InstallEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_slack_install_events_total", Help: "Slack installation events, by event (installed, install_failed, uninstalled, token_refreshed, token_refresh_failed).",
		}, []string{"event"}),
		FeedbackVotes: newFeedbackVotes(),
	}
	if reg != nil {
		reg.MustRegister(m.Turns, m.TurnDuration, m.FirstText, m.SlackCalls, m.RateLimited, m.ToolCalls,
			m.Tokens, m.ActiveTurns, m.Sockets, m.Deduped, m.Events, m.AckLatency, m.QueuedMessages, m.Signs, m.UserRateLimited,
			m.SlackWait, m.SlackDropped, m.SlackBudgetInUse, m.SlackBudgetFactor, m.SlackBudgetLag,
			m.FileDownloads, m.FileDownloadBytes, m.ThreadImports, m.ContextReplies, m.InstallEvents, m.Feedback, m.FeedbackVotes)
	}
	m.Usage = newUsageMetrics(reg)
	return m
}
