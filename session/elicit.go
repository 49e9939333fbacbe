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

// Questions MCP servers ask the person behind a tool call (elicitation,
// issue 14), shared by every replica like approvals: the question is posted
// by the replica running the turn, the answer may be clicked on any other,
// and it is taken exactly once (a compare-and-set from pending).
//
//	P:{e:ID}              hash: the record (spec and answer sealed when SECRET_KEY is set)
//	P:{e:ID}:wake         wake-up list for waiters
//	P:{t:THREAD}:elicits  set of question ids asked in the thread (for Stop and resume)
//
// The spec (what the server asked: message, URL, form) and the answer are
// the caller's JSON. The answer may hold what a person typed, so it is
// sealed with SECRET_KEY (bound to workspace and question) when a key is
// configured, and the waiter clears it once read.

// Question states. Every state but QuestionPending is final.
const (
	QuestionPending = "pending"
	QuestionAccept  = "accept"
	QuestionDecline = "decline"
	QuestionCancel  = "cancel"
	// QuestionExpired: nobody answered before Expires (callers answer the
	// server "cancel").
	QuestionExpired = "expired"
	// QuestionWithdrawn: the turn was stopped (or ended) while waiting.
	QuestionWithdrawn = "withdrawn"
)

// Question is one pending or answered question from an MCP server.
type Question struct {
	// ID is the question's id (the only thing its buttons carry);
	// CreateQuestion generates one when empty.
	ID                      string
	Team, Channel, ThreadTS string
	// Requester is the person asked; Server the MCP server asking; Mode
	// "form" or "url".
	Requester, Server, Mode string
	// Spec is the caller's JSON of the question.
	Spec    []byte
	Created time.Time
	Expires time.Time
	// State is one of the Question* constants.
	State     string
	DecidedBy string
	DecidedAt time.Time
	// MessageTS is the Slack message carrying the question.
	MessageTS string
	// Answer is the caller's JSON of a form's answer (accept only).
	Answer []byte
}

// Thread is the question's thread.
func (q Question) Thread() ThreadKey { return ThreadKey{q.Team, q.Channel, q.ThreadTS} }

// Decided reports whether q is in a final state.
func (q Question) Decided() bool { return q.State != QuestionPending && q.State != "" }

func (k keys) question(id string) string     { return k.prefix + ":{e:" + id + "}" }
func (k keys) questionWake(id string) string { return k.prefix + ":{e:" + id + "}:wake" }
func (k keys) threadQuestions(t ThreadKey) string {
	return k.prefix + ":{t:" + t.String() + "}:elicits"
}

// questionAAD binds a sealed spec or answer to its question.
func questionAAD(id string) string { return "elicit:" + id }

// sealOrPlain seals v when a key is configured; plain text marked "p:"
// otherwise (no SECRET_KEY: the operator chose not to encrypt at rest).
func (s *Store) sealOrPlain(team, id, field string, v []byte) (string, error) {
	if len(v) == 0 {
		return "", nil
	}
	sv, err := s.sealRecord(team, questionAAD(id), field, v)
	if errors.Is(err, ErrNoSecretKey) {
		return "p:" + string(v), nil
	}
	if err != nil {
		return "", err
	}
	return "s:" + sv, nil
}

func (s *Store) openOrPlain(key, team, id, field, v string) ([]byte, error) {
	switch {
	case v == "":
		return nil, nil
	case len(v) > 2 && v[:2] == "p:":
		return []byte(v[2:]), nil
	case len(v) > 2 && v[:2] == "s:":
		return s.openRecord(key, team, questionAAD(id), field, v[2:])
	}
	return nil, fmt.Errorf("session: corrupt field %s in key %s", field, key)
}

func (s *Store) questionFields(q Question) ([]any, error) {
	ms := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return strconv.FormatInt(t.UnixMilli(), 10)
	}
	spec, err := s.sealOrPlain(q.Team, q.ID, "spec", q.Spec)
	if err != nil {
		return nil, err
	}
	return []any{
		"id", q.ID, "team", q.Team, "channel", q.Channel, "thread_ts", q.ThreadTS,
		"requester", q.Requester, "server", q.Server, "mode", q.Mode, "spec", spec,
		"created", ms(q.Created), "expires", ms(q.Expires), "state", q.State,
		"decided_by", q.DecidedBy, "decided_at", ms(q.DecidedAt), "message_ts", q.MessageTS,
	}, nil
}

func (s *Store) parseQuestion(key string, h map[string]string) (Question, error) {
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
	q := Question{
		ID: h["id"], Team: h["team"], Channel: h["channel"], ThreadTS: h["thread_ts"],
		Requester: h["requester"], Server: h["server"], Mode: h["mode"],
		State: h["state"], DecidedBy: h["decided_by"], MessageTS: h["message_ts"],
	}
	if q.ID == "" || q.State == "" || h["expires"] == "" {
		return Question{}, fmt.Errorf("session: corrupt question in key %s: missing id, state or expiry", key)
	}
	var errs [5]error
	q.Created, errs[0] = ms("created")
	q.Expires, errs[1] = ms("expires")
	q.DecidedAt, errs[2] = ms("decided_at")
	q.Spec, errs[3] = s.openOrPlain(key, q.Team, q.ID, "spec", h["spec"])
	q.Answer, errs[4] = s.openOrPlain(key, q.Team, q.ID, "answer", h["answer"])
	if err := errors.Join(errs[:]...); err != nil {
		return Question{}, err
	}
	return q, nil
}

// CreateQuestion stores a pending question and indexes it under its
// thread. It fills ID (when empty), Created and State and returns the
// stored record. Expires must be in the future; the record is kept until
// ApprovalRetention after it so late clicks get a precise answer.
func (s *Store) CreateQuestion(ctx context.Context, q Question) (Question, error) {
	if err := q.Thread().validate(); err != nil {
		return Question{}, err
	}
	if q.ID == "" {
		q.ID = NewApprovalID()
	}
	if err := checkPart("question id", q.ID); err != nil {
		return Question{}, err
	}
	now := time.Now().UTC()
	if !q.Expires.After(now) {
		return Question{}, fmt.Errorf("session: create question %s: expiry %s is not in the future", q.ID, q.Expires)
	}
	q.Created, q.State, q.DecidedBy, q.DecidedAt, q.Answer = now, QuestionPending, "", time.Time{}, nil
	fields, err := s.questionFields(q)
	if err != nil {
		return Question{}, fmt.Errorf("session: create question %s: %w", q.ID, err)
	}
	ttl := time.Until(q.Expires) + s.opt.ApprovalRetention
	set := s.k.threadQuestions(q.Thread())
	pipe := s.rdb.Pipeline()
	pipe.SAdd(ctx, set, q.ID)
	pipe.PExpire(ctx, set, max(ttl, s.opt.SessionTTL))
	if _, err := pipe.Exec(ctx); err != nil {
		return Question{}, s.wrap("create question "+q.ID, err)
	}
	n, err := createApprovalScript.Run(ctx, s.rdb, []string{s.k.question(q.ID)}, append([]any{ttl.Milliseconds()}, fields...)...).Int()
	if err != nil {
		return Question{}, s.wrap("create question "+q.ID, err)
	}
	if n == 0 {
		return Question{}, fmt.Errorf("session: create question %s: id already exists", q.ID)
	}
	return q, nil
}

// GetQuestion returns a question; ErrNotFound when unknown or long expired.
func (s *Store) GetQuestion(ctx context.Context, id string) (Question, error) {
	if err := checkPart("question id", id); err != nil {
		return Question{}, err
	}
	key := s.k.question(id)
	h, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return Question{}, s.wrap("get question "+id, err)
	}
	if len(h) == 0 {
		return Question{}, fmt.Errorf("session: question %s: %w", id, ErrNotFound)
	}
	return s.parseQuestion(key, h)
}

// answerScript: KEYS = record, wake; ARGV = state, by, now ms, answer →
// {won 1|0|-1 missing, fields...}. The compare-and-set pending → state
// happens once across all replicas; an answer after Expires records
// "expired" and does not win. The answer is stored only by the winner.
var answerScript = redis.NewScript(`
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

// AnswerQuestion moves a pending question to state (accept, decline,
// cancel, expired or withdrawn) with the answer (accept only), recording
// who answered, exactly once across all replicas: won is true only for the
// call that made the change. Every call returns the question as stored
// afterwards, so a losing click can say who answered. Waiters on any
// replica are woken.
func (s *Store) AnswerQuestion(ctx context.Context, id, state, by string, answer []byte) (q Question, won bool, err error) {
	if err := checkPart("question id", id); err != nil {
		return Question{}, false, err
	}
	switch state {
	case QuestionAccept, QuestionDecline, QuestionCancel, QuestionExpired, QuestionWithdrawn:
	default:
		return Question{}, false, fmt.Errorf("session: answer question %s: invalid state %q", id, state)
	}
	key := s.k.question(id)
	var sealed string
	if state == QuestionAccept && len(answer) > 0 {
		// The team is in the record; read it to bind the seal.
		team, err := s.rdb.HGet(ctx, key, "team").Result()
		if errors.Is(err, redis.Nil) {
			return Question{}, false, fmt.Errorf("session: question %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return Question{}, false, s.wrap("answer question "+id, err)
		}
		if sealed, err = s.sealOrPlain(team, id, "answer", answer); err != nil {
			return Question{}, false, fmt.Errorf("session: answer question %s: %w", id, err)
		}
	}
	res, err := answerScript.Run(ctx, s.rdb, []string{key, s.k.questionWake(id)}, state, by, time.Now().UnixMilli(), sealed).Slice()
	if err != nil {
		return Question{}, false, s.wrap("answer question "+id, err)
	}
	if len(res) == 0 {
		return Question{}, false, fmt.Errorf("session: answer question %s: empty reply", id)
	}
	code, _ := res[0].(int64)
	if code == -1 {
		return Question{}, false, fmt.Errorf("session: question %s: %w", id, ErrNotFound)
	}
	h := make(map[string]string, len(res)/2)
	for i := 1; i+1 < len(res); i += 2 {
		k, _ := res[i].(string)
		v, _ := res[i+1].(string)
		h[k] = v
	}
	q, err = s.parseQuestion(key, h)
	return q, code == 1, err
}

// ClearQuestionAnswer drops a question's stored answer once the waiter has
// read it: what a person typed stays in Redis no longer than needed.
func (s *Store) ClearQuestionAnswer(ctx context.Context, id string) error {
	if err := checkPart("question id", id); err != nil {
		return err
	}
	if err := s.rdb.HDel(ctx, s.k.question(id), "answer").Err(); err != nil {
		return s.wrap("clear question answer "+id, err)
	}
	return nil
}

// WaitQuestion blocks until the question is answered (on any replica), its
// expiry passes (it is then answered QuestionExpired through the same
// compare-and-set, and returned), or ctx ends (ctx's error; the question
// stays pending). It wakes through a per-question Redis list, checking ctx
// at least every second.
func (s *Store) WaitQuestion(ctx context.Context, id string) (Question, error) {
	var q Question
	err := s.waitDecision(ctx, "wait question "+id, s.k.question(id), s.k.questionWake(id), func() (bool, time.Time, error) {
		var err error
		if q, err = s.GetQuestion(ctx, id); err != nil || q.Decided() {
			return true, time.Time{}, err
		}
		if !time.Now().Before(q.Expires) {
			q, _, err = s.AnswerQuestion(ctx, id, QuestionExpired, "", nil)
			return true, time.Time{}, err
		}
		return false, q.Expires, nil
	})
	if err != nil {
		return Question{}, err
	}
	return q, nil
}

// PendingQuestions lists the thread's questions still pending, oldest
// first: for withdrawing them on Stop from a replica not running the turn.
func (s *Store) PendingQuestions(ctx context.Context, k ThreadKey) ([]Question, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	set := s.k.threadQuestions(k)
	ids, err := s.rdb.SMembers(ctx, set).Result()
	if err != nil {
		return nil, s.wrap("pending questions "+k.String(), err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, s.k.question(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap("pending questions "+k.String(), err)
	}
	var out []Question
	var gone []any
	for i, c := range cmds {
		h := c.Val()
		if len(h) == 0 {
			gone = append(gone, ids[i])
			continue
		}
		q, err := s.parseQuestion(s.k.question(ids[i]), h)
		if err != nil {
			return nil, err
		}
		if !q.Decided() {
			out = append(out, q)
		}
	}
	if len(gone) > 0 {
		if err := s.rdb.SRem(ctx, set, gone...).Err(); err != nil {
			return nil, s.wrap("pending questions "+k.String(), err)
		}
	}
	slices.SortFunc(out, func(a, b Question) int { return a.Created.Compare(b.Created) })
	return out, nil
}
