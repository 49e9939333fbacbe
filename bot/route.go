package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/install"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// eventCallback is the events_api payload, decoded by us (not slackevents)
// so that unknown or malformed shapes degrade to "ignore" and the decoder
// can be fuzzed.
type eventCallback struct {
	Type         string          `json:"type"`
	TeamID       string          `json:"team_id"`
	EnterpriseID string          `json:"enterprise_id"`
	EventID      string          `json:"event_id"`
	Event        json.RawMessage `json:"event"`
	// Authorizations names an installation that sees the event
	// (bot/install).
	Authorizations []install.Authorization `json:"authorizations"`
}

type innerEvent struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	User        string `json:"user"`
	BotID       string `json:"bot_id"`
	Text        string `json:"text"`
	TS          string `json:"ts"`
	ThreadTS    string `json:"thread_ts"`
	Channel     string `json:"channel"`
	ChannelType string `json:"channel_type"`
	Team        string `json:"team"`
	// UserTeam is the author's workspace (Slack Connect: another one).
	UserTeam string `json:"user_team"`

	EventTS string `json:"event_ts"`
	// ActionToken lets slack_search search as the event's author (search.go).
	ActionToken string `json:"action_token"`
	// Files is decoded on its own (decodeFiles): a file of an odd shape
	// must not lose the message.
	Files json.RawMessage `json:"files"`
	// Tab is app_home_opened's "home" or "messages".
	Tab string `json:"tab"`

	AssistantThread *struct {
		UserID    string `json:"user_id"`
		ChannelID string `json:"channel_id"`
		ThreadTS  string `json:"thread_ts"`
		Context   struct {
			ChannelID    string `json:"channel_id"`
			TeamID       string `json:"team_id"`
			EnterpriseID string `json:"enterprise_id"`
		} `json:"context"`
	} `json:"assistant_thread"`
}

// Message kinds.
const (
	kindMention   = "mention"
	kindReply     = "reply"
	kindDM        = "dm"
	kindAssistant = "assistant_started"
	// kindPaneMoved is assistant_thread_context_changed: the person looks
	// at another channel. It records the pane context, nothing more.
	kindPaneMoved = "assistant_context_changed"
	// kindContext is a thread reply that starts no turn
	// (THREAD_FOLLOWUPS=mention): recorded in the session as context.
	kindContext = "context"
	// kindShortcut is the Ask Bobbin message shortcut (shortcut.go).
	kindShortcut = "shortcut"
	// kindHome is app_home_opened on the Home tab: publish it (bot/admin).
	kindHome = "app_home_opened"
)

// inbound is one person's message bound for a thread's session. It is the
// payload queued in Redis, so its JSON is a stored format: extend, never
// rename.
type inbound struct {
	Kind     string `json:"kind"`
	Team     string `json:"team"`
	Channel  string `json:"channel"`
	ThreadTS string `json:"thread_ts"`
	TS       string `json:"ts"`
	User     string `json:"user"`
	// UserTeam is the author's workspace when the event said (user_team).
	UserTeam string `json:"user_team,omitempty"`
	Text     string `json:"text"`
	EventID  string `json:"event_id,omitempty"`
	// NotBefore delays the turn when the person was over their rate.
	NotBefore time.Time `json:"not_before,omitzero"`
	Received  time.Time `json:"received"`
	// Pane is what an assistant event says the person is viewing.
	Pane *session.PaneContext `json:"pane,omitempty"`
	// Files are the files shared with the message (files.go).
	Files []sharedFile `json:"files,omitempty"`
	// Shortcut is the message an Ask Bobbin shortcut was used on.
	Shortcut *shortcutTarget `json:"shortcut,omitempty"`
	// ActionToken is the event's action_token (short-lived; slack_search).
	ActionToken string `json:"action_token,omitempty"`
}

func (m inbound) key() session.ThreadKey {
	return session.ThreadKey{Team: m.Team, Channel: m.Channel, ThreadTS: m.ThreadTS}
}

// decodeEvent turns an events_api payload into an inbound message, or
// ok=false when the event is not one the bot answers. It does no I/O; the
// caller checks whether a plain thread reply belongs to a session
// (needsSession).
func (b *Bot) decodeEvent(raw json.RawMessage) (m inbound, needsSession, ok bool, err error) {
	var cb eventCallback
	if err := json.Unmarshal(raw, &cb); err != nil {
		return m, false, false, fmt.Errorf("decoding event callback: %w", err)
	}
	return b.decodeCallback(cb)
}

// decodeCallback is decodeEvent after the outer decode. The bot's own
// identity is the one of the event's workspace (its installation).
func (b *Bot) decodeCallback(cb eventCallback) (m inbound, needsSession, ok bool, err error) {
	if cb.Type != "event_callback" || len(cb.Event) == 0 {
		return m, false, false, nil
	}
	var ev innerEvent
	if err := json.Unmarshal(cb.Event, &ev); err != nil {
		return m, false, false, fmt.Errorf("decoding %s event: %w", cb.TeamID, err)
	}
	team := cb.TeamID
	if team == "" {
		team = ev.Team
	}
	self := b.self(team)
	m = inbound{Team: team, Channel: ev.Channel, TS: ev.TS, User: ev.User, UserTeam: ev.UserTeam, EventID: cb.EventID, ThreadTS: ev.ThreadTS, ActionToken: ev.ActionToken}
	if m.ThreadTS == "" {
		m.ThreadTS = ev.TS
	}
	switch ev.Type {
	case "assistant_thread_started", "assistant_thread_context_changed":
		at := ev.AssistantThread
		if at == nil || at.ChannelID == "" || at.ThreadTS == "" {
			return m, false, false, nil
		}
		m.Kind = kindAssistant
		if ev.Type == "assistant_thread_context_changed" {
			m.Kind = kindPaneMoved
		}
		m.Channel, m.ThreadTS, m.User, m.TS = at.ChannelID, at.ThreadTS, at.UserID, ""
		if at.Context.ChannelID != "" {
			m.Pane = &session.PaneContext{ChannelID: at.Context.ChannelID, TeamID: at.Context.TeamID,
				EnterpriseID: at.Context.EnterpriseID, EventTS: ev.EventTS}
		}
		return m, false, team != "", nil
	case "app_home_opened":
		m.Kind = kindHome
		return m, false, team != "" && ev.User != "" && (ev.Tab == "home" || ev.Tab == ""), nil
	case "app_mention":
		if !b.fromPerson(self, ev) || ev.Channel == "" || ev.TS == "" {
			return m, false, false, nil
		}
		m.Kind = kindMention
	case "message":
		// Edits, deletions, joins and hidden assistant updates are not
		// messages to answer.
		switch ev.Subtype {
		case "", "thread_broadcast", "file_share":
		default:
			return m, false, false, nil
		}
		if !b.fromPerson(self, ev) || ev.Channel == "" || ev.TS == "" {
			return m, false, false, nil
		}
		switch {
		case ev.ChannelType == "im" || strings.HasPrefix(ev.Channel, "D"):
			m.Kind = kindDM
		case self.userID != "" && strings.Contains(ev.Text, "<@"+self.userID+">"):
			// The same message arrives as app_mention, which handles it.
			return m, false, false, nil
		case ev.ThreadTS == "" && b.opts.Profiles.Config == nil:
			// A top-level channel message reaches the bot only as app_mention.
			return m, false, false, nil
		case ev.ThreadTS == "":
			// Unless a profile answers every message (respond.go).
			m.Kind = kindChannel
		default:
			m.Kind = kindReply
			needsSession = true
		}
	default:
		return m, false, false, nil
	}
	if team == "" {
		return m, false, false, nil
	}
	m.Text = slackText(self.stripMention(ev.Text))
	m.Files = decodeFiles(ev.Files)
	if m.Kind == kindReply && b.opts.ThreadFollowups == FollowupsMention {
		m.Kind = kindContext
	}
	return m, needsSession, true, nil
}

// fromPerson reports whether the event is from someone the bot answers:
// never itself, other bots only when configured.
func (b *Bot) fromPerson(self identity, ev innerEvent) bool {
	switch {
	case self.is(ev.BotID, ev.User):
		return false
	case ev.BotID != "" || ev.Subtype == "bot_message":
		return b.opts.AllowBots && ev.User != ""
	}
	return ev.User != ""
}

// slackText undoes Slack's escaping of &, < and > in message text, so the
// model reads what the person typed ("a < b", not "a &lt; b"). Slack's own
// markup (<@U…>, <#C…>, <url|label>) is left as it is: the model may quote
// it back, and the renderer escapes whatever it writes.
var slackUnescaper = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")

func slackText(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	return slackUnescaper.Replace(s)
}

// stripMention removes the bot's own mention from the text.
func (id identity) stripMention(text string) string {
	if id.userID != "" {
		text = strings.ReplaceAll(text, "<@"+id.userID+">", "")
	}
	return strings.TrimSpace(text)
}

// admitEvent records an events_api envelope and reports whether to ack it.
// after, when set, is what to tell Slack once the ack is sent (reactions,
// ephemeral notes, suggested prompts): nothing slow runs before the ack.
func (b *Bot) admitEvent(ctx, turnCtx context.Context, raw json.RawMessage, retry int) (ack bool, after func(context.Context)) {
	var cb eventCallback
	if err := json.Unmarshal(raw, &cb); err != nil {
		b.log.Warn("bot: malformed event payload", "err", fmt.Errorf("decoding event callback: %w", err), "bytes", len(raw))
		return true, after
	}
	// Which installation serves the event decides whether it is answered
	// and who "self" is (workspaces.go, bot/install); uninstalls clean up.
	if cb.Type == "event_callback" {
		var lc lifecycleEvent
		_ = json.Unmarshal(cb.Event, &lc)
		if lc.Type == "app_uninstalled" || lc.Type == "tokens_revoked" {
			return b.uninstalled(ctx, cb, lc), after
		}
		team := cmpOr(cb.TeamID, innerTeam(cb.Event))
		served, err := b.ws.Admit(ctx, install.EventRef(team, cb.EnterpriseID, cb.Authorizations))
		if err != nil {
			b.log.Warn("bot: cannot look up the workspace's installation; not acking", "team", team, "err", err)
			return false, nil
		}
		if !served {
			return true, after
		}
	}
	if job := b.threadCacheJob(cb, cmpOr(cb.TeamID, innerTeam(cb.Event))); job != nil {
		defer func() { after = thenAfter(ack, after, job) }() // threadcache.go
	}
	if handled, ack, after := b.admitAgentEvent(ctx, cb); handled {
		return ack, after // agentview.go
	}
	m, needsSession, ok, err := b.decodeCallback(cb)
	if err != nil {
		// It will not decode on redelivery either: ack and log.
		b.log.Warn("bot: malformed event payload", "err", err, "bytes", len(raw))
		return true, after
	}
	if ok {
		m, needsSession, ok = b.respondMode(ctx, m, needsSession) // respond.go
	}
	if !ok {
		return true, after
	}
	if m.Kind == kindHome {
		return true, b.admin.HomeOpened(m.Team, m.User) // idempotent: no dedupe needed
	}
	if b.draining.Load() {
		return false, nil // another replica (or our successor) takes it
	}
	m.Received = b.opts.Now()
	log := b.log.With(threadAttrs(m.Team, m.Channel, m.ThreadTS)...)
	if m.Kind == kindAssistant || m.Kind == kindPaneMoved {
		// The pane context first: recording it again is harmless, losing
		// it after the event was admitted is not.
		if !b.recordPane(ctx, m) {
			return false, nil
		}
		first, err := b.store.Admit(ctx, m.Team, m.EventID, "", "")
		if err != nil {
			log.Warn("bot: cannot record event; not acking", "err", err)
			return false, nil
		}
		switch {
		case !first:
			b.m.Deduped.Inc()
		case m.Kind == kindAssistant:
			after = func(ctx context.Context) { b.suggestPrompts(ctx, m) }
		}
		return true, after
	}
	if needsSession {
		exists, err := b.store.Exists(ctx, m.key())
		if err != nil {
			log.Warn("bot: cannot check session; not acking", "err", err)
			return false, nil
		}
		if !exists {
			return true, after
		}
	}
	first, err := b.store.Admit(ctx, m.Team, m.EventID, m.Channel, m.TS)
	if err != nil {
		log.Warn("bot: cannot record event; not acking", "err", err)
		return false, nil
	}
	if !first {
		b.m.Deduped.Inc()
		log.Debug("bot: duplicate event", "event_id", m.EventID, "retry", retry)
		return true, after
	}
	forget := func() {
		if err := b.store.Forget(context.WithoutCancel(ctx), m.Team, m.EventID, m.Channel, m.TS); err != nil {
			log.Warn("bot: cannot undo event record", "err", err)
		}
	}
	// Per-person budget: over it, the message still runs, later, and the
	// person is told. Replies recorded as context start no turn.
	if ok, wait, err := b.takeTurnBudget(ctx, m); err == nil && !ok {
		m.NotBefore = m.Received.Add(wait)
		b.m.UserRateLimited.Inc()
		note := fmt.Sprintf("You're sending me more than %d requests a minute. I'll get to this one in about %d seconds.",
			b.opts.UserTurnsPerMinute, int(wait.Seconds()+1))
		after = func(ctx context.Context) { b.ephemeral(ctx, m, note) }
	}
	payload, err := json.Marshal(m)
	if err != nil {
		forget()
		return true, after
	}
	leased, err := b.enqueue(ctx, m.key(), payload)
	if errors.Is(err, session.ErrQueueFull) {
		log.Warn("bot: thread queue full; dropping message")
		after = func(ctx context.Context) {
			b.ephemeral(ctx, m, "This thread has too many messages waiting; please try again in a little while.")
		}
		return true, after
	}
	if err != nil {
		log.Warn("bot: cannot queue message; not acking", "err", err)
		forget()
		return false, nil
	}
	if leased && m.Kind == kindContext {
		return true, after // the lease holder records it
	}
	if leased {
		// A turn is running (here or on another replica): it takes the
		// message next. Show that it was received.
		b.m.QueuedMessages.Inc()
		note := after
		after = func(ctx context.Context) {
			if note != nil {
				note(ctx)
			}
			b.react(ctx, m, "eyes")
		}
		return true, after
	}
	b.startWorker(turnCtx, m.key())
	return true, after
}

// innerTeam is the team of an inner event (when the callback has none).
func innerTeam(raw json.RawMessage) string {
	var ev struct {
		Team string `json:"team"`
	}
	_ = json.Unmarshal(raw, &ev)
	return ev.Team
}

// ephemeral tells the person something only they see (a notice:
// must-deliver, within ctx).
func (b *Bot) ephemeral(ctx context.Context, m inbound, text string) {
	msg := slackapi.Msg{Text: mrkdwn.Escape(text)}
	if m.ThreadTS != "" && m.Kind != kindDM {
		msg.Thread = m.ThreadTS
	}
	if err := b.slack.Ephemeral(ctx, m.Team, m.Channel, m.User, msg); err != nil {
		b.log.Debug("bot: ephemeral failed", "err", err)
	}
}

// reactionWait bounds how long a reaction on a queued message waits for
// budget: it only says "received", and the answer may beat it.
const reactionWait = 3 * time.Second

// react adds a reaction to the person's message (lossy: dropped when the
// workspace's reactions budget has no room soon).
func (b *Bot) react(ctx context.Context, m inbound, name string) {
	if m.TS == "" {
		return
	}
	c := slackapi.Call{Team: m.Team, Method: slackapi.ReactionsAdd, Prio: slackapi.Lossy, Merge: m.Channel + ":" + m.TS + ":" + name, Wait: reactionWait}
	err := b.slack.Do(ctx, c, func(ctx context.Context, api *slack.Client) error {
		return api.AddReactionContext(ctx, name, slack.NewRefToMessage(m.Channel, m.TS))
	})
	if err != nil {
		b.log.Debug("bot: reaction not added", "err", err)
	}
}
