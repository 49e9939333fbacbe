package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Approval states. Every state but ApprovalPending is final.
const (
	ApprovalPending      = "pending"
	ApprovalAllowOnce    = "allow_once"
	ApprovalAllowSession = "allow_session"
	ApprovalDeny         = "deny"
	// ApprovalExpired is set when nobody decided before Expires; callers
	// treat it as a denial.
	ApprovalExpired = "expired"
	// ApprovalWithdrawn is set when the turn was stopped while waiting.
	ApprovalWithdrawn = "withdrawn"
)

// Approval is a pending or decided tool-call approval, shared by all
// replicas: the click may reach any of them.
type Approval struct {
	// ID is the approval's id (the only thing a button carries). CreateApproval
	// generates one when empty.
	ID                       string
	Team, Channel, ThreadTS  string
	Requester                string // user whose message started the turn
	Server, Tool, ArgsDigest string
	// CallID is the model's tool-call id, so a replica resuming the turn finds
	// the approval of the call it is about to run.
	CallID  string
	Created time.Time
	Expires time.Time
	// State is one of the Approval* constants.
	State     string
	DecidedBy string
	DecidedAt time.Time
	// MessageTS is the Slack message carrying the buttons.
	MessageTS string
	// AdminOnly: the tool policy says only an admin's click counts.
	// OnceOnly: no thread-wide permission may be given (destructive).
	AdminOnly, OnceOnly bool
}

// Thread is the approval's thread.
func (a Approval) Thread() ThreadKey { return ThreadKey{a.Team, a.Channel, a.ThreadTS} }

// Decided reports whether a is in a final state.
func (a Approval) Decided() bool { return a.State != ApprovalPending && a.State != "" }

func (a Approval) fields() []any {
	ms := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return strconv.FormatInt(t.UnixMilli(), 10)
	}
	return []any{
		"id", a.ID, "team", a.Team, "channel", a.Channel, "thread_ts", a.ThreadTS,
		"requester", a.Requester, "server", a.Server, "tool", a.Tool, "args_digest", a.ArgsDigest,
		"call_id", a.CallID, "created", ms(a.Created), "expires", ms(a.Expires), "state", a.State,
		"decided_by", a.DecidedBy, "decided_at", ms(a.DecidedAt), "message_ts", a.MessageTS,
		"admin_only", flag(a.AdminOnly), "once_only", flag(a.OnceOnly),
	}
}

func parseApproval(key string, h map[string]string) (Approval, error) {
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
	a := Approval{
		ID: h["id"], Team: h["team"], Channel: h["channel"], ThreadTS: h["thread_ts"],
		Requester: h["requester"], Server: h["server"], Tool: h["tool"], ArgsDigest: h["args_digest"],
		CallID: h["call_id"], State: h["state"], DecidedBy: h["decided_by"], MessageTS: h["message_ts"],
		AdminOnly: h["admin_only"] == "1", OnceOnly: h["once_only"] == "1",
	}
	var errs [3]error
	a.Created, errs[0] = ms("created")
	a.Expires, errs[1] = ms("expires")
	a.DecidedAt, errs[2] = ms("decided_at")
	if err := errors.Join(errs[:]...); err != nil {
		return Approval{}, err
	}
	if a.ID == "" || a.State == "" || a.Expires.IsZero() {
		return Approval{}, fmt.Errorf("session: corrupt approval in key %s: missing id, state or expiry", key)
	}
	return a, nil
}

// createApprovalScript: ARGV = TTL ms, fields... → 0 if the id exists.
var createApprovalScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local f = {}
for i = 2, #ARGV do f[#f + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(f))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
`)

// decideScript: KEYS = record, wake; ARGV = state, by, now ms →
// {won 1|0|-1 missing, fields...}. The compare-and-set pending → state
// happens once; a click after Expires decides "expired" and does not win.
var decideScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local won = 0
if redis.call('HGET', KEYS[1], 'state') == 'pending' then
  local target, by = ARGV[1], ARGV[2]
  local exp = tonumber(redis.call('HGET', KEYS[1], 'expires'))
  if target ~= 'expired' and exp and tonumber(ARGV[3]) >= exp then target = 'expired'; by = '' end
  if target == ARGV[1] then won = 1 end
  redis.call('HSET', KEYS[1], 'state', target, 'decided_by', by, 'decided_at', ARGV[3])
  redis.call('RPUSH', KEYS[2], '1')
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) else redis.call('PEXPIRE', KEYS[2], 60000) end
end
local out = {won}
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h do out[#out + 1] = h[i] end
return out
`)

// rewakeScript puts a wake-up token back after a waiter took it (BLPOP
// deleted the emptied list, so its TTL is set again). KEYS = record, wake.
var rewakeScript = redis.NewScript(`
redis.call('RPUSH', KEYS[2], '1')
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) else redis.call('PEXPIRE', KEYS[2], 60000) end
return 1
`)

// NewApprovalID returns a random approval id.
func NewApprovalID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// CreateApproval stores a pending approval and indexes it under its thread.
// It fills ID (when empty), Created and State and returns the stored record.
// Expires must be in the future. The record is kept until ApprovalRetention
// after Expires so late clicks get a precise answer.
func (s *Store) CreateApproval(ctx context.Context, a Approval) (Approval, error) {
	if err := a.Thread().validate(); err != nil {
		return Approval{}, err
	}
	if a.ID == "" {
		a.ID = NewApprovalID()
	}
	if err := checkPart("approval id", a.ID); err != nil {
		return Approval{}, err
	}
	now := time.Now().UTC()
	if !a.Expires.After(now) {
		return Approval{}, fmt.Errorf("session: create approval %s: expiry %s is not in the future", a.ID, a.Expires)
	}
	a.Created, a.State, a.DecidedBy, a.DecidedAt = now, ApprovalPending, "", time.Time{}
	ttl := time.Until(a.Expires) + s.opt.ApprovalRetention
	// Index first (a dangling index entry is skipped and pruned by
	// PendingApprovals); the two keys live in different hash slots.
	tk := s.k.thread(a.Thread())
	pipe := s.rdb.Pipeline()
	pipe.SAdd(ctx, tk.approvals, a.ID)
	pipe.PExpire(ctx, tk.approvals, max(ttl, s.opt.SessionTTL))
	if _, err := pipe.Exec(ctx); err != nil {
		return Approval{}, s.wrap("create approval "+a.ID, err)
	}
	n, err := createApprovalScript.Run(ctx, s.rdb, []string{s.k.approval(a.ID)}, append([]any{ttl.Milliseconds()}, a.fields()...)...).Int()
	if err != nil {
		return Approval{}, s.wrap("create approval "+a.ID, err)
	}
	if n == 0 {
		return Approval{}, fmt.Errorf("session: create approval %s: id already exists", a.ID)
	}
	return a, nil
}

// GetApproval returns an approval; ErrNotFound when unknown or long expired.
// A pending approval past its expiry is returned as it is: WaitApproval or
// Decide turn it into ApprovalExpired.
func (s *Store) GetApproval(ctx context.Context, id string) (Approval, error) {
	if err := checkPart("approval id", id); err != nil {
		return Approval{}, err
	}
	key := s.k.approval(id)
	h, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return Approval{}, s.wrap("get approval "+id, err)
	}
	if len(h) == 0 {
		return Approval{}, fmt.Errorf("session: approval %s: %w", id, ErrNotFound)
	}
	return parseApproval(key, h)
}

// Decide moves a pending approval to state (allow_once, allow_session, deny,
// withdrawn or expired), recording who decided, exactly once across all
// replicas: won is true only for the call that made the change. Every call
// returns the approval as stored afterwards, so a losing click can say who
// decided what. A decision after Expires records ApprovalExpired and does
// not win. Waiters on any replica are woken.
func (s *Store) Decide(ctx context.Context, id, state, by string) (a Approval, won bool, err error) {
	if err := checkPart("approval id", id); err != nil {
		return Approval{}, false, err
	}
	switch state {
	case ApprovalAllowOnce, ApprovalAllowSession, ApprovalDeny, ApprovalExpired, ApprovalWithdrawn:
	default:
		return Approval{}, false, fmt.Errorf("session: decide %s: invalid state %q", id, state)
	}
	key := s.k.approval(id)
	res, err := decideScript.Run(ctx, s.rdb, []string{key, s.k.approvalWake(id)}, state, by, time.Now().UnixMilli()).Slice()
	if err != nil {
		return Approval{}, false, s.wrap("decide approval "+id, err)
	}
	if len(res) == 0 {
		return Approval{}, false, fmt.Errorf("session: decide approval %s: empty reply", id)
	}
	code, _ := res[0].(int64)
	if code == -1 {
		return Approval{}, false, fmt.Errorf("session: approval %s: %w", id, ErrNotFound)
	}
	h := make(map[string]string, len(res)/2)
	for i := 1; i+1 < len(res); i += 2 {
		k, _ := res[i].(string)
		v, _ := res[i+1].(string)
		h[k] = v
	}
	a, err = parseApproval(key, h)
	return a, code == 1, err
}

// approvalPoll bounds one BLPOP so ctx cancellation is noticed promptly
// (go-redis cannot interrupt a blocked read).
const approvalPoll = time.Second

// WaitApproval blocks until the approval is decided (on any replica), its
// expiry passes (it is then decided ApprovalExpired through the same
// compare-and-set, and returned), or ctx ends (ctx's error; the approval
// stays pending). It wakes through a per-approval Redis list, checking ctx at
// least every second.
func (s *Store) WaitApproval(ctx context.Context, id string) (Approval, error) {
	var a Approval
	err := s.waitDecision(ctx, "wait approval "+id, s.k.approval(id), s.k.approvalWake(id), func() (bool, time.Time, error) {
		var err error
		if a, err = s.GetApproval(ctx, id); err != nil || a.Decided() {
			return true, time.Time{}, err
		}
		if !time.Now().Before(a.Expires) {
			a, _, err = s.Decide(ctx, id, ApprovalExpired, "")
			return true, time.Time{}, err
		}
		return false, a.Expires, nil
	})
	if err != nil {
		return Approval{}, err
	}
	return a, nil
}

// waitDecision is the wait shared by approvals and questions: a record
// decided once by a compare-and-set (on any replica) that pushes a token
// onto its wake-up list. check reads the record (settling it when its
// expiry has passed) and reports whether the wait is over, or when the
// record expires. Between checks the waiter blocks in BLPOP on a dedicated
// connection for at most approvalPoll, so ctx is noticed promptly.
func (s *Store) waitDecision(ctx context.Context, op, record, wake string, check func() (done bool, expires time.Time, err error)) error {
	// A dedicated connection of the waits client: BLPOP holds it.
	conn, err := s.waitConn(ctx, wake)
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		done, expires, err := check()
		if err != nil || done {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// BLPOP itself runs without ctx: a cancelled read would poison the
		// connection; the one-second block bounds the delay instead.
		// Block at most approvalPoll, and not past the expiry (BLPOP takes
		// fractional seconds since Redis 6).
		block := max(min(approvalPoll, time.Until(expires)), 10*time.Millisecond)
		err = conn.Do(context.WithoutCancel(ctx), "BLPOP", wake, strconv.FormatFloat(block.Seconds(), 'f', 3, 64)).Err()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return s.wrap(op, err)
		default:
			// Put the token back so every other waiter wakes too; the
			// list expires with the record.
			if err := rewakeScript.Run(context.WithoutCancel(ctx), conn, []string{record, wake}).Err(); err != nil {
				return s.wrap(op, err)
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// PendingApprovals lists the thread's approvals still pending (including
// ones past expiry that nobody has decided yet), oldest first: for
// withdrawing them on Stop, and for a replica resuming a turn, which waits on
// the existing approval instead of posting a second prompt.
func (s *Store) PendingApprovals(ctx context.Context, k ThreadKey) ([]Approval, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	set := s.k.thread(k).approvals
	ids, err := s.rdb.SMembers(ctx, set).Result()
	if err != nil {
		return nil, s.wrap("pending approvals "+k.String(), err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, s.k.approval(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap("pending approvals "+k.String(), err)
	}
	var out []Approval
	var gone []any
	for i, c := range cmds {
		h := c.Val()
		if len(h) == 0 {
			gone = append(gone, ids[i])
			continue
		}
		a, err := parseApproval(s.k.approval(ids[i]), h)
		if err != nil {
			return nil, err
		}
		if !a.Decided() {
			out = append(out, a)
		}
	}
	if len(gone) > 0 {
		if err := s.rdb.SRem(ctx, set, gone...).Err(); err != nil {
			return nil, s.wrap("pending approvals "+k.String(), err)
		}
	}
	slices.SortFunc(out, func(a, b Approval) int { return a.Created.Compare(b.Created) })
	return out, nil
}
