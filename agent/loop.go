package agent

import (
	"context"
	"errors"
)

type run struct {
	a *Agent
	t Turn
}

func newRun(a *Agent, t Turn) *run { return &run{a: a, t: t} }

func (r *run) run(ctx context.Context) (Result, error) {
	// Placeholder until the loop lands; keeps the helpers referenced.
	if _, err := r.a.schemas.validateArgs(nil, "{}"); err != nil {
		return Result{}, err
	}
	_ = noLoader{}
	discard{}.Observe(Event{})
	return Result{}, errors.New("agent: not implemented yet")
}
