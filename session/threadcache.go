package session

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The thread cache: every message the bot receives, kept per thread so a
// thread can be imported without conversations.replies (1 call a minute
// and 15 messages for apps outside the Marketplace).
//
//	P:{t:…}:cache        hash ts → sealed message, or "x" for a deleted one    TTL, refreshed by writes
//	P:{t:…}:cache:order  zset of the cached ts (score 0, ordered by ts)        same TTL
//	P:{t:…}:cache:meta   hash: from (ts), start ("1"/"0"), bytes, evicted      same TTL
//
// Each message is sealed with SECRET_KEY under its own data key, bound to
// the workspace, the thread and its ts (nothing of it is in Redis in
// clear text); without a key every call fails with ErrNoSecretKey and
// the caller reads Slack instead. The cache is bounded by count and by
// sealed bytes per thread: past either bound the oldest entries go and
// the cache then covers the thread from a later ts.
//
// Coverage: From is the ts from which the cache holds every message of
// the thread (the oldest message appended, raised by eviction, lowered by a
// contiguous Backfill); FromStart says From is the thread's root, i.e.
// the cache has the whole thread. Messages older than From may be cached
// too (a partial Backfill, a late delivery), with possible gaps.

// CachedMessage is one message of a thread as the bot received it.
type CachedMessage struct {
	TS     string `json:"ts"`
	User   string `json:"user,omitempty"`
	BotID  string `json:"bot_id,omitempty"`
	Text   string `json:"text"`
	Edited bool   `json:"edited,omitempty"`
	// Extra holds anything else the caller keeps with the message (file
	// names, subtype, …); it is sealed with the rest.
	Extra map[string]string `json:"extra,omitempty"`
}

// ThreadCacheOptions bound a ThreadCache. Zero values mean the defaults.
type ThreadCacheOptions struct {
	// MaxMessages is the number of entries kept per thread, deleted
	// messages' markers included (default 1000, the newest).
	MaxMessages int
	// MaxBytes bounds the sealed bytes kept per thread (default 4 MiB).
	MaxBytes int
	// TTL is how long a thread's cache lives after its last write
	// (default Options.SessionTTL, i.e. SESSION_TTL).
	TTL time.Duration
}

// ThreadCache is the per-thread message cache of a Store.
type ThreadCache struct {
	s *Store
	o ThreadCacheOptions
}

// ThreadCache returns the store's thread cache with these bounds.
func (s *Store) ThreadCache(o ThreadCacheOptions) *ThreadCache {
	o.MaxMessages = cmp.Or(o.MaxMessages, 1000)
	o.MaxBytes = cmp.Or(o.MaxBytes, 4<<20)
	o.TTL = cmp.Or(o.TTL, s.opt.SessionTTL)
	return &ThreadCache{s: s, o: o}
}

// ThreadView is what Newest read.
type ThreadView struct {
	// Messages are the newest cached messages, oldest first.
	Messages []CachedMessage
	// Omitted counts cached messages older than Messages left out by the
	// count or the byte budget.
	Omitted int
	// From and FromStart are the cache's coverage (see the type doc);
	// From is "" when nothing is cached.
	From      string
	FromStart bool
}

// Complete reports whether the view holds the whole thread: the cache
// covers it from the root and nothing was left out.
func (v ThreadView) Complete() bool { return v.FromStart && v.Omitted == 0 }

type threadCacheKeys struct{ cache, order, meta string }

func (k keys) threadCache(t ThreadKey) threadCacheKeys {
	tag := k.prefix + ":{t:" + t.String() + "}:"
	return threadCacheKeys{cache: tag + "cache", order: tag + "cache:order", meta: tag + "cache:meta"}
}

func (k threadCacheKeys) list() []string { return []string{k.cache, k.order, k.meta} }

// slackTS is a message ts as the cache orders them (same length, so
// string order is time order).
var slackTS = regexp.MustCompile(`^[0-9]{10}\.[0-9]{6}$`)

func checkTS(ts string) error {
	if !slackTS.MatchString(ts) {
		return fmt.Errorf("session: invalid message ts %q", ts)
	}
	return nil
}

// cacheWriteScript: KEYS cache, order, meta. ARGV = ttl ms, max entries,
// max bytes, mode, root ts, cover-from ("" = none), cover-start, then
// ts/value pairs. Modes: "append" (new messages; an existing entry or a
// deletion marker is kept), "edit" (replace existing live entries only),
// "delete" (values are "x"), "backfill" (like append, then the coverage
// is lowered to cover-from). Returns the number of entries written.
var cacheWriteScript = redis.NewScript(`
local ttl, maxn, maxb, mode, root = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]
local written = 0
for i = 8, #ARGV, 2 do
  local ts, v = ARGV[i], ARGV[i+1]
  local old = redis.call('HGET', KEYS[1], ts)
  local ok = true
  if mode == 'edit' then ok = old and old ~= 'x'
  elseif mode == 'append' or mode == 'backfill' then ok = not old end
  if ok then
    local was = 0
    if old then was = #old end
    redis.call('HSET', KEYS[1], ts, v)
    redis.call('ZADD', KEYS[2], 0, ts)
    redis.call('HINCRBY', KEYS[3], 'bytes', #v - was)
    written = written + 1
    if mode == 'append' then
      -- Events of one thread may arrive out of order: a live message
      -- older than the coverage lowers it (unless eviction raised it).
      local from = redis.call('HGET', KEYS[3], 'from')
      if not from or (ts < from and redis.call('HGET', KEYS[3], 'evicted') ~= '1') then
        local start = '0'
        if ts == root then start = '1' end
        redis.call('HSET', KEYS[3], 'from', ts, 'start', start)
      end
    end
  end
end
if mode == 'backfill' and ARGV[6] ~= '' then
  local from = redis.call('HGET', KEYS[3], 'from')
  if not from or ARGV[6] <= from then
    redis.call('HSET', KEYS[3], 'from', ARGV[6], 'start', ARGV[7])
  end
end
while true do
  local n = redis.call('ZCARD', KEYS[2])
  local b = tonumber(redis.call('HGET', KEYS[3], 'bytes') or '0')
  if n <= 1 or (n <= maxn and b <= maxb) then break end
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  local v = redis.call('HGET', KEYS[1], oldest)
  redis.call('HDEL', KEYS[1], oldest)
  redis.call('ZREM', KEYS[2], oldest)
  if v then redis.call('HINCRBY', KEYS[3], 'bytes', -#v) end
  local nxt = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  local from = redis.call('HGET', KEYS[3], 'from')
  if not from or from <= oldest then
    redis.call('HSET', KEYS[3], 'from', nxt, 'start', '0', 'evicted', '1')
  end
end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ttl) end
return written
`)

// cacheReadScript: KEYS cache, order, meta; ARGV = n. Returns from,
// start, the number of older live entries not returned, then the newest
// n live entries as ts, value pairs, newest first.
var cacheReadScript = redis.NewScript(`
local n = tonumber(ARGV[1])
local ids = redis.call('ZRANGE', KEYS[2], 0, -1)
local out = {}
local older = 0
for i = #ids, 1, -1 do
  local v = redis.call('HGET', KEYS[1], ids[i])
  if v and v ~= 'x' then
    if #out >= 2 * n then older = older + 1 else out[#out + 1] = ids[i]; out[#out + 1] = v end
  end
end
local from = redis.call('HGET', KEYS[3], 'from') or ''
local start = redis.call('HGET', KEYS[3], 'start') or '0'
return {from, start, older, unpack(out)}
`)

func cacheSealServer(k ThreadKey) string { return "thread-cache:" + k.Channel + ":" + k.ThreadTS }
func cacheSealField(ts string) string    { return "msg:" + ts }

func (c *ThreadCache) seal(k ThreadKey, m CachedMessage) (string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	return c.s.sealRecord(k.Team, cacheSealServer(k), cacheSealField(m.TS), b)
}

func (c *ThreadCache) write(ctx context.Context, k ThreadKey, mode, coverFrom string, coverStart bool, pairs []any) (int, error) {
	if err := k.validate(); err != nil {
		return 0, err
	}
	tk := c.s.k.threadCache(k)
	start := "0"
	if coverStart {
		start = "1"
	}
	args := append([]any{c.o.TTL.Milliseconds(), c.o.MaxMessages, c.o.MaxBytes, mode, k.ThreadTS, coverFrom, start}, pairs...)
	n, err := cacheWriteScript.Run(ctx, c.s.rdb, tk.list(), args...).Int()
	if err != nil {
		return 0, c.s.wrap("thread cache "+mode+" "+k.String(), err)
	}
	return n, nil
}

// Append caches a message the bot received in the thread. A ts already
// cached (an event delivered twice) or deleted is left as it is.
func (c *ThreadCache) Append(ctx context.Context, k ThreadKey, m CachedMessage) error {
	if err := checkTS(m.TS); err != nil {
		return err
	}
	v, err := c.seal(k, m)
	if err != nil {
		return err
	}
	_, err = c.write(ctx, k, "append", "", false, []any{m.TS, v})
	return err
}

// Edit replaces a cached message (message_changed): its text and the
// rest of m, marked Edited. It reports false when the ts is not cached
// (or was deleted), and then changes nothing.
func (c *ThreadCache) Edit(ctx context.Context, k ThreadKey, m CachedMessage) (bool, error) {
	if err := checkTS(m.TS); err != nil {
		return false, err
	}
	m.Edited = true
	v, err := c.seal(k, m)
	if err != nil {
		return false, err
	}
	n, err := c.write(ctx, k, "edit", "", false, []any{m.TS, v})
	return n > 0, err
}

// Delete removes a message (message_deleted); a marker stays so that a
// late or repeated delivery of the message does not bring it back.
func (c *ThreadCache) Delete(ctx context.Context, k ThreadKey, ts string) error {
	if err := checkTS(ts); err != nil {
		return err
	}
	_, err := c.write(ctx, k, "delete", "", false, []any{ts, "x"})
	return err
}

// Backfill caches messages read from Slack (conversations.replies).
// Messages already cached or deleted are kept as they are. With
// contiguous set, msgs are every message of the thread from the oldest
// of them up to at least the cache's current From (or the whole thread
// so far): the coverage then starts there (FromStart when that is the
// root). Otherwise (a partial read, such as the first page under the
// non-Marketplace limit) the coverage stays, and the messages older
// than From that Newest returns may have a gap after them.
func (c *ThreadCache) Backfill(ctx context.Context, k ThreadKey, msgs []CachedMessage, contiguous bool) error {
	if len(msgs) == 0 {
		return nil
	}
	msgs = slices.Clone(msgs)
	slices.SortFunc(msgs, func(a, b CachedMessage) int { return cmp.Compare(a.TS, b.TS) })
	pairs := make([]any, 0, 2*len(msgs))
	for _, m := range msgs {
		if err := checkTS(m.TS); err != nil {
			return err
		}
		v, err := c.seal(k, m)
		if err != nil {
			return err
		}
		pairs = append(pairs, m.TS, v)
	}
	from := ""
	if contiguous {
		from = msgs[0].TS
	}
	_, err := c.write(ctx, k, "backfill", from, from == k.ThreadTS, pairs)
	return err
}

// Newest returns at most n of the newest cached messages whose texts
// fit in budget bytes together (0 = no byte budget; the newest message
// is returned even when it alone is larger), oldest first, with the
// cache's coverage. A thread with nothing cached gives an empty view.
func (c *ThreadCache) Newest(ctx context.Context, k ThreadKey, n, budget int) (ThreadView, error) {
	if err := k.validate(); err != nil {
		return ThreadView{}, err
	}
	if n <= 0 {
		n = c.o.MaxMessages
	}
	tk := c.s.k.threadCache(k)
	res, err := cacheReadScript.Run(ctx, c.s.rdb, tk.list(), n).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return ThreadView{}, c.s.wrap("thread cache read "+k.String(), err)
	}
	if len(res) < 3 {
		return ThreadView{}, fmt.Errorf("session: thread cache read %s: short answer", k)
	}
	v := ThreadView{From: fmt.Sprint(res[0]), FromStart: fmt.Sprint(res[1]) == "1"}
	older, _ := strconv.Atoi(fmt.Sprint(res[2]))
	used := 0
	pairs := res[3:]
	for i := 0; i+1 < len(pairs); i += 2 {
		ts, _ := pairs[i].(string)
		sv, _ := pairs[i+1].(string)
		pt, err := c.s.openRecord(tk.cache, k.Team, cacheSealServer(k), cacheSealField(ts), sv)
		if err != nil {
			return ThreadView{}, err
		}
		var m CachedMessage
		if err := json.Unmarshal(pt, &m); err != nil || m.TS != ts {
			return ThreadView{}, fmt.Errorf("session: corrupt cached message %s in key %s", ts, tk.cache)
		}
		if budget > 0 && i > 0 && used+len(m.Text) > budget {
			older += (len(pairs) - i) / 2
			break
		}
		used += len(m.Text)
		v.Messages = append(v.Messages, m)
	}
	v.Omitted = older
	slices.Reverse(v.Messages)
	return v, nil
}
