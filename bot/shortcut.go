package bot

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/admin"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// The "Ask Bobbin" message shortcut (manifest features.shortcuts, type
// message): a person picks it from a message's menu, and the bot answers in
// that message's thread with the message (and, on a thread's first turn,
// the thread) as context. Useful where the bot is not in the channel's
// flow. The payload is acked at once (Slack wants it within 3 s); the turn
// is queued like a mention. A response_url cannot post into a thread, so
// the answer goes through chat.postMessage with thread_ts like any reply.

// shortcutAsk is the shortcut's callback_id (manifest.yaml).
const shortcutAsk = "bobbin_ask"

// shortcutTarget is the message a shortcut was used on. Part of the queued
// message: extend, never rename.
type shortcutTarget struct {
	TS   string `json:"ts"`
	User string `json:"user,omitempty"`
	// App names another app that posted it; Own is the bot's own post.
	App     string `json:"app,omitempty"`
	Own     bool   `json:"own,omitempty"`
	Text    string `json:"text,omitempty"`
	Replies int    `json:"replies,omitempty"`
}

// askShortcut queues the turn of an Ask Bobbin shortcut; it reports
// whether the payload was one.
func (b *Bot) askShortcut(ctx, turnCtx context.Context, cb slack.InteractionCallback) bool {
	if cb.Type != slack.InteractionTypeMessageAction || cb.CallbackID != shortcutAsk {
		return false
	}
	m, ok := b.shortcutInbound(cb)
	if !ok {
		b.log.Warn("bot: malformed message shortcut payload", "callback_id", cb.CallbackID)
		return true
	}
	log := b.log.With(threadAttrs(m.Team, m.Channel, m.ThreadTS)...)
	to := admin.Target{ResponseURL: cb.ResponseURL, Channel: m.Channel, User: m.User, Team: m.Team}
	tell := func(text string) {
		b.admin.Tell(ctx, to, text)
	}
	if b.draining.Load() {
		tell("I'm restarting just now; please try again in a moment.")
		return true
	}
	first, err := b.store.Admit(ctx, m.Team, m.EventID, "", "")
	if err != nil || !first {
		if err != nil {
			log.Warn("bot: cannot record a shortcut", "err", err)
			tell("I couldn't take that request just now. Please try again in a moment.")
		}
		return true
	}
	if ok, wait, err := b.takeTurnBudget(ctx, m); err == nil && !ok {
		m.NotBefore = m.Received.Add(wait)
		b.m.UserRateLimited.Inc()
	}
	payload, err := json.Marshal(m)
	if err != nil {
		return true
	}
	leased, err := b.enqueue(ctx, m.key(), payload)
	switch {
	case errors.Is(err, session.ErrQueueFull):
		tell("This thread has too many messages waiting; please try again in a little while.")
	case err != nil:
		log.Warn("bot: cannot queue a shortcut", "err", err)
		tell("I couldn't take that request just now. Please try again in a moment.")
	case leased:
		b.m.QueuedMessages.Inc()
	default:
		b.startWorker(turnCtx, m.key())
	}
	return true
}

// shortcutInbound is the turn a shortcut payload asks for.
func (b *Bot) shortcutInbound(cb slack.InteractionCallback) (inbound, bool) {
	msg := cb.Message
	ts := cmp0(msg.Timestamp, cb.MessageTs)
	team := cmp0(cb.Team.ID, cb.User.TeamID)
	if team == "" || cb.Channel.ID == "" || ts == "" || cb.User.ID == "" {
		return inbound{}, false
	}
	t := &shortcutTarget{TS: ts, User: msg.User, Text: msg.Text, Replies: msg.ReplyCount}
	switch {
	case b.self(team).is(msg.BotID, msg.User):
		t.Own, t.User = true, ""
	case msg.BotID != "":
		t.App = cmp0(botProfileName(msg.BotProfile), msg.Username, msg.BotID)
	}
	m := inbound{
		Kind: kindShortcut, Team: team, Channel: cb.Channel.ID, ThreadTS: cmp0(msg.ThreadTimestamp, ts),
		User: cb.User.ID, EventID: "shortcut-" + cmp0(cb.TriggerID, cb.ActionTs, ts), Received: b.opts.Now(),
		Files: fromSlackFiles(msg.Files), Shortcut: t,
	}
	return m, true
}

// shortcutText is the user message of a shortcut turn: who asked, about
// which message, and that message's text.
func shortcutText(m inbound, targetName string) string {
	t := m.Shortcut
	var s strings.Builder
	s.WriteString("[Slack: I used the “Ask Bobbin” shortcut on a message in this conversation")
	who := ""
	switch {
	case t.Own:
		who = "you (Bobbin)"
	case t.App != "":
		who = oneLineName(t.App) + " (app)"
	case targetName != "" && t.User != "":
		who = oneLineName(targetName) + " (" + t.User + ")"
	case t.User != "":
		who = t.User
	}
	if who != "" {
		s.WriteString(" written by " + who)
	}
	if tm := tsTime(t.TS); !tm.IsZero() {
		s.WriteString(" at " + tm.UTC().Format("2006-01-02 15:04 UTC"))
	}
	s.WriteString(". Please respond to it as it calls for: answer it, explain it, or help with what it asks.]\n")
	if strings.TrimSpace(t.Text) != "" {
		s.WriteString(t.Text)
	}
	if len(m.Files) > 0 {
		names := make([]string, len(m.Files))
		for i, f := range m.Files {
			names[i] = oneLineName(f.name())
		}
		s.WriteString("\n[files: " + strings.Join(names, ", ") + "]")
	}
	return s.String()
}

// shortcutMessage is the shortcut's user message (its files attached by
// the caller).
func (b *Bot) shortcutMessage(ctx context.Context, k session.ThreadKey, m inbound) provider.Message {
	name := ""
	if t := m.Shortcut; t.User != "" && !t.Own {
		name = b.people.Name(ctx, k.Team, t.User)
	}
	return provider.Message{
		Role: provider.RoleUser, Content: shortcutText(m, name), UserID: m.User,
		UserName: b.people.Name(ctx, k.Team, m.User), Meta: map[string]string{"shortcut_ts": m.Shortcut.TS},
	}
}
