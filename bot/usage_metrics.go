package bot

import "github.com/prometheus/client_golang/prometheus"

// UsageMetrics are the model-usage instruments (issue 27): tokens and
// cost by model, never by person, and budget refusals by scope.
type UsageMetrics struct {
	// Tokens by model and kind: input (not cached), cached_input, output.
	Tokens *prometheus.CounterVec
	// Cost by model, in the currency of the configured prices.
	Cost *prometheus.CounterVec
	// BudgetRefusals by scope: workspace, channel, person.
	BudgetRefusals *prometheus.CounterVec
}

func newUsageMetrics(reg prometheus.Registerer) *UsageMetrics {
	m := &UsageMetrics{
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_model_tokens_total", Help: "Model tokens metered, by model and kind (input, cached_input, output).",
		}, []string{"model", "kind"}),
		Cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_model_cost_total", Help: "Model cost from the configured prices, by model, in currency units.",
		}, []string{"model"}),
		BudgetRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bobbin_budget_refusals_total", Help: "Model calls refused because a budget was used up, by scope.",
		}, []string{"scope"}),
	}
	if reg != nil {
		reg.MustRegister(m.Tokens, m.Cost, m.BudgetRefusals)
	}
	return m
}
