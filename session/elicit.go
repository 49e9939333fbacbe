package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Questions MCP servers ask the person behind a tool call (elicitation,
// issue 14), shared by every replica like approvals: the question is posted
// by the replica running the turn, the answer may be clicked on any other,
// and it is taken exactly once (a compare-and-set from pending): the
// lifecycle of approvals, prompts[T] in prompt.go.
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
	QuestionPending = promptPending
	QuestionAccept  = "accept"
	QuestionDecline = "decline"
	QuestionCancel  = "cancel"
	// QuestionExpired: nobody answered before Expires (callers answer the
	// server "cancel").
	QuestionExpired = promptExpired
	// QuestionWithdrawn: the turn was stopped (or ended) while waiting.
	QuestionWithdrawn = "withdrawn"
)

// Question is one pending or answered question from an MCP server.
type Question struct {
	// Prompt: the id, thread, the person asked (Requester), the MCP server
	// asking, times, state (one of the Question* constants), who decided
	// and the Slack message carrying the question.
	Prompt
	// Mode is "form" or "url".
	Mode string
	// Spec is the caller's JSON of the question.
	Spec []byte
	// Answer is the caller's JSON of a form's answer (accept only).
	Answer []byte
}

func (k keys) question(id string) string { return k.prefix + ":{e:" + id + "}" }
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

// questionPrompts is the lifecycle of questions (prompt.go). Spec and
// answer are sealed (or marked plain) per question.
var questionPrompts = &prompts[Question]{
	noun: "question", settleVerb: "answer",
	final:  []string{QuestionAccept, QuestionDecline, QuestionCancel, QuestionExpired, QuestionWithdrawn},
	record: keys.question,
	index:  keys.threadQuestions,
	encode: func(s *Store, q Question) ([]any, error) {
		spec, err := s.sealOrPlain(q.Team, q.ID, "spec", q.Spec)
		if err != nil {
			return nil, err
		}
		return q.core().fields("mode", q.Mode, "spec", spec), nil
	},
	decode: func(s *Store, key string, h map[string]string, c Prompt) (Question, error) {
		q := Question{Mode: h["mode"]}.withCore(c)
		var errs [2]error
		q.Spec, errs[0] = s.openOrPlain(key, q.Team, q.ID, "spec", h["spec"])
		q.Answer, errs[1] = s.openOrPlain(key, q.Team, q.ID, "answer", h["answer"])
		if err := errors.Join(errs[:]...); err != nil {
			return Question{}, err
		}
		return q, nil
	},
}

func (q Question) core() Prompt { return q.Prompt }

func (q Question) withCore(c Prompt) Question {
	q.Prompt = c
	return q
}

// CreateQuestion stores a pending question and indexes it under its
// thread. It fills ID (when empty), Created and State and returns the
// stored record. Expires must be in the future; the record is kept until
// ApprovalRetention after it so late clicks get a precise answer.
func (s *Store) CreateQuestion(ctx context.Context, q Question) (Question, error) {
	q.Answer = nil
	return questionPrompts.create(ctx, s, q)
}

// GetQuestion returns a question; ErrNotFound when unknown or long expired.
func (s *Store) GetQuestion(ctx context.Context, id string) (Question, error) {
	return questionPrompts.get(ctx, s, id)
}

// AnswerQuestion moves a pending question to state (accept, decline,
// cancel, expired or withdrawn) with the answer (accept only), recording
// who answered, exactly once across all replicas: won is true only for the
// call that made the change. Every call returns the question as stored
// afterwards, so a losing click can say who answered. An answer after
// Expires records QuestionExpired and does not win. Waiters on any replica
// are woken.
func (s *Store) AnswerQuestion(ctx context.Context, id, state, by string, answer []byte) (q Question, won bool, err error) {
	if err := questionPrompts.check(id, state); err != nil {
		return Question{}, false, err
	}
	var sealed string
	if state == QuestionAccept && len(answer) > 0 {
		// The team is in the record; read it to bind the seal.
		team, err := s.rdb.HGet(ctx, s.k.question(id), "team").Result()
		if errors.Is(err, redis.Nil) {
			return Question{}, false, questionPrompts.notFound(id)
		}
		if err != nil {
			return Question{}, false, s.wrap("answer question "+id, err)
		}
		if sealed, err = s.sealOrPlain(team, id, "answer", answer); err != nil {
			return Question{}, false, fmt.Errorf("session: answer question %s: %w", id, err)
		}
	}
	return questionPrompts.settle(ctx, s, id, state, by, sealed)
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
	return questionPrompts.wait(ctx, s, id)
}

// PendingQuestions lists the thread's questions still pending, oldest
// first: for withdrawing them on Stop from a replica not running the turn.
func (s *Store) PendingQuestions(ctx context.Context, k ThreadKey) ([]Question, error) {
	return questionPrompts.pending(ctx, s, k)
}
