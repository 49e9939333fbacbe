package session

import (
	"context"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// Feedback votes on answers (issue 22): one vote per person per answer,
// the last click wins. A workspace's votes live under its hash tag, so one
// script changes them and trims the old ones:
//
//	P:{w:T}:feedback:votes    hash CHANNEL:MSGTS:USER → "VALUE THREADTS"
//	P:{w:T}:feedback:reasons  hash CHANNEL:MSGTS:USER → what went wrong (👎 only)
//	P:{w:T}:feedback:at       zset CHANNEL:MSGTS:USER → time of the last click (ms)
//	P:feedback:teams          zset TEAM → time of the workspace's last vote (ms)
//
// Votes older than FeedbackRetention are dropped at the next vote, and a
// workspace keeps at most FeedbackMax of them (the oldest go first); the
// keys expire FeedbackRetention after the workspace's last vote.

// Limits of the stored votes.
const (
	FeedbackRetention = 30 * 24 * time.Hour
	FeedbackMax       = 5000
	// FeedbackReasonMax bounds a stored reason, in bytes.
	FeedbackReasonMax = 1000
)

func (k keys) feedbackVotes(team string) string {
	return k.prefix + ":{w:" + team + "}:feedback:votes"
}
func (k keys) feedbackReasons(team string) string {
	return k.prefix + ":{w:" + team + "}:feedback:reasons"
}
func (k keys) feedbackAt(team string) string {
	return k.prefix + ":{w:" + team + "}:feedback:at"
}
func (k keys) feedbackTeams() string { return k.prefix + ":feedback:teams" }

// Vote is one person's feedback on one answer.
type Vote struct {
	Channel, MessageTS, User string
	// ThreadTS is the thread of the answer ("" when unknown).
	ThreadTS string
	// Value is VotePositive or VoteNegative.
	Value  string
	Reason string
	At     time.Time
}

// The values of a Vote.
const (
	VotePositive = "positive"
	VoteNegative = "negative"
)

// CountVotes counts votes by value.
func CountVotes(votes []Vote) (pos, neg int) {
	for _, v := range votes {
		switch v.Value {
		case VotePositive:
			pos++
		case VoteNegative:
			neg++
		}
	}
	return pos, neg
}

// voteScript records ARGV[2] ("VALUE THREAD") for the field ARGV[1]: the
// reason is dropped when the value changes; votes older than ARGV[4] (ms)
// and beyond ARGV[5] votes are trimmed; the keys live ARGV[6] ms.
var voteScript = redis.NewScript(`
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old ~= ARGV[2] then
  redis.call('HDEL', KEYS[2], ARGV[1])
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
local function drop(fs)
  for _, f in ipairs(fs) do
    redis.call('HDEL', KEYS[1], f)
    redis.call('HDEL', KEYS[2], f)
    redis.call('ZREM', KEYS[3], f)
  end
end
drop(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[4], 'LIMIT', 0, 1000))
local excess = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[5])
if excess > 0 then
  drop(redis.call('ZRANGE', KEYS[3], 0, excess - 1))
end
for i = 1, 3 do
  redis.call('PEXPIRE', KEYS[i], ARGV[6])
end
return 1
`)

// reasonScript stores ARGV[2] as the reason of the vote ARGV[1] if that
// vote is still a 👎.
var reasonScript = redis.NewScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v or string.sub(v, 1, 9) ~= 'negative ' then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
`)

func voteField(channel, messageTS, user string) string {
	return channel + ":" + messageTS + ":" + user
}

func checkVote(team, channel, messageTS, user string) error {
	for _, p := range [...]struct{ name, v string }{{"team", team}, {"channel", channel}, {"message ts", messageTS}, {"user", user}} {
		if err := checkPart(p.name, p.v); err != nil {
			return err
		}
	}
	return nil
}

// Vote records user's vote on the answer channel/messageTS (in thread
// threadTS): it replaces their earlier vote on it, and drops its reason
// when the value changes.
func (s *Store) Vote(ctx context.Context, team string, v Vote) error {
	if err := checkVote(team, v.Channel, v.MessageTS, v.User); err != nil {
		return err
	}
	if v.Value != VotePositive && v.Value != VoteNegative {
		return s.wrap("vote "+team, errBadVote)
	}
	thread := v.ThreadTS
	if checkPart("thread ts", thread) != nil {
		thread = "-"
	}
	at := v.At
	if at.IsZero() {
		at = time.Now()
	}
	ttl := FeedbackRetention.Milliseconds()
	err := voteScript.Run(ctx, s.rdb,
		[]string{s.k.feedbackVotes(team), s.k.feedbackReasons(team), s.k.feedbackAt(team)},
		voteField(v.Channel, v.MessageTS, v.User), v.Value+" "+thread, at.UnixMilli(),
		at.Add(-FeedbackRetention).UnixMilli(), FeedbackMax, ttl).Err()
	if err != nil {
		return s.wrap("vote "+team, err)
	}
	pipe := s.rdb.Pipeline()
	pipe.ZAdd(ctx, s.k.feedbackTeams(), redis.Z{Score: float64(at.UnixMilli()), Member: team})
	pipe.ZRemRangeByScore(ctx, s.k.feedbackTeams(), "-inf", "("+strconv.FormatInt(at.Add(-FeedbackRetention).UnixMilli(), 10))
	pipe.PExpire(ctx, s.k.feedbackTeams(), FeedbackRetention)
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("vote index", err)
	}
	return nil
}

type voteError string

func (e voteError) Error() string { return string(e) }

const errBadVote = voteError("a vote is positive or negative")

// VoteReason stores what went wrong with an answer, given by user after
// their 👎 (cut to FeedbackReasonMax bytes). ok is false when their vote
// is no longer a 👎 (or is gone): then nothing is stored.
func (s *Store) VoteReason(ctx context.Context, team, channel, messageTS, user, reason string) (ok bool, err error) {
	if err := checkVote(team, channel, messageTS, user); err != nil {
		return false, err
	}
	reason = clipUTF8(reason, FeedbackReasonMax)
	n, err := reasonScript.Run(ctx, s.rdb, []string{s.k.feedbackVotes(team), s.k.feedbackReasons(team)},
		voteField(channel, messageTS, user), reason, FeedbackRetention.Milliseconds()).Int()
	if err != nil {
		return false, s.wrap("vote reason "+team, err)
	}
	return n == 1, nil
}

// clipUTF8 cuts s to at most n bytes without splitting a character.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// VotesSince returns the workspace's votes whose last click is at or
// after since, oldest first.
func (s *Store) VotesSince(ctx context.Context, team string, since time.Time) ([]Vote, error) {
	if err := checkPart("team", team); err != nil {
		return nil, err
	}
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, s.k.feedbackAt(team), &redis.ZRangeBy{
		Min: strconv.FormatInt(since.UnixMilli(), 10), Max: "+inf",
	}).Result()
	if err != nil {
		return nil, s.wrap("votes "+team, err)
	}
	if len(zs) == 0 {
		return nil, nil
	}
	fields := make([]string, len(zs))
	for i, z := range zs {
		fields[i], _ = z.Member.(string)
	}
	pipe := s.rdb.Pipeline()
	vals := pipe.HMGet(ctx, s.k.feedbackVotes(team), fields...)
	reasons := pipe.HMGet(ctx, s.k.feedbackReasons(team), fields...)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap("votes "+team, err)
	}
	out := make([]Vote, 0, len(zs))
	for i, f := range fields {
		val, _ := vals.Val()[i].(string)
		value, thread, ok := strings.Cut(val, " ")
		parts := strings.Split(f, ":")
		if !ok || len(parts) != 3 {
			continue
		}
		if thread == "-" {
			thread = ""
		}
		reason, _ := reasons.Val()[i].(string)
		out = append(out, Vote{
			Channel: parts[0], MessageTS: parts[1], User: parts[2], ThreadTS: thread,
			Value: value, Reason: reason, At: time.UnixMilli(int64(zs[i].Score)),
		})
	}
	return out, nil
}

// VotingTeams lists the workspaces with a vote at or after since.
func (s *Store) VotingTeams(ctx context.Context, since time.Time) ([]string, error) {
	teams, err := s.rdb.ZRangeByScore(ctx, s.k.feedbackTeams(), &redis.ZRangeBy{
		Min: strconv.FormatInt(since.UnixMilli(), 10), Max: "+inf",
	}).Result()
	if err != nil {
		return nil, s.wrap("voting teams", err)
	}
	return teams, nil
}
