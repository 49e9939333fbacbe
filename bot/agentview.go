package bot

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// Slack's agent messaging experience (features.agent_view, reference
// slack-agents-2026.md §1–§2). Apps created today get it: a DM with the
// app opens with app_home_opened (tab "messages") instead of
// assistant_thread_started, the channel the person views arrives as
// app_context_changed (per DM, not per thread), Slack draws its own
// Stop on a processing session and sends agent_session_stopped, and a
// person's rename of a session arrives as agent_session_title_changed.
// Apps still on assistant_view send the assistant_* events
// (assistant.go); both sets are handled.

// agentEvent is the part of the agent-view events the bot reads.
type agentEvent struct {
	Type     string `json:"type"`
	User     string `json:"user"`
	Channel  string `json:"channel"`
	ThreadTS string `json:"thread_ts"`
	Tab      string `json:"tab"`
	EventTS  string `json:"event_ts"`
	// Title is agent_session_title_changed's new title.
	Title   string `json:"title"`
	Context struct {
		Entities []struct {
			Type         string          `json:"type"`
			Value        json.RawMessage `json:"value"`
			TeamID       string          `json:"team_id"`
			EnterpriseID string          `json:"enterprise_id"`
		} `json:"entities"`
	} `json:"context"`
}

// agentPaneTS stands for "the whole DM" where a thread ts goes in a pane
// record: app_context_changed names no thread, so the DM's threads share
// it (paneFor).
const agentPaneTS = "dm"

// admitAgentEvent handles the agent-view events (handled=false for any
// other event). It runs before the ack, like admitEvent.
func (b *Bot) admitAgentEvent(ctx context.Context, cb eventCallback) (handled, ack bool, after func(context.Context)) {
	ev, team, ok := agentEventOf(cb)
	if !ok {
		return false, false, nil
	}
	switch {
	case ev.Type == "app_home_opened" && ev.Tab == "messages":
		if team == "" || ev.Channel == "" || ev.User == "" {
			return true, true, nil
		}
		// Its context (SDK types only, unconfirmed) is the viewed channel.
		if !b.recordAgentPane(ctx, team, ev) {
			return true, false, nil
		}
		// Prompts are tab-level under agent view: once per DM, not on
		// every open (the record lives as long as event dedupe).
		first, err := b.store.Admit(ctx, team, "agent-prompts-"+ev.Channel, "", "")
		if err != nil {
			b.log.Warn("bot: cannot record the Messages tab opening; not acking", "team", team, "err", err)
			return true, false, nil
		}
		if first {
			after = func(ctx context.Context) { b.tabPrompts(ctx, team, ev.Channel) }
		}
		return true, true, after
	case ev.Type == "app_context_changed":
		if team == "" || ev.Channel == "" {
			return true, true, nil
		}
		return true, b.recordAgentPane(ctx, team, ev), nil
	case ev.Type == "agent_session_stopped":
		if team == "" || ev.Channel == "" || ev.ThreadTS == "" || ev.User == "" {
			return true, true, nil
		}
		k := session.ThreadKey{Team: team, Channel: ev.Channel, ThreadTS: ev.ThreadTS}
		ack, after := b.sessionStopped(ctx, k, ev.User)
		return true, ack, after
	case ev.Type == "agent_session_title_changed":
		if team == "" || ev.Channel == "" || ev.ThreadTS == "" || ev.User == "" {
			return true, true, nil
		}
		k := session.ThreadKey{Team: team, Channel: ev.Channel, ThreadTS: ev.ThreadTS}
		return true, b.sessionRetitled(ctx, k, ev), nil
	}
	return false, false, nil
}

// recordAgentPane records the channel an agent-view event says the
// person views, for every thread of the DM (false: not stored, do not
// ack). Entities come by relevance: the first channel wins; none (viewing
// nothing the model can use) records nothing.
func (b *Bot) recordAgentPane(ctx context.Context, team string, ev agentEvent) bool {
	pc := session.PaneContext{EventTS: ev.EventTS}
	for _, e := range ev.Context.Entities {
		var id string
		if e.Type == "slack#/types/channel_id" && json.Unmarshal(e.Value, &id) == nil && id != "" {
			pc.ChannelID, pc.TeamID, pc.EnterpriseID = id, e.TeamID, e.EnterpriseID
			break
		}
	}
	if pc.ChannelID == "" || !strings.HasPrefix(ev.Channel, "D") {
		return true
	}
	return b.recordPane(ctx, inbound{Team: team, Channel: ev.Channel, ThreadTS: agentPaneTS, Pane: &pc})
}

// agentEventOf decodes an agent-view event (ok=false for any other).
func agentEventOf(cb eventCallback) (ev agentEvent, team string, ok bool) {
	if cb.Type != "event_callback" || json.Unmarshal(cb.Event, &ev) != nil {
		return ev, "", false
	}
	team = cmpOr(cb.TeamID, innerTeam(cb.Event))
	switch {
	case ev.Type == "app_home_opened" && ev.Tab == "messages", ev.Type == "app_context_changed",
		ev.Type == "agent_session_stopped", ev.Type == "agent_session_title_changed":
		return ev, team, true
	}
	return ev, team, false
}

// tabPrompts sets the Messages tab's suggested prompts. Under agent view
// they are tab-level: thread_ts must be omitted ("including it … will
// cause the call to silently fail").
func (b *Bot) tabPrompts(ctx context.Context, team, channel string) {
	c := slackapi.Call{Team: team, Method: slackapi.AssistantThreadsSetSuggestedPrompts, Prio: slackapi.Lossy, Merge: channel, Wait: 5 * time.Second}
	err := b.slack.Do(ctx, c, func(ctx context.Context, api *slack.Client) error {
		return api.SetAssistantThreadsSuggestedPromptsContext(ctx, slack.AssistantThreadsSetSuggestedPromptsParameters{
			ChannelID: channel, Title: "Try asking", Prompts: suggestedPrompts,
		})
	})
	if err != nil {
		b.log.Debug("bot: Messages tab prompts failed", "team", team, "err", err)
	}
}

// sessionStopped is Slack's Stop on a thread's agent session: the turn
// stops exactly as with our Stop button, on whichever replica runs it.
// Slack has already stopped the streams it listed. false: the stop could
// not be recorded (do not ack; Slack redelivers); after tells someone
// who may not stop the turn why it goes on.
func (b *Bot) sessionStopped(ctx context.Context, k session.ThreadKey, user string) (bool, func(context.Context)) {
	attrs := threadAttrs(k.Team, k.Channel, k.ThreadTS)
	meta, requester, err := b.requesterOf(ctx, k)
	if errors.Is(err, session.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		b.log.Warn("bot: reading the session for Slack's Stop failed; not acking", append(attrs, "err", err)...)
		return false, nil
	}
	if ok, why := b.people.MayStop(ctx, k.Team, user, "", requester); !ok {
		b.log.Info("bot: Slack's Stop by someone who may not stop the turn", append(attrs, "user", user)...)
		m := inbound{Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS, User: user}
		return true, func(ctx context.Context) { b.ephemeral(ctx, m, why) }
	}
	if b.cancels.cancel(k, stopCause{user: user}) {
		return true, nil
	}
	if err := b.requestStop(ctx, k, meta, user); err != nil {
		b.log.Warn("bot: recording a stop request failed; not acking", append(attrs, "err", err)...)
		return false, nil
	}
	b.ask.Withdraw(ctx, k, user)
	return true, nil
}

// sessionRetitled records that a person titled thread k's agent session
// in Slack, so the bot never renames it (titleThread, assistant.go); the
// record lives SESSION_TTL from the rename. The bot's own renames, should
// Slack report them, are not a person's. false: not recorded (do not ack;
// Slack redelivers, and the newer-report check makes that harmless).
func (b *Bot) sessionRetitled(ctx context.Context, k session.ThreadKey, ev agentEvent) bool {
	if b.self(k.Team).is("", ev.User) {
		return true
	}
	pt := session.PersonTitle{User: ev.User, Title: ev.Title, EventTS: ev.EventTS}
	if _, err := b.store.SetPersonTitle(ctx, k, pt); err != nil {
		b.log.Warn("bot: cannot record a person's session title; not acking", append(threadAttrs(k.Team, k.Channel, k.ThreadTS), "err", err)...)
		return false
	}
	return true
}

// personTitled reports whether a person titled thread k's agent session
// (sessionRetitled). When that cannot be read it answers true: a title is
// a nicety, overwriting a person's one is not.
func (b *Bot) personTitled(ctx context.Context, k session.ThreadKey) bool {
	_, err := b.store.PersonTitle(ctx, k)
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		b.log.Debug("bot: cannot read whether a person titled the session; not titling it", append(threadAttrs(k.Team, k.Channel, k.ThreadTS), "err", err)...)
	}
	return !errors.Is(err, session.ErrNotFound)
}

// paneFor is the latest pane context of thread k: the thread's own
// (assistant_view) or, in a DM, the one app_context_changed recorded for
// the whole DM (agent_view), whichever Slack sent last.
func paneFor(ctx context.Context, ps paneStore, k session.ThreadKey) (session.PaneContext, error) {
	pc, err := ps.PaneContext(ctx, k)
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		return pc, err
	}
	dm, derr := ps.PaneContext(ctx, session.ThreadKey{Team: k.Team, Channel: k.Channel, ThreadTS: agentPaneTS})
	if derr != nil {
		return pc, err
	}
	if err != nil || tsAfter(dm.EventTS, pc.EventTS) {
		return dm, nil
	}
	return pc, nil
}

// tsAfter compares two Slack ts values ("1726133698.665188").
func tsAfter(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}
