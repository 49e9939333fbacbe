package session

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Shared state of the bot's Slack call governor: per workspace and Web API
// method a GCRA budget (optionally a second one per channel), a pause set
// when Slack answered 429, and an AIMD factor that shrinks the budget after
// 429s and recovers it slowly; per workspace a pool of "live reply" slots.
// All keys of a workspace share the hash tag {w:TEAM}, so one script sees
// them together (and Redis Cluster keeps them on one shard).

// AIMD: each 429 outside an ongoing pause halves the method's factor
// (never below aimdMin); without 429s it grows back by aimdRecoverPerMin
// per minute. A limit that is really half of ours is found at the first
// 429, a quarter at the second; a single stray 429 costs a few minutes of
// a smaller budget (full again after 12 minutes).
const (
	aimdDecrease      = 0.5
	aimdMin           = 0.1
	aimdRecoverPerMin = 0.04
	// governorStateTTL keeps a method's state (factor, pause) well past
	// the last call: long enough for a shrunk factor to recover.
	governorStateTTL = time.Hour
	// LagHalfLife halves a reported SpendRequest.Lag: a stall on one
	// replica makes every replica careful for a minute or two.
	LagHalfLife = 30 * time.Second
)

// spendScript spends one token from a workspace budget and, optionally, a
// channel budget (all or nothing), unless the method is paused; it can
// also take or refresh a live slot. KEYS: state hash, channel bucket,
// slot pool, cover state hash (each may repeat KEYS[1] when unused).
// ARGV: now is Redis's; see Spend for the meaning. Times are µs.
//
// The lag (SpendRequest.Lag) is kept in the state hash ('lag', 'lagt'):
// the largest any replica reported, halved every lag half-life since, so
// every replica leaves room for the calls of the one whose calls run
// late. A budget of tolerance tol tokens every T then admits a call only
// with min(lag − T, (tol − 1)·T) of it left over: the spare token the bot
// keeps covers one T of lag, and a full budget always admits one call.
var spendScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local T0, b0, reserve = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local Tc0, bc0 = tonumber(ARGV[4]), tonumber(ARGV[5])
local slotMode, slotID, slotCap, slotTTL = tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])
local coverT0, coverB0 = tonumber(ARGV[10]), tonumber(ARGV[11])
local recover, fmin = tonumber(ARGV[12]), tonumber(ARGV[13])
local lagIn, lagHalf = tonumber(ARGV[15]), tonumber(ARGV[16])

local function factor(key)
  local st = redis.call('HMGET', key, 'f', 'fat')
  local f = tonumber(st[1])
  if not f then return 1 end
  local fat = tonumber(st[2]) or now
  f = f + (now - fat) / 1000000 * recover
  if f > 1 then f = 1 end
  if f < fmin then f = fmin end
  return f
end

local st = redis.call('HMGET', KEYS[1], 'tat', 'pause', 'lag', 'lagt')
local tat = tonumber(st[1]) or 0
local pause = tonumber(st[2]) or 0
local lag = 0
if st[3] then
  lag = tonumber(st[3]) * 2 ^ (-math.max(now - (tonumber(st[4]) or now), 0) / lagHalf)
end
local lagNew = lagIn > lag
if lagNew then lag = lagIn end
local f = factor(KEYS[1])
local fm = math.floor(f * 1000)

-- slots: prune expired holders, see whether this reply holds one
local slots, held = 0, 0
if slotMode > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if redis.call('ZSCORE', KEYS[3], slotID) then held = 1 end
  slots = redis.call('ZCARD', KEYS[3])
end

local function inuse(T, b, tt)
  if T <= 0 then return 0 end
  local used = (math.max(tt, now) - now) / T
  return math.floor(math.min(used / b, 1) * 1000)
end

if now < pause then
  return {0, pause - now, fm, inuse(T0 / f, math.max(1, math.floor(b0 * f)), tat), slots, held, 0}
end

if slotMode > 0 and held == 0 then
  local free = slots < slotCap
  if free and coverT0 > 0 then
    -- A new live reply must find its final edit covered: the budget of
    -- the final method has a token for it beyond those the live replies
    -- already hold.
    local cf = factor(KEYS[4])
    local cT = coverT0 / cf
    local cb = math.max(1, math.floor(coverB0 * cf))
    local ctat = tonumber(redis.call('HGET', KEYS[4], 'tat') or '0')
    local avail = cb - (math.max(ctat, now) - now) / cT
    if avail < slots + 1 then free = false end
  end
  if not free then
    return {0, 0, fm, 0, slots, 0, 1}
  end
end

local function allow(T, b, tt)
  local tol = math.max(1, b - reserve)
  local margin = math.min(math.max(lag - T, 0), (tol - 1) * T)
  local base = math.max(tt, now)
  local at = base + T - tol * T + margin
  if now < at then return at - now, base end
  return 0, base
end

local wait, base, T, b = 0, now, 0, 1
if T0 > 0 then
  T = T0 / f
  b = math.max(1, math.floor(b0 * f))
  wait, base = allow(T, b, tat)
end
local cwait, cbase, Tc = 0, now, 0
local ctat = 0
if Tc0 > 0 then
  Tc = Tc0 / f
  local bc = math.max(1, math.floor(bc0 * f))
  ctat = tonumber(redis.call('GET', KEYS[2]) or '0')
  cwait, cbase = allow(Tc, bc, ctat)
end
if wait > 0 or cwait > 0 then
  return {0, math.max(wait, cwait), fm, inuse(T, b, tat), slots, held, 0}
end

local newtat = tat
if T0 > 0 then
  newtat = base + T
  redis.call('HSET', KEYS[1], 'tat', string.format('%.0f', newtat))
  if lagNew then
    redis.call('HSET', KEYS[1], 'lag', string.format('%.0f', lagIn), 'lagt', string.format('%.0f', now))
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[14])
end
if Tc0 > 0 then
  local nc = cbase + Tc
  redis.call('SET', KEYS[2], string.format('%.0f', nc), 'PX', math.floor((nc - now) / 1000) + 1)
end
if slotMode > 0 then
  redis.call('ZADD', KEYS[3], string.format('%.0f', now + slotTTL), slotID)
  redis.call('PEXPIRE', KEYS[3], math.floor(slotTTL / 1000) * 2 + 1000)
  if held == 0 then slots = slots + 1 end
  held = 1
end
return {1, 0, fm, inuse(T, b, newtat), slots, held, 0}
`)

// throttleScript records a 429: the method pauses until Retry-After has
// passed; outside an ongoing pause the factor shrinks; the budget is
// emptied so that calls resume one at a time after the pause.
// KEYS: state hash, channel bucket (or KEYS[1]). ARGV: retry µs, T0, b0,
// Tc0, bc0, decrease, min, recover, ttl ms.
var throttleScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ra, T0, b0, Tc0, bc0 = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local dec, fmin, recover = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local st = redis.call('HMGET', KEYS[1], 'tat', 'pause', 'f', 'fat')
local tat = tonumber(st[1]) or 0
local pause = tonumber(st[2]) or 0
local f = tonumber(st[3]) or 1
local fat = tonumber(st[4]) or now
f = math.min(1, f + (now - fat) / 1000000 * recover)
if now >= pause then f = math.max(fmin, f * dec) end
local pend = math.max(pause, now + ra)
local function refill(T, b, tt)
  local low = pend + (b - 1) * T
  if tt < low then return low end
  return tt
end
if T0 > 0 then
  tat = refill(T0 / f, math.max(1, math.floor(b0 * f)), tat)
end
redis.call('HSET', KEYS[1], 'tat', string.format('%.0f', tat), 'pause', string.format('%.0f', pend),
  'f', string.format('%.4f', f), 'fat', string.format('%.0f', now))
redis.call('PEXPIRE', KEYS[1], ARGV[9])
if Tc0 > 0 then
  local Tc = Tc0 / f
  local ctat = refill(Tc, math.max(1, math.floor(bc0 * f)), tonumber(redis.call('GET', KEYS[2]) or '0'))
  redis.call('SET', KEYS[2], string.format('%.0f', ctat), 'PX', math.floor((ctat - now) / 1000) + 1)
end
return {math.floor(f * 1000), pend - now}
`)

// SpendRequest asks for one call's worth of a Slack method's budget in a
// workspace. A zero PerMinute means no workspace budget (the slot alone is
// consulted); a zero ChannelPerMinute means no channel budget.
type SpendRequest struct {
	Team, Method string
	// PerMinute and Burst are the workspace budget at full strength (the
	// AIMD factor scales both).
	PerMinute, Burst int
	// Channel with ChannelPerMinute and ChannelBurst adds a per-channel
	// budget (chat.postMessage's ~1 a second per channel).
	Channel                        string
	ChannelPerMinute, ChannelBurst int
	// Reserve is how many tokens of each budget the call must leave for
	// others (lossy calls leave room for must-deliver ones).
	Reserve int
	// Lag is how late a call admitted earlier may still reach Slack, as
	// the caller measured it (an upper bound of the spread of arrival
	// delays): the budget leaves lag less one emission interval of its
	// burst unspent (never the last token), so calls bunched by that much
	// still fit Slack's bucket. The largest lag any replica reported
	// counts for all, decaying with LagHalfLife.
	Lag time.Duration
	// Slot, when set, makes the call also take (or keep) a live slot.
	Slot *SlotRequest
}

// SlotRequest takes or refreshes a slot in a workspace's pool of live
// replies: at most Cap holders, each expiring TTL after its last refresh.
// When CoverMethod is set a new holder needs a spare token in that
// method's budget (CoverPerMinute, CoverBurst at full strength) for each
// holder plus itself, so every live reply's final call is covered. The
// spend fails (SpendResult.NoSlot) when no slot can be had.
type SlotRequest struct {
	Pool, ID                   string
	Cap                        int
	TTL                        time.Duration
	CoverMethod                string
	CoverPerMinute, CoverBurst int
}

// SpendResult is the budget's answer.
type SpendResult struct {
	// OK: the token (and slot) was taken; call now.
	OK bool
	// Wait is when to ask again (OK false, NoSlot false).
	Wait time.Duration
	// Factor is the method's AIMD factor (1 = full budget).
	Factor float64
	// InUse is the part of the workspace burst spent (0..1).
	InUse float64
	// Slots is the number of live slots held in the pool, this one
	// included; HasSlot whether this request holds one.
	Slots   int
	HasSlot bool
	// NoSlot: no live slot is free; nothing was spent.
	NoSlot bool
}

// Spend spends one token of a Slack method's budget shared by all
// replicas (one round trip). It never blocks: when the budget is spent or
// the method paused, OK is false and Wait says when to try again.
func (s *Store) Spend(ctx context.Context, r SpendRequest) (SpendResult, error) {
	if err := checkPart("team", r.Team); err != nil {
		return SpendResult{}, err
	}
	if err := checkPart("method", r.Method); err != nil {
		return SpendResult{}, err
	}
	state := s.k.slackState(r.Team, r.Method)
	keys := []string{state, state, state, state}
	perMin := func(n int) int64 {
		if n <= 0 {
			return 0
		}
		return time.Minute.Microseconds() / int64(n)
	}
	args := []any{perMin(r.PerMinute), max(r.Burst, 1), max(r.Reserve, 0), int64(0), 1, 0, "", 0, 0, int64(0), 1,
		aimdRecoverPerMin / 60, aimdMin, governorStateTTL.Milliseconds(), max(r.Lag, 0).Microseconds(), LagHalfLife.Microseconds()}
	if r.ChannelPerMinute > 0 {
		if err := checkPart("channel", r.Channel); err != nil {
			return SpendResult{}, err
		}
		keys[1] = s.k.slackChannel(r.Team, r.Method, r.Channel)
		args[3], args[4] = perMin(r.ChannelPerMinute), max(r.ChannelBurst, 1)
	}
	if sl := r.Slot; sl != nil {
		if err := checkPart("slot pool", sl.Pool); err != nil {
			return SpendResult{}, err
		}
		if err := checkPart("slot id", sl.ID); err != nil {
			return SpendResult{}, err
		}
		keys[2] = s.k.slackSlots(r.Team, sl.Pool)
		args[5], args[6], args[7], args[8] = 1, sl.ID, max(sl.Cap, 1), max(sl.TTL, time.Second).Microseconds()
		if sl.CoverMethod != "" && sl.CoverPerMinute > 0 {
			if err := checkPart("method", sl.CoverMethod); err != nil {
				return SpendResult{}, err
			}
			keys[3] = s.k.slackState(r.Team, sl.CoverMethod)
			args[9], args[10] = perMin(sl.CoverPerMinute), max(sl.CoverBurst, 1)
		}
	}
	res, err := spendScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
	if err != nil {
		return SpendResult{}, s.wrap("spend "+r.Team+" "+r.Method, err)
	}
	if len(res) != 7 {
		return SpendResult{}, fmt.Errorf("session: spend %s %s: unexpected reply %v", r.Team, r.Method, res)
	}
	return SpendResult{
		OK:      res[0] == 1,
		Wait:    time.Duration(res[1]) * time.Microsecond,
		Factor:  float64(res[2]) / 1000,
		InUse:   float64(res[3]) / 1000,
		Slots:   int(res[4]),
		HasSlot: res[5] == 1,
		NoSlot:  res[6] == 1,
	}, nil
}

// Throttled records that Slack answered a call of method in team with 429
// and Retry-After: every replica's next Spend for the method waits until
// then, and the method's budget shrinks (AIMD). perMinute, burst and the
// channel pair are the budgets at full strength (as in SpendRequest). It
// returns the new factor and how long the pause lasts.
func (s *Store) Throttled(ctx context.Context, r SpendRequest, retryAfter time.Duration) (factor float64, pause time.Duration, err error) {
	if err := checkPart("team", r.Team); err != nil {
		return 0, 0, err
	}
	if err := checkPart("method", r.Method); err != nil {
		return 0, 0, err
	}
	state := s.k.slackState(r.Team, r.Method)
	keys := []string{state, state}
	perMin := func(n int) int64 {
		if n <= 0 {
			return 0
		}
		return time.Minute.Microseconds() / int64(n)
	}
	args := []any{max(retryAfter, time.Millisecond).Microseconds(), perMin(r.PerMinute), max(r.Burst, 1), int64(0), 1,
		aimdDecrease, aimdMin, aimdRecoverPerMin / 60, governorStateTTL.Milliseconds()}
	if r.ChannelPerMinute > 0 && r.Channel != "" {
		if err := checkPart("channel", r.Channel); err != nil {
			return 0, 0, err
		}
		keys[1] = s.k.slackChannel(r.Team, r.Method, r.Channel)
		args[3], args[4] = perMin(r.ChannelPerMinute), max(r.ChannelBurst, 1)
	}
	res, err := throttleScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
	if err != nil {
		return 0, 0, s.wrap("throttle "+r.Team+" "+r.Method, err)
	}
	if len(res) != 2 {
		return 0, 0, fmt.Errorf("session: throttle %s %s: unexpected reply %v", r.Team, r.Method, res)
	}
	return float64(res[0]) / 1000, time.Duration(res[1]) * time.Microsecond, nil
}

// ReleaseSlot gives a live slot back to the workspace's pool.
func (s *Store) ReleaseSlot(ctx context.Context, team, pool, id string) error {
	for _, p := range [...]struct{ name, v string }{{"team", team}, {"slot pool", pool}, {"slot id", id}} {
		if err := checkPart(p.name, p.v); err != nil {
			return err
		}
	}
	return s.wrap("release slot", s.rdb.ZRem(ctx, s.k.slackSlots(team, pool), id).Err())
}
