package bot

import (
	"context"

	"github.com/bobbinbot/bobbin/agent"
)

// nopRunner is an agent that answers nothing.
type nopRunner struct{}

func (nopRunner) Run(context.Context, agent.Turn) (agent.Result, error) { return agent.Result{}, nil }
