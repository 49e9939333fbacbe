package agent

import (
	"cmp"
	"context"
	"errors"

	"github.com/bobbinbot/bobbin/provider"
)

// Budget is the seam for usage budgets: the agent asks it before every
// model call and tells it every call's usage. The bot implements it with
// the shared store, so replicas see one another's spending.
type Budget interface {
	// Allow is asked before a model call. An *OverBudgetError ends the
	// turn cleanly with its Notice; any other error is logged and the call
	// goes ahead (a metering outage must not stop the bot).
	Allow(ctx context.Context) error
	// Spent records one model call's usage, with the model as requested.
	// It is called for every call that reported usage, summaries included,
	// before the turn goes on, so nothing spent is lost when the turn ends
	// right after.
	Spent(ctx context.Context, model string, u provider.Usage)
}

// OverBudgetError refuses a model call; Notice is the message for the
// person (which limit, when it resets).
type OverBudgetError struct{ Notice string }

func (e *OverBudgetError) Error() string { return "agent: over budget: " + e.Notice }

// model is the model of this turn's requests: Turn.Model or Options.Model.
func (r *run) model() string { return cmp.Or(r.t.Model, r.a.opts.Model) }

// maxTokens is Turn.MaxTokens capped by Options.MaxTokens when both are set.
func (r *run) maxTokens() int {
	t, o := r.t.MaxTokens, r.a.opts.MaxTokens
	switch {
	case t <= 0:
		return o
	case o <= 0:
		return t
	}
	return min(t, o)
}

// provider is Turn.Provider or the Agent's.
func (r *run) provider() provider.Provider {
	if r.t.Provider != nil {
		return r.t.Provider
	}
	return r.a.p
}

// allow asks the budget about the next model call; over reports a refusal,
// already turned into the turn's notice.
func (r *run) allow(ctx context.Context) (over bool) {
	if r.t.Budget == nil {
		return false
	}
	err := r.t.Budget.Allow(ctx)
	var ob *OverBudgetError
	switch {
	case err == nil:
		return false
	case errors.As(err, &ob):
		r.notice(OverBudget, ob.Notice)
		return true
	case ctx.Err() != nil:
		return false // the loop notices the cancellation
	}
	r.a.log.Warn("agent: budget check failed; going ahead", "err", err)
	return false
}

// spent tells the budget about one call's usage.
func (r *run) spent(ctx context.Context, u provider.Usage) {
	if r.t.Budget == nil || !u.Known {
		return
	}
	r.t.Budget.Spent(context.WithoutCancel(ctx), r.model(), u)
}
