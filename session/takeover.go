package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The reply record names the Slack message a running turn streams into, so
// a replica that takes the turn over (the holder died mid-stream) can find
// the half-streamed message and finish or mark it instead of leaving it
// with a live Stop button. It is written as soon as the message is posted,
// long before the turn's next checkpoint, so it lives beside the metadata
// rather than in it.

// saveReplyScript: KEYS = fence, reply; ARGV = token, value, session TTL ms
// → 1, or 0 when the token is stale.
var saveReplyScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
`)

// replyKey shares the thread's hash tag.
func (k keys) reply(t ThreadKey) string { return k.prefix + ":{t:" + t.String() + "}:reply" }

// SaveReply records that turn turnID streams into the Slack message ts. It
// is fenced like Append: ErrStaleFence means another replica owns the
// thread now.
func (s *Store) SaveReply(ctx context.Context, k ThreadKey, fence int64, turnID, ts string) error {
	if err := k.validate(); err != nil {
		return err
	}
	if turnID == "" || strings.Contains(turnID, " ") || ts == "" {
		return fmt.Errorf("session: save reply %s: invalid turn id or ts", k)
	}
	keys := []string{s.k.thread(k).fence, s.k.reply(k)}
	n, err := saveReplyScript.Run(ctx, s.rdb, keys, strconv.FormatInt(fence, 10), turnID+" "+ts, s.opt.SessionTTL.Milliseconds()).Int()
	if err != nil {
		return s.wrap("save reply "+k.String(), err)
	}
	if n == 0 {
		return fmt.Errorf("session: save reply %s: %w", k, ErrStaleFence)
	}
	return nil
}

// ReplyOf returns the Slack message ts that turn turnID streamed into, or
// "" when that turn recorded none (it died before posting, or the record
// is another turn's).
func (s *Store) ReplyOf(ctx context.Context, k ThreadKey, turnID string) (string, error) {
	if err := k.validate(); err != nil {
		return "", err
	}
	v, err := s.rdb.Get(ctx, s.k.reply(k)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", s.wrap("reply "+k.String(), err)
	}
	id, ts, ok := strings.Cut(v, " ")
	if !ok || id != turnID {
		return "", nil
	}
	return ts, nil
}

// EnqueueMarked is Enqueue that also records the thread in the
// active-turns index (if it is not there yet), in the same round trip. A
// replica that queued a message and died before acquiring the thread
// leaves it findable: Orphans lists it once no lease is held, and whoever
// acquires it drains the queue. A mark left behind is harmless (Orphans
// prunes entries whose thread has no state).
func (s *Store) EnqueueMarked(ctx context.Context, k ThreadKey, payload []byte) (leased bool, err error) {
	if err := k.validate(); err != nil {
		return false, err
	}
	var enq *redis.Cmd
	err = s.pipelined(ctx, func(pipe redis.Pipeliner) {
		pipe.ZAddNX(ctx, s.k.active(), redis.Z{Score: 0, Member: k.String()})
		pipe.PExpire(ctx, s.k.active(), s.opt.SessionTTL) // as Acquire does: the index may be new
		enq = enqueueScript.EvalSha(ctx, pipe, s.k.thread(k).list(), s.opt.SessionTTL.Milliseconds(), MaxQueue, payload)
	}, enqueueScript)
	if err != nil {
		return false, s.wrap("enqueue "+k.String(), err)
	}
	return s.enqueueResult(k, enq)
}

// LoadMeta returns a thread's metadata without its transcript (ErrNotFound
// when there is none): enough to tell whether the last turn finished.
func (s *Store) LoadMeta(ctx context.Context, k ThreadKey) (Meta, error) {
	if err := k.validate(); err != nil {
		return Meta{}, err
	}
	tk := s.k.thread(k)
	raw, err := s.rdb.Get(ctx, tk.meta).Bytes()
	if errors.Is(err, redis.Nil) {
		return Meta{}, fmt.Errorf("session: load meta %s: %w", k, ErrNotFound)
	}
	if err != nil {
		return Meta{}, s.wrap("load meta "+k.String(), err)
	}
	var m Meta
	if err := json.Unmarshal(raw, &m); err != nil {
		return Meta{}, fmt.Errorf("session: corrupt metadata in key %s: %v", tk.meta, err)
	}
	return m, nil
}
