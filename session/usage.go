package session

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Usage metering and budgets (issue 27). A workspace's usage is counted in
// two hashes per period, one per UTC day and one per UTC month, both under
// the workspace's hash tag so one script reads and writes them:
//
//	P:{w:T}:usage:d:YYYYMMDD  hash field → count   TTL retention
//	P:{w:T}:usage:m:YYYYMM    hash field → count   TTL retention + 31 days
//	P:{w:T}:profiles          hash channel → profile name (admin bindings), indexed
//
// Fields: "tok"/"cost" for the workspace, "c:CHANNEL:…", "u:USER:…",
// "p:PROFILE:…" and, per model, "m:MODEL:in|cached|out|tok|cost"; cost in
// micro currency units (millionths). Day hashes also hold "warn:USER:LIMIT"
// markers: the 80 % notice is given once a day.

func (k keys) usageDay(team string, t time.Time) string {
	return k.prefix + ":{w:" + team + "}:usage:d:" + t.UTC().Format("20060102")
}

func (k keys) usageMonth(team string, t time.Time) string {
	return k.prefix + ":{w:" + team + "}:usage:m:" + t.UTC().Format("200601")
}

func (k keys) profileBindings(team string) string {
	return k.prefix + ":{w:" + team + "}:profiles"
}

// UsageRecord is the usage of one model call.
type UsageRecord struct {
	Channel, User, Profile, Model string
	// InputTokens is the total input (cached included); CachedTokens the
	// part read from a prompt cache.
	InputTokens, CachedTokens, OutputTokens int64
	// CostMicros is the cost in millionths of a currency unit (0 when the
	// model has no price).
	CostMicros int64
}

// recordScript adds ARGV[3..] (field, increment pairs) to the day hash
// KEYS[1] and the month hash KEYS[2] and sets their TTLs (ARGV[1], ARGV[2]
// in seconds).
var recordScript = redis.NewScript(`
for i = 3, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i+1])
  redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i+1])
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[2])
return 1
`)

// RecordUsage adds one model call's usage to the workspace's day and month
// buckets in one round trip. Day buckets expire after retention, month
// buckets a month later.
func (s *Store) RecordUsage(ctx context.Context, team string, r UsageRecord, now time.Time, retention time.Duration) error {
	if err := checkPart("team", team); err != nil {
		return err
	}
	tok := r.InputTokens + r.OutputTokens
	args := []any{int64(retention / time.Second), int64((retention + 31*24*time.Hour) / time.Second),
		"tok", tok, "cost", r.CostMicros}
	add := func(prefix string) {
		args = append(args, prefix+":tok", tok, prefix+":cost", r.CostMicros)
	}
	if r.Channel != "" {
		add("c:" + field(r.Channel))
	}
	if r.User != "" {
		add("u:" + field(r.User))
	}
	if r.Profile != "" {
		add("p:" + field(r.Profile))
	}
	if r.Model != "" {
		m := "m:" + field(r.Model)
		args = append(args, m+":in", r.InputTokens, m+":cached", r.CachedTokens, m+":out", r.OutputTokens,
			m+":tok", tok, m+":cost", r.CostMicros)
	}
	err := recordScript.Run(ctx, s.rdb, []string{s.k.usageDay(team, now), s.k.usageMonth(team, now)}, args...).Err()
	return s.wrap("record usage "+team, err)
}

// field keeps a name usable inside a hash field (no separators).
func field(s string) string { return strings.ReplaceAll(s, ":", "_") }

// Budget scopes and periods.
const (
	ScopeWorkspace = "workspace"
	ScopeChannel   = "channel"
	ScopePerson    = "person"
	PeriodDay      = "day"
	PeriodMonth    = "month"
)

// Limit is one budget: a scope, a period, and a maximum in tokens or in
// cost (micros).
type Limit struct {
	Scope  string // ScopeWorkspace, ScopeChannel or ScopePerson
	Period string // PeriodDay or PeriodMonth
	Cost   bool   // Max is in micros of currency, else in tokens
	Max    int64
}

// String names the limit for people: "the channel's daily token budget".
func (l Limit) String() string {
	period := "daily"
	if l.Period == PeriodMonth {
		period = "monthly"
	}
	what := "token"
	if l.Cost {
		what = "cost"
	}
	whose := map[string]string{ScopeWorkspace: "the workspace's", ScopeChannel: "this channel's", ScopePerson: "your"}[l.Scope]
	return fmt.Sprintf("%s %s %s budget", whose, period, what)
}

// Reset is when the limit's period ends after now (UTC midnight, or the
// first of the next month).
func (l Limit) Reset(now time.Time) time.Time {
	now = now.UTC()
	if l.Period == PeriodMonth {
		return time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
}

// BudgetVerdict is CheckBudget's answer.
type BudgetVerdict struct {
	// Over is the first limit reached (nil: the call may go ahead), Used
	// its count.
	Over *Limit
	Used int64
	// Warn is a limit past 80 % that this person was not yet told about
	// today (nil: nothing to say); WarnUsed its count. It is marked told.
	Warn     *Limit
	WarnUsed int64
}

// budgetScript checks ARGV triples (bucket 1|2, field, max) against the
// day (KEYS[1]) and month (KEYS[2]) hashes. It returns {0} when none is
// reached, {1, i, used} when the i-th (1-based) is, {2, i, used} when the
// i-th is past 80 % and its marker ARGV[2] .. ':' .. i was not yet set in
// the day hash (it is set, with the day hash's TTL kept or ARGV[1]).
var budgetScript = redis.NewScript(`
local warn = nil
local n = (#ARGV - 2) / 3
for i = 1, n do
  local b = tonumber(ARGV[3*i])
  local used = tonumber(redis.call('HGET', KEYS[b], ARGV[3*i+1]) or '0')
  local max = tonumber(ARGV[3*i+2])
  if used >= max then
    return {1, i, used}
  end
  if warn == nil and used * 5 >= max * 4 then
    warn = {i, used}
  end
end
if warn ~= nil then
  local f = ARGV[2] .. ':' .. warn[1]
  if redis.call('HSETNX', KEYS[1], f, 1) == 1 then
    if redis.call('TTL', KEYS[1]) < 0 then
      redis.call('EXPIRE', KEYS[1], ARGV[1])
    end
    return {2, warn[1], warn[2]}
  end
end
return {0}
`)

// CheckBudget reads the counts behind limits for a call in channel by
// user, in one round trip: whether one is reached, and whether user should
// be told (once a day) that one is past 80 %.
func (s *Store) CheckBudget(ctx context.Context, team, channel, user string, limits []Limit, now time.Time) (BudgetVerdict, error) {
	if len(limits) == 0 {
		return BudgetVerdict{}, nil
	}
	if err := checkPart("team", team); err != nil {
		return BudgetVerdict{}, err
	}
	args := []any{int64(48 * time.Hour / time.Second), "warn:" + field(user)}
	for _, l := range limits {
		b := 1
		if l.Period == PeriodMonth {
			b = 2
		}
		f := ""
		switch l.Scope {
		case ScopeChannel:
			f = "c:" + field(channel) + ":"
		case ScopePerson:
			f = "u:" + field(user) + ":"
		}
		if l.Cost {
			f += "cost"
		} else {
			f += "tok"
		}
		args = append(args, b, f, l.Max)
	}
	res, err := budgetScript.Run(ctx, s.rdb, []string{s.k.usageDay(team, now), s.k.usageMonth(team, now)}, args...).Int64Slice()
	if err != nil {
		return BudgetVerdict{}, s.wrap("check budget "+team, err)
	}
	var v BudgetVerdict
	if len(res) == 3 && res[1] >= 1 && int(res[1]) <= len(limits) {
		l := limits[res[1]-1]
		switch res[0] {
		case 1:
			v.Over, v.Used = &l, res[2]
		case 2:
			v.Warn, v.WarnUsed = &l, res[2]
		}
	}
	return v, nil
}

// Totals are tokens and cost (micros).
type Totals struct {
	Tokens, CostMicros int64
}

// ModelTotals are one model's counts.
type ModelTotals struct {
	Input, Cached, Output, Tokens, CostMicros int64
}

// UsageReport is one period's usage of a workspace.
type UsageReport struct {
	Total    Totals
	Channels map[string]Totals
	People   map[string]Totals
	Profiles map[string]Totals
	Models   map[string]ModelTotals
}

// Usage reads the workspace's usage of the day (PeriodDay) or month
// (PeriodMonth) that contains now.
func (s *Store) Usage(ctx context.Context, team, period string, now time.Time) (UsageReport, error) {
	if err := checkPart("team", team); err != nil {
		return UsageReport{}, err
	}
	key := s.k.usageDay(team, now)
	if period == PeriodMonth {
		key = s.k.usageMonth(team, now)
	}
	h, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return UsageReport{}, s.wrap("usage "+team, err)
	}
	r := UsageReport{Channels: map[string]Totals{}, People: map[string]Totals{}, Profiles: map[string]Totals{}, Models: map[string]ModelTotals{}}
	totals := func(m map[string]Totals, name, kind string, n int64) {
		t := m[name]
		if kind == "tok" {
			t.Tokens = n
		} else if kind == "cost" {
			t.CostMicros = n
		}
		m[name] = t
	}
	for f, v := range h {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		parts := strings.Split(f, ":")
		switch {
		case len(parts) == 1 && f == "tok":
			r.Total.Tokens = n
		case len(parts) == 1 && f == "cost":
			r.Total.CostMicros = n
		case len(parts) == 3 && parts[0] == "c":
			totals(r.Channels, parts[1], parts[2], n)
		case len(parts) == 3 && parts[0] == "u":
			totals(r.People, parts[1], parts[2], n)
		case len(parts) == 3 && parts[0] == "p":
			totals(r.Profiles, parts[1], parts[2], n)
		case len(parts) == 3 && parts[0] == "m":
			m := r.Models[parts[1]]
			switch parts[2] {
			case "in":
				m.Input = n
			case "cached":
				m.Cached = n
			case "out":
				m.Output = n
			case "tok":
				m.Tokens = n
			case "cost":
				m.CostMicros = n
			}
			r.Models[parts[1]] = m
		}
	}
	return r, nil
}

// SetProfileBinding binds channel to profile in team ("" removes the
// binding) and bumps the workspace version. Every replica's next turn
// there reads it.
func (s *Store) SetProfileBinding(ctx context.Context, team, channel, profile string) error {
	if err := checkPart("team", team); err != nil {
		return err
	}
	if err := checkPart("channel", channel); err != nil {
		return err
	}
	key := s.k.profileBindings(team)
	pipe := s.rdb.TxPipeline()
	if profile == "" {
		pipe.HDel(ctx, key, channel)
	} else {
		pipe.HSet(ctx, key, channel, profile)
		s.indexed(ctx, pipe, team, key)
	}
	s.bump(ctx, pipe, team) // version.go: other replicas' caches reload
	_, err := pipe.Exec(ctx)
	return s.wrap("set profile binding "+team, err)
}

// ProfileBinding is the profile an admin bound to channel ("" for none).
func (s *Store) ProfileBinding(ctx context.Context, team, channel string) (string, error) {
	if err := checkPart("team", team); err != nil {
		return "", err
	}
	v, err := s.rdb.HGet(ctx, s.k.profileBindings(team), channel).Result()
	if err == redis.Nil {
		return "", nil
	}
	if err != nil {
		return "", s.wrap("profile binding "+team, err)
	}
	return v, nil
}

// ProfileBindings are all of team's bindings, channel → profile.
func (s *Store) ProfileBindings(ctx context.Context, team string) (map[string]string, error) {
	if err := checkPart("team", team); err != nil {
		return nil, err
	}
	m, err := s.rdb.HGetAll(ctx, s.k.profileBindings(team)).Result()
	if err != nil {
		return nil, s.wrap("profile bindings "+team, err)
	}
	return m, nil
}

// MaxUsageRetention bounds how long day buckets may be kept; the clean-up
// after an uninstall (RetireWorkspace) looks that far back.
const MaxUsageRetention = 400 * 24 * time.Hour

// usageKeys are every usage bucket team may have at now (most do not
// exist): RetireWorkspace sets them to expire with the rest of the
// workspace's data, since they name its people and channels.
func (s *Store) usageKeys(team string, now time.Time) []string {
	days := int((MaxUsageRetention + 31*24*time.Hour) / (24 * time.Hour))
	out := make([]string, 0, days+16)
	for i := range days + 1 {
		out = append(out, s.k.usageDay(team, now.AddDate(0, 0, -i)))
	}
	for i := range 16 {
		out = append(out, s.k.usageMonth(team, time.Date(now.Year(), now.Month()-time.Month(i), 1, 0, 0, 0, 0, time.UTC)))
	}
	return out
}
