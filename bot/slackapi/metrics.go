package slackapi

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the Web API call instruments: outcomes and 429s by method
// (the transport), waits, drops and budget use (the governor). NewMetrics
// leaves them unregistered: the bot registers them with its own (their
// names are part of the public contract).
type Metrics struct {
	SlackCalls        *prometheus.CounterVec
	RateLimited       *prometheus.CounterVec
	SlackWait         *prometheus.HistogramVec
	SlackDropped      *prometheus.CounterVec
	SlackBudgetInUse  *prometheus.GaugeVec
	SlackBudgetFactor *prometheus.GaugeVec
	SlackBudgetLag    *prometheus.GaugeVec
}

// NewMetrics creates the instruments, unregistered.
func NewMetrics() *Metrics {
	return &Metrics{
		SlackCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_slack_calls_total", Help: "Slack Web API calls, by method and status (ok or the Slack error code).",
		}, []string{"method", "status"}),
		RateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_slack_ratelimited_total", Help: "Slack Web API calls answered 429, by method.",
		}, []string{"method"}),
		SlackWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "bobbin_slack_budget_wait_seconds", Help: "Time a Slack Web API call waited for the shared budget, by method and priority (must or lossy).",
			Buckets: []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60},
		}, []string{"method", "priority"}),
		SlackDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_slack_calls_dropped_total", Help: "Lossy Slack Web API calls not made, by method and reason (dropped: no budget in time; merged: replaced by a newer call).",
		}, []string{"method", "reason"}),
		SlackBudgetInUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bobbin_slack_budget_in_use", Help: "Part of a Slack method's workspace burst spent (0 to 1), as last seen by this process.",
		}, []string{"method"}),
		SlackBudgetFactor: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bobbin_slack_budget_factor", Help: "Share of a Slack method's configured budget in use after 429s (1: all; shrinks after 429s, recovers slowly).",
		}, []string{"method"}),
		SlackBudgetLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bobbin_slack_budget_lag_seconds", Help: "How late this process's calls of a Slack method may reach Slack after their budget was granted, as last measured (the budget keeps that much of the burst, less one token's interval, unspent).",
		}, []string{"method"}),
	}
}
