package session

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// MaxQueue bounds a thread's queue of pending messages.
const MaxQueue = 1000

// enqueueScript: KEYS = thread keys; ARGV = session TTL ms, max, payload →
// {1 pushed | 0 full, lease held 1|0}.
var enqueueScript = redis.NewScript(`
local held = redis.call('EXISTS', KEYS[7])
if redis.call('LLEN', KEYS[4]) >= tonumber(ARGV[2]) then return {0, held} end
redis.call('RPUSH', KEYS[4], ARGV[3])
redis.call('PEXPIRE', KEYS[4], ARGV[1])
return {1, held}
`)

// dequeueScript: ARGV = token → {1, payload} | {1} empty | {0} stale.
var dequeueScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
local v = redis.call('LPOP', KEYS[4])
if v then return {1, v} end
return {1}
`)

// Enqueue appends an opaque payload (a message that arrived for the thread)
// to the thread's FIFO queue and reports, in the same atomic step, whether a
// lease is held. When leased is true the holder will take the payload
// (ReleaseIfIdle refuses to release while the queue is not empty); when it is
// false the caller should Acquire the thread and drain the queue itself.
// ErrQueueFull when the queue holds MaxQueue payloads.
func (s *Store) Enqueue(ctx context.Context, k ThreadKey, payload []byte) (leased bool, err error) {
	if err := k.validate(); err != nil {
		return false, err
	}
	return s.enqueueResult(k, enqueueScript.Run(ctx, s.rdb, s.k.thread(k).list(), s.opt.SessionTTL.Milliseconds(), MaxQueue, payload))
}

// enqueueResult reads enqueueScript's reply.
func (s *Store) enqueueResult(k ThreadKey, cmd *redis.Cmd) (leased bool, err error) {
	res, err := cmd.Int64Slice()
	if err != nil {
		return false, s.wrap("enqueue "+k.String(), err)
	}
	if len(res) != 2 {
		return false, fmt.Errorf("session: enqueue %s: unexpected reply %v", k, res)
	}
	if res[0] == 0 {
		return res[1] == 1, fmt.Errorf("session: enqueue %s: %w", k, ErrQueueFull)
	}
	return res[1] == 1, nil
}

// Dequeue takes the oldest queued payload; ok is false when the queue is
// empty. It is fenced like Append, so a holder that lost the thread cannot
// take (and lose) a message meant for the new holder.
func (s *Store) Dequeue(ctx context.Context, k ThreadKey, fence int64) (payload []byte, ok bool, err error) {
	if err := k.validate(); err != nil {
		return nil, false, err
	}
	res, err := dequeueScript.Run(ctx, s.rdb, s.k.thread(k).list(), strconv.FormatInt(fence, 10)).Slice()
	if err != nil {
		return nil, false, s.wrap("dequeue "+k.String(), err)
	}
	if len(res) == 0 {
		return nil, false, fmt.Errorf("session: dequeue %s: unexpected empty reply", k)
	}
	if n, _ := res[0].(int64); n == 0 {
		return nil, false, fmt.Errorf("session: dequeue %s: %w", k, ErrStaleFence)
	}
	if len(res) == 1 {
		return nil, false, nil
	}
	v, _ := res[1].(string)
	return []byte(v), true, nil
}

// QueueLen is the number of queued payloads.
func (s *Store) QueueLen(ctx context.Context, k ThreadKey) (int, error) {
	if err := k.validate(); err != nil {
		return 0, err
	}
	n, err := s.rdb.LLen(ctx, s.k.thread(k).queue).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, s.wrap("queue length "+k.String(), err)
	}
	return int(n), nil
}
