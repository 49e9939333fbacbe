package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A prompt is something a turn asks a person in Slack and waits for, shared
// by every replica: tool approvals (approval.go) and MCP servers' questions
// (elicit.go). Its lifecycle is the same for both kinds and written once
// here, as prompts[T]:
//
//   - create: the record is stored pending and its id indexed under its
//     thread (for Stop and for a replica resuming the turn);
//   - settle: whoever answers, on any replica, moves it from pending to a
//     final state exactly once (a compare-and-set in Lua) and wakes every
//     waiter; an answer after Expires settles it "expired" and does not win;
//   - wait: the turn blocks until it is settled, settling it "expired"
//     itself once Expires passes;
//   - pending: the thread's prompts still pending, to withdraw on Stop.
//
// The record is a hash kept until ApprovalRetention after Expires, so a
// late click gets a precise answer:
//
//	P:{X:ID}            hash: the record (X: a approval, e question)
//	P:{X:ID}:wake       wake-up list for waiters, expires with the record
//	P:{t:THREAD}:NAME   set of the thread's ids (NAME: approvals, elicits)
//
// Each kind gives its keys and encodes its own fields around Prompt's.

// Prompt states the lifecycle itself uses; each kind names its others.
const (
	promptPending = "pending"
	promptExpired = "expired"
)

// Prompt is what every prompt's record has — approvals and questions
// embed it — and the part the lifecycle reads and writes itself.
type Prompt struct {
	// ID is the prompt's id (the only thing its buttons carry); Create*
	// generates one when empty.
	ID                      string
	Team, Channel, ThreadTS string
	// Requester is the person whose turn asked (an approval) or who is
	// asked (a question); Server the MCP server of the tool or question.
	Requester, Server string
	Created, Expires  time.Time
	// State is one of the kind's constants (Approval*, Question*).
	State, DecidedBy string
	DecidedAt        time.Time
	// MessageTS is the Slack message carrying the prompt.
	MessageTS string
}

// Thread is the prompt's thread.
func (c Prompt) Thread() ThreadKey { return ThreadKey{c.Team, c.Channel, c.ThreadTS} }

// Decided reports whether the prompt is in a final state.
func (c Prompt) Decided() bool { return c.decided() }

func (c Prompt) decided() bool { return c.State != promptPending && c.State != "" }

// fields encodes c around the kind's own fields (mid), in the order the
// hash has always been written. Times are unix milliseconds, "" when zero.
func (c Prompt) fields(mid ...any) []any {
	ms := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return strconv.FormatInt(t.UnixMilli(), 10)
	}
	f := append([]any{"id", c.ID, "team", c.Team, "channel", c.Channel, "thread_ts", c.ThreadTS,
		"requester", c.Requester, "server", c.Server}, mid...)
	return append(f, "created", ms(c.Created), "expires", ms(c.Expires), "state", c.State,
		"decided_by", c.DecidedBy, "decided_at", ms(c.DecidedAt), "message_ts", c.MessageTS)
}

// parsePromptCore reverses fields for the record of a noun in key.
func parsePromptCore(noun, key string, h map[string]string) (Prompt, error) {
	ms := func(f string) (time.Time, error) {
		v := h[f]
		if v == "" {
			return time.Time{}, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("session: corrupt field %s in key %s: %v", f, key, err)
		}
		return time.UnixMilli(n).UTC(), nil
	}
	c := Prompt{
		ID: h["id"], Team: h["team"], Channel: h["channel"], ThreadTS: h["thread_ts"],
		Requester: h["requester"], Server: h["server"],
		State: h["state"], DecidedBy: h["decided_by"], MessageTS: h["message_ts"],
	}
	var errs [3]error
	c.Created, errs[0] = ms("created")
	c.Expires, errs[1] = ms("expires")
	c.DecidedAt, errs[2] = ms("decided_at")
	if err := errors.Join(errs[:]...); err != nil {
		return Prompt{}, err
	}
	if c.ID == "" || c.State == "" || c.Expires.IsZero() {
		return Prompt{}, fmt.Errorf("session: corrupt %s in key %s: missing id, state or expiry", noun, key)
	}
	return c, nil
}

// prompt is what the lifecycle needs of a kind's record type T: its core,
// and T with the core replaced.
type prompt[T any] interface {
	core() Prompt
	withCore(Prompt) T
}

// prompts is the lifecycle of one kind of prompt.
type prompts[T prompt[T]] struct {
	noun       string // "approval", "question": in ids, ops and errors
	settleVerb string // "decide", "answer": the settle op in errors
	// final lists the states settle accepts.
	final  []string
	record func(keys, string) string    // the record's key by id
	index  func(keys, ThreadKey) string // the thread's set of ids
	// encode gives the record's fields (Prompt.fields with the kind's);
	// decode builds T from its parsed core and the hash.
	encode func(*Store, T) ([]any, error)
	decode func(s *Store, key string, h map[string]string, c Prompt) (T, error)
}

func (p *prompts[T]) wake(k keys, id string) string { return p.record(k, id) + ":wake" }

func (p *prompts[T]) notFound(id string) error {
	return fmt.Errorf("session: %s %s: %w", p.noun, id, ErrNotFound)
}

func (p *prompts[T]) parse(s *Store, key string, h map[string]string) (T, error) {
	c, err := parsePromptCore(p.noun, key, h)
	if err != nil {
		var zero T
		return zero, err
	}
	return p.decode(s, key, h, c)
}

// createPromptScript: ARGV = TTL ms, fields... → 0 if the id exists.
var createPromptScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local f = {}
for i = 2, #ARGV do f[#f + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(f))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
`)

// create stores v pending and indexes it under its thread. It fills ID
// (when empty), Created and State, clears the decision and returns the
// stored record. Expires must be in the future.
func (p *prompts[T]) create(ctx context.Context, s *Store, v T) (T, error) {
	var zero T
	c := v.core()
	if err := c.Thread().validate(); err != nil {
		return zero, err
	}
	if c.ID == "" {
		c.ID = NewApprovalID()
	}
	if err := checkPart(p.noun+" id", c.ID); err != nil {
		return zero, err
	}
	op := "create " + p.noun + " " + c.ID
	now := time.Now().UTC()
	if !c.Expires.After(now) {
		return zero, fmt.Errorf("session: %s: expiry %s is not in the future", op, c.Expires)
	}
	c.Created, c.State, c.DecidedBy, c.DecidedAt = now, promptPending, "", time.Time{}
	v = v.withCore(c)
	fields, err := p.encode(s, v)
	if err != nil {
		return zero, fmt.Errorf("session: %s: %w", op, err)
	}
	ttl := time.Until(c.Expires) + s.opt.ApprovalRetention
	// Index first (a dangling index entry is skipped and pruned by
	// pending); the two keys live in different hash slots.
	set := p.index(s.k, c.Thread())
	pipe := s.rdb.Pipeline()
	pipe.SAdd(ctx, set, c.ID)
	pipe.PExpire(ctx, set, max(ttl, s.opt.SessionTTL))
	if _, err := pipe.Exec(ctx); err != nil {
		return zero, s.wrap(op, err)
	}
	n, err := createPromptScript.Run(ctx, s.rdb, []string{p.record(s.k, c.ID)}, append([]any{ttl.Milliseconds()}, fields...)...).Int()
	if err != nil {
		return zero, s.wrap(op, err)
	}
	if n == 0 {
		return zero, fmt.Errorf("session: %s: id already exists", op)
	}
	return v, nil
}

// get returns a record; ErrNotFound when unknown or long expired. A
// pending record past its expiry is returned as it is.
func (p *prompts[T]) get(ctx context.Context, s *Store, id string) (T, error) {
	var zero T
	if err := checkPart(p.noun+" id", id); err != nil {
		return zero, err
	}
	key := p.record(s.k, id)
	h, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return zero, s.wrap("get "+p.noun+" "+id, err)
	}
	if len(h) == 0 {
		return zero, p.notFound(id)
	}
	return p.parse(s, key, h)
}

// check validates the arguments of a settle by a caller.
func (p *prompts[T]) check(id, state string) error {
	if err := checkPart(p.noun+" id", id); err != nil {
		return err
	}
	if !slices.Contains(p.final, state) {
		return fmt.Errorf("session: %s %s %s: invalid state %q", p.settleVerb, p.noun, id, state)
	}
	return nil
}

// settleScript: KEYS = record, wake; ARGV = state, by, now ms, answer →
// {won 1|0|-1 missing, fields...}. The compare-and-set pending → state
// happens once across all replicas; a settle after Expires records
// "expired" and does not win. The answer ("" for none) is stored only by
// the winner.
var settleScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local won = 0
if redis.call('HGET', KEYS[1], 'state') == 'pending' then
  local target, by = ARGV[1], ARGV[2]
  local exp = tonumber(redis.call('HGET', KEYS[1], 'expires'))
  if target ~= 'expired' and exp and tonumber(ARGV[3]) >= exp then target = 'expired'; by = '' end
  if target == ARGV[1] then won = 1 end
  redis.call('HSET', KEYS[1], 'state', target, 'decided_by', by, 'decided_at', ARGV[3])
  if won == 1 and ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'answer', ARGV[4]) end
  redis.call('RPUSH', KEYS[2], '1')
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) else redis.call('PEXPIRE', KEYS[2], 60000) end
end
local out = {won}
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h do out[#out + 1] = h[i] end
return out
`)

// settle moves a pending record to state (checked by the caller), recording
// by, exactly once across all replicas: won is true only for the call that
// made the change. Every call returns the record as stored afterwards.
func (p *prompts[T]) settle(ctx context.Context, s *Store, id, state, by, answer string) (v T, won bool, err error) {
	op := p.settleVerb + " " + p.noun + " " + id
	key := p.record(s.k, id)
	res, err := settleScript.Run(ctx, s.rdb, []string{key, p.wake(s.k, id)}, state, by, time.Now().UnixMilli(), answer).Slice()
	if err != nil {
		return v, false, s.wrap(op, err)
	}
	if len(res) == 0 {
		return v, false, fmt.Errorf("session: %s: empty reply", op)
	}
	code, _ := res[0].(int64)
	if code == -1 {
		return v, false, p.notFound(id)
	}
	h := make(map[string]string, len(res)/2)
	for i := 1; i+1 < len(res); i += 2 {
		k, _ := res[i].(string)
		v, _ := res[i+1].(string)
		h[k] = v
	}
	v, err = p.parse(s, key, h)
	return v, code == 1, err
}

// rewakeScript puts a wake-up token back after a waiter took it (BLPOP
// deleted the emptied list, so its TTL is set again). KEYS = record, wake.
var rewakeScript = redis.NewScript(`
redis.call('RPUSH', KEYS[2], '1')
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) else redis.call('PEXPIRE', KEYS[2], 60000) end
return 1
`)

// waitPoll bounds one BLPOP so ctx cancellation is noticed promptly
// (go-redis cannot interrupt a blocked read).
const waitPoll = time.Second

// wait blocks until the record is settled (on any replica), its expiry
// passes (it is then settled "expired" through the same compare-and-set,
// and returned), or ctx ends (ctx's error; the record stays pending).
// Between checks the waiter blocks in BLPOP on the record's wake-up list,
// on a dedicated connection, for at most waitPoll.
func (p *prompts[T]) wait(ctx context.Context, s *Store, id string) (T, error) {
	var zero T
	op := "wait " + p.noun + " " + id
	record, wake := p.record(s.k, id), p.wake(s.k, id)
	// A dedicated connection of the waits client: BLPOP holds it.
	conn, err := s.waitConn(ctx, wake)
	if err != nil {
		return zero, err
	}
	defer conn.Close()
	for {
		v, err := p.get(ctx, s, id)
		if err != nil {
			return zero, err
		}
		c := v.core()
		if c.decided() {
			return v, nil
		}
		if !time.Now().Before(c.Expires) {
			v, _, err = p.settle(ctx, s, id, promptExpired, "", "")
			if err != nil {
				return zero, err
			}
			return v, nil
		}
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		// BLPOP itself runs without ctx: a cancelled read would poison the
		// connection; the one-second block bounds the delay instead.
		// Block at most waitPoll, and not past the expiry (BLPOP takes
		// fractional seconds since Redis 6).
		block := max(min(waitPoll, time.Until(c.Expires)), 10*time.Millisecond)
		err = conn.Do(context.WithoutCancel(ctx), "BLPOP", wake, strconv.FormatFloat(block.Seconds(), 'f', 3, 64)).Err()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return zero, s.wrap(op, err)
		default:
			// Put the token back so every other waiter wakes too; the
			// list expires with the record.
			if err := rewakeScript.Run(context.WithoutCancel(ctx), conn, []string{record, wake}).Err(); err != nil {
				return zero, s.wrap(op, err)
			}
		}
		if err := ctx.Err(); err != nil {
			return zero, err
		}
	}
}

// pending lists the thread's records still pending (including ones past
// expiry nobody has settled yet), oldest first, and prunes index entries
// whose record is gone.
func (p *prompts[T]) pending(ctx context.Context, s *Store, k ThreadKey) ([]T, error) {
	return p.inThread(ctx, s, k, false)
}

// inThread lists thread k's records, oldest first: the pending ones, or
// with decided also those decided and not yet expired.
func (p *prompts[T]) inThread(ctx context.Context, s *Store, k ThreadKey, decided bool) ([]T, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	op := "pending " + p.noun + "s " + k.String()
	set := p.index(s.k, k)
	ids, err := s.rdb.SMembers(ctx, set).Result()
	if err != nil {
		return nil, s.wrap(op, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, p.record(s.k, id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap(op, err)
	}
	var out []T
	var gone []any
	for i, c := range cmds {
		h := c.Val()
		if len(h) == 0 {
			gone = append(gone, ids[i])
			continue
		}
		v, err := p.parse(s, p.record(s.k, ids[i]), h)
		if err != nil {
			return nil, err
		}
		if decided || !v.core().decided() {
			out = append(out, v)
		}
	}
	if len(gone) > 0 {
		if err := s.rdb.SRem(ctx, set, gone...).Err(); err != nil {
			return nil, s.wrap(op, err)
		}
	}
	slices.SortFunc(out, func(a, b T) int { return a.core().Created.Compare(b.core().Created) })
	return out, nil
}
