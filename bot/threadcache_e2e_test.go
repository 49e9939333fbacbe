package bot_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/session"
)

// cacheEnv is a harness whose store has a secret key, with the thread
// cache on.
type cacheEnv struct {
	*harness
	store  *session.Store
	cache  *session.ThreadCache
	prefix string
}

func newCacheEnv(t *testing.T, ho harnessOpts) *cacheEnv {
	t.Helper()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	prefix := "tc" + hex.EncodeToString(rnd[:])
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	store, err := session.Open(context.Background(), session.Options{URL: os.Getenv("REDIS_URL"), Prefix: prefix, LeaseTTL: 3 * time.Second, SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	e := &cacheEnv{store: store, cache: store.ThreadCache(session.ThreadCacheOptions{}), prefix: prefix}
	tweak := ho.bot
	ho.bot = func(o *bot.Options) {
		o.Store = store
		o.ThreadCache = e.cache
		if tweak != nil {
			tweak(o)
		}
	}
	e.harness = newHarness(t, ho)
	return e
}

// waitCached waits until thread k's cache holds a message with text.
// (Hundreds of events under -race on a busy machine take a while: the
// deadline is generous.)
func (e *cacheEnv) waitCached(k session.ThreadKey, what string, cond func(session.ThreadView) bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var last session.ThreadView
	err := e.emu.WaitFor(ctx, func() bool {
		v, err := e.cache.Newest(context.Background(), k, 0, 0)
		last = v
		return err == nil && cond(v)
	})
	if err != nil {
		e.t.Fatalf("waiting for %s: %v (%d messages cached from %s)", what, err, len(last.Messages), last.From)
	}
}

func hasText(v session.ThreadView, text string) bool {
	for _, m := range v.Messages {
		if m.Text == text {
			return true
		}
	}
	return false
}

// TestE2EThreadCacheWatched: a 200-message thread the bot saw happen
// (events only, no session) is imported at the first mention without any
// conversations.replies call, with its newest messages, an edit as it
// stands and a deletion applied; nothing of it is in Redis in clear text.
func TestE2EThreadCacheWatched(t *testing.T) {
	e := newCacheEnv(t, harnessOpts{emu: slackemu.Options{NoRateLimits: true}})
	root := e.emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "incident: checkout latency", "")
	k := session.ThreadKey{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, ThreadTS: root.TS}
	var ts []string
	for i := range 200 {
		user := slackemu.UserBob
		if i%2 == 0 {
			user = slackemu.UserAlice
		}
		p := e.emu.Message(slackemu.TeamID, slackemu.ChannelGen, user, fmt.Sprintf("update %03d SECRETWORD", i+1), root.TS)
		ts = append(ts, p.TS)
	}
	e.waitCached(k, "201 messages cached", func(v session.ThreadView) bool { return v.FromStart && len(v.Messages) == 201 })

	// Bob edits update 199 and deletes update 198, as Slack tells the app.
	if err := e.emu.EditMessage(slackemu.ChannelGen, ts[198], "update 199 corrected: the CDN"); err != nil {
		t.Fatal(err)
	}
	e.emu.DeliverEvent(slackemu.TeamID, map[string]any{
		"type": "message", "subtype": "message_changed", "hidden": true, "channel": slackemu.ChannelGen, "channel_type": "channel",
		"ts": "1999999999.000001", "event_ts": "1999999999.000001",
		"message": map[string]any{"type": "message", "user": slackemu.UserAlice, "text": "update 199 corrected: the CDN", "ts": ts[198], "thread_ts": root.TS,
			"edited": map[string]any{"user": slackemu.UserAlice, "ts": "1999999999.000001"}},
		"previous_message": map[string]any{"type": "message", "user": slackemu.UserAlice, "text": "update 199 SECRETWORD", "ts": ts[198], "thread_ts": root.TS},
	})
	if err := e.emu.DeleteMessage(slackemu.ChannelGen, ts[197]); err != nil {
		t.Fatal(err)
	}
	e.emu.DeliverEvent(slackemu.TeamID, map[string]any{
		"type": "message", "subtype": "message_deleted", "hidden": true, "channel": slackemu.ChannelGen, "channel_type": "channel",
		"ts": "1999999999.000002", "event_ts": "1999999999.000002", "deleted_ts": ts[197],
		"previous_message": map[string]any{"type": "message", "user": slackemu.UserBob, "text": "update 198 SECRETWORD", "ts": ts[197], "thread_ts": root.TS},
	})
	e.waitCached(k, "the edit and the deletion", func(v session.ThreadView) bool {
		return hasText(v, "update 199 corrected: the CDN") && !hasText(v, "update 198 SECRETWORD")
	})

	e.noClearText(t)
	e.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAdmin, "summarize the incident", root.TS)
	e.waitReplies(slackemu.ChannelGen, root.TS, 0, 1)
	if n := len(e.emu.Calls("conversations.replies")); n != 0 {
		t.Errorf("%d conversations.replies calls for a thread the bot saw, want 0", n)
	}
	text := userText(e.llm.Requests()[0])
	if !inOrder(text, "before you were asked", "earliest messages are left out", "update 197 SECRETWORD",
		"update 199 corrected: the CDN (edited)", "update 200 SECRETWORD", "summarize the incident") {
		t.Errorf("request lacks the newest messages in order:\n%.3000s", text)
	}
	for _, bad := range []string{"update 198 SECRETWORD", "update 199 SECRETWORD", "could not be read"} {
		if strings.Contains(text, bad) {
			t.Errorf("request has %q (a deleted message, an old edit or a needless note)", bad)
		}
	}

}

// TestE2EThreadCacheBeforeJoin: a thread that started before the bot saw
// it, under the non-Marketplace limit (1 call a minute, 15 messages):
// one conversations.replies call reads the start, the cache gives the
// newest messages, the model is told how many it could not read, and
// Slack never answers 429.
func TestE2EThreadCacheBeforeJoin(t *testing.T) {
	limits := slackapi.DefaultRateLimits()
	limits["conversations.replies"] = slackapi.RateLimit{PerMinute: 1, Burst: 1}
	e := newCacheEnv(t, harnessOpts{emu: slackemu.Options{NonMarketplace: true}, bot: func(o *bot.Options) { o.RateLimits = limits }})
	parent := e.post(slackemu.UserPost{User: slackemu.UserAlice, Text: "long thread", Silent: true, TS: "1767600000.000100"})
	for i := range 30 {
		e.post(slackemu.UserPost{User: slackemu.UserBob, Text: fmt.Sprintf("reply number %02d", i+1), ThreadTS: parent.TS, Silent: true})
	}
	k := session.ThreadKey{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, ThreadTS: parent.TS}
	for _, s := range []string{"live A", "live B", "live C"} {
		e.emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserBob, s, parent.TS)
	}
	e.waitCached(k, "the live replies cached", func(v session.ThreadView) bool { return len(v.Messages) == 3 })
	e.post(slackemu.UserPost{User: slackemu.UserAlice, Text: "what did bob say?", ThreadTS: parent.TS, Mention: true})
	e.waitReplies(slackemu.ChannelGen, parent.TS, 0, 1)
	text := userText(e.llm.Requests()[0])
	if !inOrder(text, "16 earlier messages of this thread could not be read",
		"long thread", "reply number 01", "reply number 14", "live A", "live B", "live C", "what did bob say?") ||
		strings.Contains(text, "reply number 15") {
		t.Errorf("request should carry the first page, a note and the newest messages:\n%s", text)
	}
	if n := e.emu.RateLimited()["conversations.replies"]; n != 0 {
		t.Errorf("conversations.replies was rate-limited %d times", n)
	}
	if n := len(e.emu.Calls("conversations.replies")); n != 1 {
		t.Errorf("%d conversations.replies calls, want 1", n)
	}
}

// TestE2EThreadCacheNoKey: a cache without SECRET_KEY turns itself off
// and threads are read from Slack as before.
func TestE2EThreadCacheNoKey(t *testing.T) {
	h := newHarness(t, harnessOpts{emu: slackemu.Options{NoRateLimits: true}, bot: func(o *bot.Options) {
		o.ThreadCache = o.Store.(*session.Store).ThreadCache(session.ThreadCacheOptions{})
	}})
	root := h.emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "a watched thread", "")
	h.emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserBob, "a reply the bot saw", root.TS)
	h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "sum it up", root.TS)
	h.waitReplies(slackemu.ChannelGen, root.TS, 0, 1)
	if text := userText(h.llm.Requests()[0]); !inOrder(text, "a watched thread", "a reply the bot saw", "sum it up") {
		t.Errorf("request lacks the thread read from Slack:\n%s", text)
	}
	if n := len(h.emu.Calls("conversations.replies")); n != 1 {
		t.Errorf("%d conversations.replies calls, want 1", n)
	}
}

// noClearText checks that the thread cache's keys hold no message text
// in clear (transcripts are another matter).
func (e *cacheEnv) noClearText(t *testing.T) {
	t.Helper()
	if os.Getenv("REDIS_URL") == "" {
		return // the embedded Redis of the store is not reachable from here
	}
	ro, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(ro)
	defer rdb.Close()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, e.prefix+"*:cache*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("no thread cache keys under the test prefix: %v", err)
	}
	for _, key := range keys {
		if dump, err := rdb.Dump(ctx, key).Result(); err == nil && strings.Contains(dump, "SECRETWORD") {
			t.Errorf("Redis key %s holds a message in clear text", key)
		}
	}
}
