package bot

import (
	"context"
	"errors"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot/admin"
	"github.com/bobbinbot/bobbin/bot/ask"
	"github.com/bobbinbot/bobbin/bot/people"
	"github.com/bobbinbot/bobbin/session"
)

// The root's side of bot/ask (approvals, servers' questions, Connect
// prompts): what the prompts need of the app (roles, the audit log, the
// turns' stop and wait bookkeeping, the App Home), and the routing of
// clicks to them.

func (b *Bot) newPrompts() *ask.Prompts {
	return ask.New(ask.Options{
		API:        b.slack,
		Store:      b.store,
		Roles:      askRoles{b},
		Audit:      b.audit,
		Jobs:       b.jobs,
		Timeout:    b.opts.ApprovalTimeout,
		CheckForm:  b.opts.CheckForm,
		HTTPClient: b.webhookClient(),
		Logger:     b.log,
		Waiting:    b.waits.waiting,
		StoppedBy: func(cause error) (string, bool) {
			var stop stopCause
			ok := errors.As(cause, &stop)
			return stop.user, ok
		},
		Shutdown: errShutdown,
		Stop:     func(k session.ThreadKey, user string) { b.cancels.cancel(k, stopCause{user: user}) },
		Home:     func(ctx context.Context, team, user string) { b.admin.PublishHome(ctx, team, user) },
	})
}

// Prompts asks people in threads: cmd/bot points the MCP manager's
// Elicitor (Ask), ConnectPrompter (PromptConnect) and OAuth callback
// (ConnectDone) at it.
func (b *Bot) Prompts() *ask.Prompts { return b.ask }

// askRoles are the roles bot/ask checks clicks with.
type askRoles struct{ b *Bot }

func (r askRoles) MayAct(ctx context.Context, team, user, userTeam, requester, action string) (bool, string) {
	return r.b.people.MayAct(ctx, team, user, userTeam, requester, action)
}

func (r askRoles) IsAdmin(ctx context.Context, team, user, userTeam string) (admin, unchecked bool) {
	role, why := r.b.people.Role(ctx, team, user, userTeam)
	return role == people.Admin, why == people.LookupFailed
}

func (r askRoles) MaySee(ctx context.Context, team, user, userTeam string) bool {
	role, why := r.b.people.Role(ctx, team, user, userTeam)
	return role != people.None || why == people.Guest
}

// approverFor returns the Approver of a turn in thread k started by
// requester.
func (b *Bot) approverFor(k session.ThreadKey, requester string) agent.Approver {
	return b.ask.Approver(k, requester)
}

// tell answers the person who clicked, visible only to them.
func (b *Bot) tell(ctx context.Context, cb slack.InteractionCallback, threadTS, text string) {
	b.ask.Tell(ctx, cb, threadTS, text)
}

// handleControl handles prompt buttons, private results, Home buttons and
// the prompts' and add-server forms. handled is false for callbacks that
// are not ours.
func (b *Bot) handleControl(ctx context.Context, cb slack.InteractionCallback) (ack any, handled bool) {
	switch cb.Type {
	case slack.InteractionTypeBlockActions:
		prompts := ask.Clicks(cb) // approvals and questions
		for _, a := range prompts {
			b.ask.Action(ctx, cb, a)
		}
		private := privateClicks(cb) // private.go
		for _, a := range private {
			b.privateAction(ctx, cb, a)
		}
		home := admin.Clicks(cb) // bot/admin
		for _, a := range home {
			b.admin.Action(ctx, cb, a)
		}
		return nil, len(prompts)+len(private)+len(home)+connectLinks(cb) > 0
	case slack.InteractionTypeViewSubmission:
		switch cb.View.CallbackID {
		case admin.CallbackAdd:
			return b.admin.Submit(ctx, cb), true
		case ask.CallbackQuestion:
			return b.ask.Submit(ctx, cb), true
		}
	}
	return nil, false
}

// connectLinks counts clicks on Connect buttons: links, whose
// block_actions are only acked.
func connectLinks(cb slack.InteractionCallback) int {
	n := 0
	for _, a := range cb.ActionCallback.BlockActions {
		if a != nil && a.ActionID == ask.ActionConnectLink {
			n++
		}
	}
	return n
}
