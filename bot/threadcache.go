package bot

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/bobbinbot/bobbin/session"
)

// Thread context from events: every message the bot receives in a channel
// (message, message_changed, message_deleted; app_mention too) is kept in
// the thread cache after the ack, so that importing a thread reads Redis
// first and calls conversations.replies only for what the cache cannot
// have: the messages posted before the bot saw the thread. Apps outside
// the Slack Marketplace may call conversations.replies once a minute for
// 15 messages (slack-agents-2026.md §9), so for a long thread the bot saw
// happen this is the difference between the newest messages and none.
// Without SECRET_KEY there is no cache (Options.ThreadCache nil) and the
// import reads Slack as before.

// ThreadCache is the per-thread message cache the bot keeps
// (*session.ThreadCache): sealed, bounded, with SESSION_TTL.
type ThreadCache interface {
	Append(ctx context.Context, k session.ThreadKey, m session.CachedMessage) error
	Edit(ctx context.Context, k session.ThreadKey, m session.CachedMessage) (bool, error)
	Delete(ctx context.Context, k session.ThreadKey, ts string) error
	Newest(ctx context.Context, k session.ThreadKey, n, budget int) (session.ThreadView, error)
}

// cachedMsg is the part of a message event the cache keeps.
type cachedMsg struct {
	Subtype    string          `json:"subtype"`
	User       string          `json:"user"`
	BotID      string          `json:"bot_id"`
	Username   string          `json:"username"`
	Text       string          `json:"text"`
	TS         string          `json:"ts"`
	ThreadTS   string          `json:"thread_ts"`
	Files      json.RawMessage `json:"files"`
	Edited     json.RawMessage `json:"edited"`
	BotProfile *struct {
		Name string `json:"name"`
	} `json:"bot_profile"`
}

// cacheEvent is a message event as the cache reads it.
type cacheEvent struct {
	Type    string `json:"type"`
	Channel string `json:"channel"`
	cachedMsg
	Message         *cachedMsg `json:"message"`
	PreviousMessage *cachedMsg `json:"previous_message"`
	DeletedTS       string     `json:"deleted_ts"`
}

// Extra keys of a CachedMessage.
const (
	cacheExtraSubtype = "subtype"
	cacheExtraApp     = "app"
	cacheExtraFiles   = "files"
)

// threadCacheJob returns what to do after the ack to keep the event's
// message in the thread cache, or nil. It does no I/O.
func (b *Bot) threadCacheJob(cb eventCallback, team string) func(context.Context) {
	c := b.opts.ThreadCache
	if c == nil || b.cacheOff.Load() || cb.Type != "event_callback" || team == "" || len(cb.Event) == 0 {
		return nil
	}
	var ev cacheEvent
	if json.Unmarshal(cb.Event, &ev) != nil || (ev.Type != "message" && ev.Type != "app_mention") {
		return nil
	}
	// DMs and the assistant pane have no history the bot did not see
	// (importWanted): nothing to cache.
	if ev.Channel == "" || strings.HasPrefix(ev.Channel, "D") {
		return nil
	}
	key := func(m cachedMsg) session.ThreadKey {
		return session.ThreadKey{Team: team, Channel: ev.Channel, ThreadTS: cmpOr(m.ThreadTS, m.TS)}
	}
	var op func(context.Context) error
	switch ev.Subtype {
	case "", "thread_broadcast", "file_share", "bot_message", "me_message":
		if ev.TS == "" {
			return nil
		}
		m := ev.cachedMsg
		op = func(ctx context.Context) error { return c.Append(ctx, key(m), cachedOf(m)) }
	case "message_changed":
		// Only edits of the text: Slack also sends message_changed when a
		// reply is added to a thread or a link unfurls.
		m := ev.Message
		if m == nil || m.TS == "" || len(m.Edited) == 0 || string(m.Edited) == "null" {
			return nil
		}
		op = func(ctx context.Context) error { _, err := c.Edit(ctx, key(*m), cachedOf(*m)); return err }
	case "message_deleted":
		ts, thread := ev.DeletedTS, ev.DeletedTS
		if p := ev.PreviousMessage; p != nil && p.ThreadTS != "" {
			thread = p.ThreadTS
		}
		if ts == "" {
			return nil
		}
		k := session.ThreadKey{Team: team, Channel: ev.Channel, ThreadTS: thread}
		op = func(ctx context.Context) error { return c.Delete(ctx, k, ts) }
	default:
		return nil
	}
	return func(ctx context.Context) {
		if err := op(ctx); err != nil {
			b.threadCacheFailed(err)
		}
	}
}

// threadCacheFailed logs a cache write that failed; without a secret key
// the cache turns itself off (imports read Slack, as before).
func (b *Bot) threadCacheFailed(err error) {
	if errors.Is(err, session.ErrNoSecretKey) {
		if b.cacheOff.CompareAndSwap(false, true) {
			b.log.Warn("bot: the thread cache needs SECRET_KEY; threads are read from Slack instead")
		}
		return
	}
	b.log.Debug("bot: thread cache write failed", "err", err)
}

// cachedOf is what the cache keeps of a message.
func cachedOf(m cachedMsg) session.CachedMessage {
	cm := session.CachedMessage{TS: m.TS, User: m.User, BotID: m.BotID, Text: m.Text,
		Edited: len(m.Edited) > 0 && string(m.Edited) != "null"}
	extra := map[string]string{}
	if m.Subtype != "" {
		extra[cacheExtraSubtype] = m.Subtype
	}
	app := m.Username
	if m.BotProfile != nil && m.BotProfile.Name != "" {
		app = m.BotProfile.Name
	}
	if app != "" {
		extra[cacheExtraApp] = app
	}
	if len(m.Files) > 0 && string(m.Files) != "null" {
		extra[cacheExtraFiles] = string(m.Files)
	}
	if len(extra) > 0 {
		cm.Extra = extra
	}
	return cm
}

// entryOfCached is a cached message as context.
func (b *Bot) entryOfCached(team string, m session.CachedMessage) (threadEntry, bool) {
	e := threadEntry{ts: m.TS, user: m.User, text: m.Text, edited: m.Edited}
	switch {
	case b.self(team).is(m.BotID, m.User):
		e.own = true
	case m.BotID != "" || m.Extra[cacheExtraSubtype] == "bot_message":
		e.app = cmp0(m.Extra[cacheExtraApp], m.BotID)
	}
	if f := m.Extra[cacheExtraFiles]; f != "" {
		e.files = tasksOf(decodeFiles(json.RawMessage(f)))
	}
	return e, e.text != "" || len(e.files) > 0
}

// threadRead is what readThread found.
type threadRead struct {
	entries []threadEntry
	// more: messages are missing (pages left unread, or a failure).
	more bool
	// unread counts the missing messages when Slack said how many the
	// thread has (0: unknown or none).
	unread int
	// omitted counts older cached messages not read (past the context
	// limits anyway).
	omitted int
}

// readThread reads thread k's messages before until (all when empty),
// leaving out skip: from the thread cache first, and from Slack only what
// the cache cannot have (before the bot saw the thread).
func (b *Bot) readThread(ctx context.Context, k session.ThreadKey, until, skip string) threadRead {
	c := b.opts.ThreadCache
	if c == nil || b.cacheOff.Load() {
		entries, more, _ := b.importThread(ctx, k, until, skip)
		return threadRead{entries: entries, more: more}
	}
	view, err := c.Newest(ctx, k, b.opts.ThreadContextMessages+maxBatch+1, 0)
	if err != nil {
		b.threadCacheFailed(err)
		entries, more, _ := b.importThread(ctx, k, until, skip)
		return threadRead{entries: entries, more: more}
	}
	var r threadRead
	seen := map[string]bool{}
	for _, m := range view.Messages {
		if m.TS == skip || (until != "" && !tsBefore(m.TS, until)) {
			continue
		}
		if e, ok := b.entryOfCached(k.Team, m); ok {
			r.entries = append(r.entries, e)
			seen[m.TS] = true
		}
	}
	if view.FromStart {
		// The bot saw the whole thread happen: no Slack call at all.
		r.omitted = view.Omitted
		b.m.ThreadImports.WithLabelValues("cache").Inc()
		b.nameEntries(ctx, k.Team, r.entries)
		return r
	}
	// What came before the cache's coverage is only in Slack.
	cut := until
	if view.From != "" && (cut == "" || tsBefore(view.From, cut)) {
		cut = view.From
	}
	older, more, total := b.importThread(ctx, k, cut, skip)
	for _, e := range older {
		if !seen[e.ts] {
			r.entries = append(r.entries, e)
		}
	}
	sortEntries(r.entries)
	r.more = more
	if more && total > 0 {
		// The thread had total messages when Slack was asked; the batch's
		// first message is one of them.
		after := len(r.entries) - len(older)
		if until != "" {
			after++
		}
		r.unread = max(0, total-len(older)-after)
	}
	return r
}

// unreadNote tells the model what it could not read.
func unreadNote(r threadRead) string {
	if !r.more {
		return ""
	}
	if r.unread > 0 {
		return "[Slack: " + strconv.Itoa(r.unread) + " earlier messages of this thread could not be read just now (Slack's rate limits), " +
			"so you do not see them; what you see skips from the first messages read to the newest ones.]"
	}
	return "[Slack: not all of the thread could be read just now (Slack's rate limits), so its latest messages may be missing here.]"
}

// thenAfter adds job to an acked event's after-ack work.
func thenAfter(ack bool, after, job func(context.Context)) func(context.Context) {
	if !ack {
		return after
	}
	if after == nil {
		return job
	}
	return func(ctx context.Context) { job(ctx); after(ctx) }
}
