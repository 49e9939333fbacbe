package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Lease is the right to run the one turn of a thread. Each acquisition gets
// a fencing token greater than every earlier one of the thread; every write
// (Append, Replace, SaveMeta, Dequeue) carries it and is refused with
// ErrStaleFence once another owner acquired the thread. The lease, not the
// token, is only an efficiency measure: correctness rests on the token.
//
// A Lease is used by one goroutine at a time, except that Run may renew it
// concurrently with the holder's writes.
type Lease struct {
	s     *Store
	k     ThreadKey
	owner string
	token int64
	value string // "owner:token", the lease key's value while held
	// since is when the acquisition was sent; renewed is how long after
	// since the latest successful renewal was sent (0: the acquisition).
	// Renew (Run's too) advances renewed; Check reads it.
	since   time.Time
	renewed atomic.Int64 // nanoseconds
	// given is set once the holder gives the lease up (or may have):
	// from then on Check asks Redis every time.
	given atomic.Bool
}

// acquireScript: ARGV = owner, lease TTL ms, session TTL ms →
// {1, token} or {0, current holder}.
var acquireScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[7])
if cur then return {0, cur} end
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('SET', KEYS[7], ARGV[1] .. ':' .. n, 'PX', ARGV[2])
return {1, n}
`)

// renewScript: ARGV = value, lease TTL ms → 1, or 0 when not held.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// releaseScript: KEYS = lease, queue; ARGV = value, lease TTL ms, "idle"|"" →
// 1 released, 0 kept because the queue is not empty (renewed), -1 not held.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if ARGV[3] == 'idle' and redis.call('LLEN', KEYS[2]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 0
end
redis.call('DEL', KEYS[1])
return 1
`)

// unmarkScript: KEYS = active; ARGV = member, score → removes the member
// only if it still carries this acquisition's token.
var unmarkScript = redis.NewScript(`
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 1
`)

// Acquire takes the thread's lease for owner (a replica id; it appears in
// ErrLeaseHeld errors and logs). It also records the thread in the
// active-turns index so another replica can resume it if this one dies
// (see Orphans); Release and ReleaseIfIdle remove it. Acquire costs two round
// trips: index mark and lease script together, then the token in the index.
func (s *Store) Acquire(ctx context.Context, k ThreadKey, owner string) (*Lease, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	if owner == "" || strings.ContainsAny(owner, ":") {
		return nil, fmt.Errorf("session: acquire %s: invalid owner %q", k, owner)
	}
	// Mark first, in the same round trip: if this process dies right after
	// acquiring, the index already names the thread. A mark left behind by a
	// failed acquire is harmless: Orphans sees no lease, whoever acquires
	// finds nothing to do and releases.
	member := k.String()
	tk := s.k.thread(k)
	sent := time.Now()
	var acq *redis.Cmd
	err := s.pipelined(ctx, func(pipe redis.Pipeliner) {
		pipe.ZAddNX(ctx, s.k.active(), redis.Z{Score: 0, Member: member})
		pipe.PExpire(ctx, s.k.active(), s.opt.SessionTTL)
		acq = acquireScript.EvalSha(ctx, pipe, tk.list(), owner, s.opt.LeaseTTL.Milliseconds(), s.opt.SessionTTL.Milliseconds())
	}, acquireScript)
	if err != nil {
		return nil, s.wrap("acquire "+member, err)
	}
	res, err := acq.Slice()
	if err != nil {
		return nil, s.wrap("acquire "+member, err)
	}
	if len(res) != 2 {
		return nil, fmt.Errorf("session: acquire %s: unexpected reply %v", member, res)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		holder, _ := res[1].(string)
		holder, _, _ = strings.Cut(holder, ":")
		return nil, fmt.Errorf("session: acquire %s: %w (%s)", member, ErrLeaseHeld, holder)
	}
	token, _ := res[1].(int64)
	l := &Lease{s: s, k: k, owner: owner, token: token, value: owner + ":" + strconv.FormatInt(token, 10), since: sent}
	pipe := s.rdb.Pipeline()
	pipe.ZAdd(ctx, s.k.active(), redis.Z{Score: float64(token), Member: member})
	pipe.PExpire(ctx, s.k.active(), s.opt.SessionTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		// The lease is held but the index may miss it; give it back.
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, s.wrap("acquire "+member, err)
	}
	return l, nil
}

// Token is the fencing token of this acquisition.
func (l *Lease) Token() int64 { return l.token }

// Key is the thread the lease is for.
func (l *Lease) Key() ThreadKey { return l.k }

// Renew extends the lease by LeaseTTL. ErrLeaseLost means it expired or
// another owner took it: stop the turn.
func (l *Lease) Renew(ctx context.Context) error {
	sent := time.Since(l.since)
	n, err := renewScript.Run(ctx, l.s.rdb, []string{l.s.k.thread(l.k).lease}, l.value, l.s.opt.LeaseTTL.Milliseconds()).Int()
	if err != nil {
		return l.s.wrap("renew "+l.k.String(), err)
	}
	if n != 1 {
		return fmt.Errorf("session: renew %s: %w", l.k, ErrLeaseLost)
	}
	// Run and Check may renew at once: keep the later send.
	for {
		old := l.renewed.Load()
		if int64(sent) <= old || l.renewed.CompareAndSwap(old, int64(sent)) {
			return nil
		}
	}
}

// Check answers what Renew answers (nil while held, ErrLeaseLost once
// another owner took it) for a holder about to act on the lease, such as
// bot/stream's guard before each Slack write, but without a round trip
// while the last successful renewal (Run's, every LeaseTTL/3, included)
// or the acquisition was sent less than checkTrust ago. A lease is only
// taken from its holder after it expired, and it expires no sooner than
// LeaseTTL after a successful renewal was sent; so while Run keeps
// renewing, a stream of writes costs no Redis calls of its own.
func (l *Lease) Check(ctx context.Context) error {
	if !l.given.Load() && time.Since(l.since)-time.Duration(l.renewed.Load()) < l.s.checkTrust() {
		return nil
	}
	return l.Renew(ctx)
}

// checkTrust is how long Check trusts a renewal: half the lease TTL less
// callerTrust, so that a write allowed by a trusting caller still finds
// the lease held for at least half its TTL. At the shortest TTL it is
// zero: Check always asks Redis.
func (s *Store) checkTrust() time.Duration {
	return max(0, s.opt.LeaseTTL/2-callerTrust)
}

// callerTrust is how long a caller may trust Check's answer without
// asking again: bot/stream's guard trusts it for half the shortest
// LEASE_TTL (cmd/bot's floor is 1 s).
const callerTrust = 500 * time.Millisecond

// Release gives the lease up and removes the thread from the active-turns
// index. ErrLeaseLost means it was no longer held (nothing changed).
func (l *Lease) Release(ctx context.Context) error {
	_, err := l.release(ctx, "")
	return err
}

// ReleaseIfIdle gives the lease up only if the thread's queue is empty, in
// the same atomic step; otherwise it renews the lease and returns false, and
// the holder must Dequeue and run the next turn. Together with Enqueue's
// answer this guarantees a queued message always has a holder that will see
// it.
func (l *Lease) ReleaseIfIdle(ctx context.Context) (released bool, err error) {
	return l.release(ctx, "idle")
}

// Handover gives the lease up but leaves the thread in the active-turns
// index, so another replica's Orphans scan resumes the turn at once
// (graceful shutdown).
func (l *Lease) Handover(ctx context.Context) error {
	_, err := l.release(ctx, "handover")
	return err
}

func (l *Lease) release(ctx context.Context, mode string) (bool, error) {
	// A lease given up, or perhaps given up (the answer was lost), is
	// no longer vouched for by earlier renewals. An idle release that
	// kept the lease (a message was queued) keeps the trust.
	if mode != "idle" {
		l.given.Store(true)
	}
	released, err := l.releaseOnce(ctx, mode)
	if released || err != nil {
		l.given.Store(true)
	}
	return released, err
}

// releaseOnce is release's round trip to Redis.
func (l *Lease) releaseOnce(ctx context.Context, mode string) (bool, error) {
	tk := l.s.k.thread(l.k)
	token := strconv.FormatInt(l.token, 10)
	var rel *redis.Cmd
	err := l.s.pipelined(ctx, func(pipe redis.Pipeliner) {
		rel = releaseScript.EvalSha(ctx, pipe, []string{tk.lease, tk.queue}, l.value, l.s.opt.LeaseTTL.Milliseconds(), mode)
		if mode == "" {
			// An unconditional release also unmarks in the same round trip.
			// Should the lease have been lost, the unmark still only removes
			// an entry carrying this acquisition's token; a new holder
			// (re)writes its own right after acquiring.
			unmarkScript.EvalSha(ctx, pipe, []string{l.s.k.active()}, l.k.String(), token)
		}
	}, releaseScript, unmarkScript)
	if err != nil {
		return false, l.s.wrap("release "+l.k.String(), err)
	}
	n, err := rel.Int()
	if err != nil {
		return false, l.s.wrap("release "+l.k.String(), err)
	}
	switch n {
	case 0:
		return false, nil
	case -1:
		return false, fmt.Errorf("session: release %s: %w", l.k, ErrLeaseLost)
	}
	if mode == "idle" {
		if err := unmarkScript.Run(ctx, l.s.rdb, []string{l.s.k.active()}, l.k.String(), token).Err(); err != nil {
			return true, l.s.wrap("release "+l.k.String(), err)
		}
	}
	return true, nil
}

// pipelined sends the commands queue adds in one round trip. Scripts are
// queued as EVALSHA; if the server has forgotten one (restart, SCRIPT
// FLUSH), the scripts are loaded and the pipeline is sent once more, so
// every command queued must be safe to repeat.
func (s *Store) pipelined(ctx context.Context, queue func(redis.Pipeliner), scripts ...*redis.Script) error {
	for attempt := 0; ; attempt++ {
		pipe := s.rdb.Pipeline()
		queue(pipe)
		cmds, err := pipe.Exec(ctx)
		if attempt == 0 && err != nil && slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return redis.HasErrorPrefix(c.Err(), "NOSCRIPT") }) {
			for _, sc := range scripts {
				if err := sc.Load(ctx, s.rdb).Err(); err != nil {
					return err
				}
			}
			continue
		}
		return err
	}
}

// Run renews the lease every LeaseTTL/3 until ctx ends (it then returns nil)
// or the lease is lost (it returns an error wrapping ErrLeaseLost). While
// Redis is unreachable it keeps trying until a full LeaseTTL has passed since
// the last successful renewal, then reports the lease lost. The caller owns
// the goroutine, typically:
//
//	ctx, cancel := context.WithCancelCause(ctx)
//	go func() { if err := lease.Run(ctx); err != nil { cancel(err) } }()
func (l *Lease) Run(ctx context.Context) error {
	ttl := l.s.opt.LeaseTTL
	last := time.Now()
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, ttl/3)
		err := l.Renew(rctx)
		cancel()
		switch {
		case err == nil:
			last = time.Now()
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrLeaseLost):
			return err
		case time.Since(last) >= ttl:
			return fmt.Errorf("session: renew %s: %w: %w", l.k, ErrLeaseLost, err)
		default:
			l.s.log.Warn("session: lease renewal failed; retrying", "thread", l.k.String(), "err", err)
		}
	}
}

// Orphans lists threads in the active-turns index whose lease has expired:
// turns whose replica died (or hand-offs from a graceful shutdown). The
// caller Acquires each (ErrLeaseHeld means another replica was faster),
// resumes from the transcript and drains the queue. Entries for threads
// whose session and queue are gone are pruned.
func (s *Store) Orphans(ctx context.Context) ([]ThreadKey, error) {
	entries, err := s.rdb.ZRangeWithScores(ctx, s.k.active(), 0, maxActiveScan-1).Result()
	if err != nil {
		return nil, s.wrap("orphans", err)
	}
	if len(entries) == 0 {
		return nil, nil
	}
	type probe struct {
		k           ThreadKey
		score       string
		lease, data *redis.IntCmd
	}
	probes := make([]probe, 0, len(entries))
	pipe := s.rdb.Pipeline()
	for _, e := range entries {
		m, _ := e.Member.(string)
		k, err := parseThreadKey(m)
		if err != nil {
			s.log.Warn("session: dropping malformed active-turn entry", "key", s.k.active(), "member", m)
			pipe.ZRem(ctx, s.k.active(), m)
			continue
		}
		tk := s.k.thread(k)
		probes = append(probes, probe{k: k, score: strconv.FormatInt(int64(e.Score), 10),
			lease: pipe.Exists(ctx, tk.lease), data: pipe.Exists(ctx, tk.meta, tk.msgs, tk.queue)})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap("orphans", err)
	}
	var out []ThreadKey
	for _, p := range probes {
		switch {
		case p.lease.Val() > 0:
		case p.data.Val() == 0:
			// Nothing left to resume. Remove the entry only as seen: a turn
			// that started since has re-marked it with its own token.
			if err := unmarkScript.Run(ctx, s.rdb, []string{s.k.active()}, p.k.String(), p.score).Err(); err != nil {
				return nil, s.wrap("orphans", err)
			}
		default:
			out = append(out, p.k)
		}
	}
	return out, nil
}

// maxActiveScan bounds one Orphans call.
const maxActiveScan = 10000
