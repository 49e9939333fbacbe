package bot

import (
	"context"
	"strings"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
)

// ToolReporter is optionally implemented by a ToolSource: Tools plus the
// servers in scope whose tools were left out because they are not ready
// (still starting, or failing). A turn does not wait for them: the model
// and, briefly, the person are told.
type ToolReporter interface {
	ToolsReport(ctx context.Context, a access.Access) ([]agent.Tool, []servers.NotReady, error)
}

// toolsFor asks the ToolSource for a's tools (and, when it can tell,
// which servers are not ready).
func (b *Bot) toolsFor(ctx context.Context, a access.Access) ([]agent.Tool, []servers.NotReady, error) {
	if tr, ok := b.opts.Tools.(ToolReporter); ok {
		return tr.ToolsReport(ctx, a)
	}
	tools, err := b.opts.Tools.Tools(ctx, a)
	return tools, nil, err
}

// notReadyWords lists the servers as "`a` (still starting), `b` (failing)".
func notReadyWords(nr []servers.NotReady) string {
	parts := make([]string, len(nr))
	for i, s := range nr {
		state := "still starting"
		if s.State == "failed" {
			state = "failing"
		}
		parts[i] = "`" + mrkdwn.InlineCode(s.Server) + "` (" + state + ")"
	}
	return strings.Join(parts, ", ")
}

// notReadySystem is what the model is told on top of the system prompt.
func notReadySystem(system string, nr []servers.NotReady) string {
	if len(nr) == 0 {
		return system
	}
	note := "Note: these tool servers are not ready, so their tools are missing from this turn: " + notReadyWords(nr) +
		". If the person asks for something only they could do, say so and suggest trying again in a minute."
	if system == "" {
		return note
	}
	return system + "\n\n" + note
}

// notReadyFooter is the person's brief line about them.
func notReadyFooter(nr []servers.NotReady) string {
	if len(nr) == 0 {
		return ""
	}
	return "_Answered without the tools of " + notReadyWords(nr) + "._"
}
