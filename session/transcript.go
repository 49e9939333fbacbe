package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bobbinbot/bobbin/provider"
)

// Meta is a session's metadata, stored as one JSON value beside the
// transcript. It is extensible: add fields, never rename them.
type Meta struct {
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Model and System are the model and system prompt the session uses.
	Model  string `json:"model,omitempty"`
	System string `json:"system,omitempty"`
	// Usage is the running total of the session's model usage.
	Usage provider.Usage `json:"usage"`
	// Calibration is the ratio of reported to estimated input tokens, used
	// by the budget check; AnchorInput and AnchorMessages are the reported
	// input and transcript length it was measured at.
	Calibration    float64 `json:"calibration,omitempty"`
	AnchorInput    int     `json:"anchor_input,omitempty"`
	AnchorMessages int     `json:"anchor_messages,omitempty"`
	// Grants are the tools allowed for the rest of the session ("always
	// allow in this thread"). Load fills it from a separate set; SaveMeta
	// ignores it: use Grant and RevokeGrant.
	Grants []string `json:"-"`
	// TurnID identifies the running (or last) turn; RequesterID is the user
	// whose message started it; TriggerTS is that message's ts.
	TurnID      string `json:"turn_id,omitempty"`
	RequesterID string `json:"requester_id,omitempty"`
	TriggerTS   string `json:"trigger_ts,omitempty"`
	// ReplyTS is the Slack message being streamed, so a replica that takes
	// the turn over keeps editing it instead of posting a second reply.
	ReplyTS string `json:"reply_ts,omitempty"`
	// Phase is the turn's checkpoint phase, free-form for the caller
	// (e.g. "model", "awaiting_approval", "tools", "done").
	Phase string `json:"phase,omitempty"`
	// Extra holds anything else the caller keeps with the session.
	Extra map[string]string `json:"extra,omitempty"`
}

// Lua fragments shared by the per-thread scripts. KEYS are always, in order:
// fence, msgs, meta, queue, grants, approvals, lease (see threadArgs).
const luaTouch = `
local function touch(ttl)
  for i = 1, 6 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
`

// appendScript: ARGV = token, session TTL ms, messages... → 1, or 0 if stale.
var appendScript = redis.NewScript(luaTouch + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
for i = 3, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
touch(ARGV[2])
return 1
`)

// replaceScript: like appendScript, but the transcript is replaced.
var replaceScript = redis.NewScript(luaTouch + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[2])
for i = 3, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
touch(ARGV[2])
return 1
`)

// saveMetaScript: ARGV = token, session TTL ms, meta JSON.
var saveMetaScript = redis.NewScript(luaTouch + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[3], ARGV[3])
touch(ARGV[2])
return 1
`)

// grantScript: ARGV = session TTL ms, "add"|"rem", tool.
var grantScript = redis.NewScript(luaTouch + `
if ARGV[2] == 'add' then redis.call('SADD', KEYS[5], ARGV[3]) else redis.call('SREM', KEYS[5], ARGV[3]) end
touch(ARGV[1])
return 1
`)

func (tk threadKeys) list() []string {
	return []string{tk.fence, tk.msgs, tk.meta, tk.queue, tk.grants, tk.approvals, tk.lease}
}

// Load returns a thread's metadata and transcript in one round trip.
// ErrNotFound means the thread has no session (never had one, or it expired).
// A message or metadata value that does not decode is an error naming the
// key; it is never skipped or overwritten.
func (s *Store) Load(ctx context.Context, k ThreadKey) (Meta, []provider.Message, error) {
	if err := k.validate(); err != nil {
		return Meta{}, nil, err
	}
	tk := s.k.thread(k)
	pipe := s.rdb.Pipeline()
	metaCmd := pipe.Get(ctx, tk.meta)
	msgsCmd := pipe.LRange(ctx, tk.msgs, 0, -1)
	grantsCmd := pipe.SMembers(ctx, tk.grants)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Meta{}, nil, s.wrap("load "+k.String(), err)
	}
	raw, metaErr := metaCmd.Bytes()
	items := msgsCmd.Val()
	if errors.Is(metaErr, redis.Nil) && len(items) == 0 {
		return Meta{}, nil, fmt.Errorf("session: load %s: %w", k, ErrNotFound)
	}
	var m Meta
	if metaErr == nil {
		if err := json.Unmarshal(raw, &m); err != nil {
			return Meta{}, nil, fmt.Errorf("session: corrupt metadata in key %s: %v", tk.meta, err)
		}
	}
	m.Grants = grantsCmd.Val()
	msgs, err := decodeMessages(tk.msgs, items)
	if err != nil {
		return Meta{}, nil, err
	}
	return m, msgs, nil
}

// decodeMessages decodes a transcript. JSON decoding is most of the cost of
// Load, so long transcripts are decoded in parallel chunks (the goroutines
// end before it returns). The error names the key and the first bad index.
func decodeMessages(key string, items []string) ([]provider.Message, error) {
	msgs := make([]provider.Message, len(items))
	decode := func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			b := []byte(items[i])
			if fastDecodeMessage(b, &msgs[i]) {
				continue
			}
			msgs[i] = provider.Message{}
			if err := json.Unmarshal(b, &msgs[i]); err != nil {
				return fmt.Errorf("session: corrupt message %d in key %s: %v", i, key, err)
			}
		}
		return nil
	}
	workers := min(runtime.GOMAXPROCS(0), len(items)/parallelDecodeMin)
	if workers < 2 {
		return msgs, decode(0, len(items))
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*len(items)/workers, (w+1)*len(items)/workers
		wg.Go(func() { errs[w] = decode(lo, hi) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return msgs, nil
}

// parallelDecodeMin is the smallest number of messages per decoding
// goroutine.
const parallelDecodeMin = 128

// Exists reports whether the thread has a session.
func (s *Store) Exists(ctx context.Context, k ThreadKey) (bool, error) {
	if err := k.validate(); err != nil {
		return false, err
	}
	tk := s.k.thread(k)
	n, err := s.rdb.Exists(ctx, tk.meta, tk.msgs).Result()
	if err != nil {
		return false, s.wrap("exists "+k.String(), err)
	}
	return n > 0, nil
}

// Append adds messages to the end of the transcript in one round trip,
// whatever the transcript's length, and refreshes the session's TTL. fence
// is the holder's Lease.Token(); ErrStaleFence means another replica took
// the thread over and nothing was written.
func (s *Store) Append(ctx context.Context, k ThreadKey, fence int64, msgs ...provider.Message) error {
	return s.writeMsgs(ctx, "append", appendScript, k, fence, msgs)
}

// Replace swaps the whole transcript for msgs atomically (compaction), with
// the same fencing as Append.
func (s *Store) Replace(ctx context.Context, k ThreadKey, fence int64, msgs []provider.Message) error {
	return s.writeMsgs(ctx, "replace", replaceScript, k, fence, msgs)
}

func (s *Store) writeMsgs(ctx context.Context, op string, script *redis.Script, k ThreadKey, fence int64, msgs []provider.Message) error {
	if err := k.validate(); err != nil {
		return err
	}
	args := make([]any, 0, 2+len(msgs))
	args = append(args, strconv.FormatInt(fence, 10), s.opt.SessionTTL.Milliseconds())
	for i := range msgs {
		// Content parts are stored as references: provider.Part.Data (image
		// and PDF bytes) is never encoded, so a stored image costs a few
		// hundred bytes, not megabytes of base64.
		b, err := json.Marshal(&msgs[i])
		if err != nil {
			return fmt.Errorf("session: %s %s: encoding message %d: %w", op, k, i, err)
		}
		args = append(args, b)
	}
	return s.fenced(ctx, op, script, k, args)
}

// fenced runs a per-thread script that answers 1, or 0 for a stale token.
func (s *Store) fenced(ctx context.Context, op string, script *redis.Script, k ThreadKey, args []any) error {
	n, err := script.Run(ctx, s.rdb, s.k.thread(k).list(), args...).Int()
	if err != nil {
		return s.wrap(op+" "+k.String(), err)
	}
	if n == 0 {
		return fmt.Errorf("session: %s %s: %w", op, k, ErrStaleFence)
	}
	return nil
}

// SaveMeta stores the session metadata (fenced like Append). Updated is set
// to now, and Created too when it is zero. Grants are not written.
func (s *Store) SaveMeta(ctx context.Context, k ThreadKey, fence int64, m Meta) error {
	if err := k.validate(); err != nil {
		return err
	}
	now := time.Now().UTC()
	if m.Created.IsZero() {
		m.Created = now
	}
	m.Updated = now
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("session: save meta %s: %w", k, err)
	}
	return s.fenced(ctx, "save meta", saveMetaScript, k, []any{strconv.FormatInt(fence, 10), s.opt.SessionTTL.Milliseconds(), b})
}

// Grant allows tool for the rest of the session. It is not fenced: an
// "always allow" click may be handled by any replica while the turn runs
// elsewhere, and a single set-add cannot interleave badly with the turn.
func (s *Store) Grant(ctx context.Context, k ThreadKey, tool string) error {
	return s.grant(ctx, k, "add", tool)
}

// RevokeGrant removes a grant (the Revoke button). It is not fenced for the
// same reason as Grant; a turn that checked the grant just before the revoke
// may still run that one call, every later check sees the revocation.
func (s *Store) RevokeGrant(ctx context.Context, k ThreadKey, tool string) error {
	return s.grant(ctx, k, "rem", tool)
}

// HasGrant reports whether tool is still granted in thread k: a turn checks
// it before relying on a grant, so a Revoke click on any replica takes
// effect at the next call, even inside a running turn.
func (s *Store) HasGrant(ctx context.Context, k ThreadKey, tool string) (bool, error) {
	if err := k.validate(); err != nil {
		return false, err
	}
	ok, err := s.rdb.SIsMember(ctx, s.k.thread(k).grants, tool).Result()
	if err != nil {
		return false, s.wrap("has grant "+k.String(), err)
	}
	return ok, nil
}

func (s *Store) grant(ctx context.Context, k ThreadKey, op, tool string) error {
	if err := k.validate(); err != nil {
		return err
	}
	if tool == "" {
		return errors.New("session: grant: empty tool name")
	}
	if err := grantScript.Run(ctx, s.rdb, s.k.thread(k).list(), s.opt.SessionTTL.Milliseconds(), op, tool).Err(); err != nil {
		return s.wrap("grant "+k.String(), err)
	}
	return nil
}
