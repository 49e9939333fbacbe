package stream

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// Agent sessions (agents.sessions.setStatus, reference
// slack-agents-2026.md §2): a thread's status in Slack. A turn sets
// "processing" while it runs (Slack then draws its own Stop, which sends
// agent_session_stopped: agentview.go), "suspended" while it waits on a
// person, and "active" when it is done. A new session gets the first
// question as its title. Without streaming nothing clears "processing"
// implicitly (Slack times it out after an hour), so the end is sent even
// when the turn was stopped. A workspace where Slack refuses these calls
// (not an agent app, method unknown, scope missing) works as before: the
// bot warns once and stops calling.

// Sessions remembers the workspaces that refuse agents.sessions.* and
// those that refuse task_card blocks in messages (cardblocks.go); the
// replies of one bot share it (Options.Sessions). The zero value is ready.
type Sessions struct {
	refused sync.Map // team → struct{}
	noCards sync.Map // team → struct{}
}

// sessionRefusals are the errors that mean "this workspace has no agent
// sessions", as opposed to a problem with one thread.
var sessionRefusals = map[string]bool{
	"not_allowed": true, "unknown_method": true, "missing_scope": true, "feature_disabled": true,
	"not_allowed_token_type": true, "method_deprecated": true, "no_permission": true, "access_denied": true,
	"not_agent_app": true,
}

// sessionState is a reply's view of its thread's session.
type sessionState struct {
	sent  string // last status sent ("" none)
	title string // the first question, for a new session
	// failed is a status Slack refused for this thread (not_authorized,
	// channel_not_found, …): not asked again until the status changes.
	failed string
	// working: Options.OnWorking was called.
	working bool
}

// sessionStatusOf maps the reply's status line to a session status.
func sessionStatusOf(status string) string {
	if strings.HasPrefix(status, "Waiting for") {
		return slack.AgentSessionStatusSuspended // on a person
	}
	return slack.AgentSessionStatusProcessing
}

// syncSession sends the session status the turn is in, when it changed.
// Interim statuses are lossy and tried once; the next tick tries again.
func (r *Reply) syncSession(ctx context.Context, status string) {
	r.sendSession(ctx, sessionStatusOf(status), false)
}

// endSession moves the session out of "processing" at the end of the
// turn. A native stream that stopped cleanly did so already (its
// chat.stopStream carried session_status active, native.go).
func (r *Reply) endSession(ctx context.Context) {
	if r.as.sent == "" || (r.ns.stopped && !r.ns.failed) {
		return
	}
	r.sendSession(ctx, slack.AgentSessionStatusActive, true)
}

// statusUnknown marks a session whose status Slack may have changed.
const statusUnknown = "?"

// streamEnded notes that the native stream ended before the turn: Slack
// may have made the session "active" (chat.stopStream's default, a
// stream that timed out) or left it (a person's Stop), so the turn's
// status is sent again at the next tick, and at the end.
func (r *Reply) streamEnded() {
	if r.as.sent != "" {
		r.as.sent = statusUnknown
	}
}

func (r *Reply) sendSession(ctx context.Context, status string, final bool) {
	team, refused := r.k.Team, r.o.Sessions
	if status == r.as.sent || status == r.as.failed || r.lost {
		return
	}
	if _, no := refused.refused.Load(team); no {
		return
	}
	c := slackapi.Call{Team: team, Method: slackapi.AgentsSessionsSetStatus, Prio: slackapi.Lossy,
		Merge: "session:" + r.k.Channel + ":" + r.k.ThreadTS}
	if final {
		// Not must-deliver: Slack times "processing" out by itself, and
		// the answer is already there.
		c.Wait = 30 * time.Second
	}
	p := slack.AgentSessionSetStatusParameters{Status: status, ChannelID: r.k.Channel, ThreadTS: r.k.ThreadTS}
	if r.as.sent == "" {
		p.Title, p.InitiatorUserID = r.as.title, r.requester // creation only
	}
	err := r.api.Do(ctx, c, func(ctx context.Context, api *slack.Client) error {
		_, err := api.SetAgentSessionStatusContext(ctx, p)
		return err
	})
	var se slack.SlackErrorResponse
	switch {
	case err == nil:
		r.as.sent, r.as.failed = status, ""
		working := status == slack.AgentSessionStatusProcessing || status == slack.AgentSessionStatusSuspended
		if working && r.o.OnWorking != nil && !r.as.working {
			r.as.working = true
			r.o.OnWorking()
		}
	case errors.As(err, &se) && sessionRefusals[se.Err]:
		if _, loaded := refused.refused.LoadOrStore(team, struct{}{}); !loaded {
			r.log.Warn("bot: Slack refuses agent sessions in this workspace; turns go on without a session status or Slack's Stop (enable the agent features in the app's settings)",
				"team", team, "err", se.Err)
		}
	default:
		if errors.As(err, &se) && !slackapi.IsRateLimited(err) {
			r.as.failed = status
		}
		r.log.Debug("bot: agent session status not sent", append(threadAttrs(team, r.k.Channel, r.k.ThreadTS), "status", status, "err", err)...)
	}
}
