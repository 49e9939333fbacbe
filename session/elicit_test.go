package session

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"
)

func newQuestion(k ThreadKey, expires time.Duration, spec string) Question {
	return Question{Prompt: Prompt{Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS, Requester: "U1", Server: "forms", Expires: time.Now().Add(expires), MessageTS: "1700000002.000300"}, Mode: "form", Spec: []byte(spec)}
}

func TestQuestionAnsweredExactlyOnceAcrossReplicas(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	a := newStore(t, Options{SecretKey: key})
	b := peer(t, a, Options{SecretKey: key})
	ctx := ctxT(t)
	k := testThread()
	const specCanary, answerCanary = "spec-canary-31f", "answer-canary-9d2"
	q, err := a.CreateQuestion(ctx, newQuestion(k, time.Minute, `{"message":"`+specCanary+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	if q.ID == "" || q.State != QuestionPending {
		t.Fatalf("created %+v", q)
	}
	got, err := b.GetQuestion(ctx, q.ID)
	if err != nil || !bytes.Contains(got.Spec, []byte(specCanary)) || got.Requester != "U1" || got.Mode != "form" {
		t.Fatalf("GetQuestion on the other replica = %+v, %v", got, err)
	}

	// 16 answers on two replicas at once.
	final := settleRace(t, [2]*Store{a, b}, 16,
		[]string{QuestionAccept, QuestionDecline, QuestionCancel, QuestionWithdrawn},
		func(st *Store, state, by string) (Question, bool, error) {
			var ans []byte
			if state == QuestionAccept {
				ans = []byte(`{"v":"` + answerCanary + by + `"}`)
			}
			return st.AnswerQuestion(ctx, q.ID, state, by, ans)
		})
	if final.State == QuestionAccept && !bytes.Contains(final.Answer, []byte(answerCanary+final.DecidedBy)) {
		t.Errorf("the winner's answer is %q", final.Answer)
	}
	if final.State != QuestionAccept && final.Answer != nil {
		t.Errorf("a %s carries an answer %q", final.State, final.Answer)
	}
	if raw := rawValues(t, a); strings.Contains(raw, specCanary) || strings.Contains(raw, answerCanary) {
		t.Errorf("question or answer in clear in Redis: %s", raw)
	}
	if err := b.ClearQuestionAnswer(ctx, q.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.GetQuestion(ctx, q.ID); got.Answer != nil || got.State != final.State {
		t.Errorf("after clearing: %+v", got)
	}
	if _, _, err := a.AnswerQuestion(ctx, "nope", QuestionCancel, "U1", nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	if _, _, err := a.AnswerQuestion(ctx, q.ID, QuestionPending, "U1", nil); err == nil {
		t.Error("answering pending: want an error")
	}
}

func TestQuestionWaitWokenExpiredAndPending(t *testing.T) {
	a := newStore(t, Options{}) // no SECRET_KEY: stored plain, still works
	b := peer(t, a, Options{})
	ctx := ctxT(t)
	k := testThread()
	q, err := a.CreateQuestion(ctx, newQuestion(k, time.Minute, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.PendingQuestions(ctx, k)
	if err != nil || len(p) != 1 || p[0].ID != q.ID {
		t.Fatalf("pending = %+v, %v", p, err)
	}
	done := make(chan Question, 1)
	go func() {
		got, err := a.WaitQuestion(ctx, q.ID)
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()
	time.Sleep(50 * time.Millisecond)
	if _, won, err := b.AnswerQuestion(ctx, q.ID, QuestionAccept, "U1", []byte(`{"x":1}`)); err != nil || !won {
		t.Fatalf("answer: %v %v", won, err)
	}
	select {
	case got := <-done:
		if got.State != QuestionAccept || string(got.Answer) != `{"x":1}` {
			t.Errorf("woken with %+v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken by the other replica's answer")
	}
	if p, _ := b.PendingQuestions(ctx, k); len(p) != 0 {
		t.Errorf("still pending: %+v", p)
	}

	// Expiry: the waiter answers "expired" itself; a late click loses.
	q2, err := a.CreateQuestion(ctx, newQuestion(k, 300*time.Millisecond, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.WaitQuestion(ctx, q2.ID)
	if err != nil || got.State != QuestionExpired {
		t.Fatalf("wait past expiry = %+v, %v", got, err)
	}
	if late, won, _ := b.AnswerQuestion(ctx, q2.ID, QuestionAccept, "U1", []byte(`{}`)); won || late.State != QuestionExpired {
		t.Errorf("late answer = %+v won=%v", late, won)
	}
}

func TestConnectNotice(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	if got, err := s.ConnectNotice(ctx, "T1", "linear", "U1"); got != nil || err != nil {
		t.Fatalf("before: %q %v", got, err)
	}
	if err := s.PutConnectNotice(ctx, "T1", "linear", "U1", []byte(`{"channel":"C1"}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ConnectNotice(ctx, "T1", "linear", "U1"); string(got) != `{"channel":"C1"}` || err != nil {
		t.Fatalf("after: %q %v", got, err)
	}
	if err := s.PutConnectNotice(ctx, "T1", "a:b", "U1", nil, time.Minute); err == nil {
		t.Error("a server name with ':' was accepted")
	}
}

// TestQuestionKeysExpire: every key a question or a connect notice leaves
// behind has a TTL.
func TestQuestionKeysExpire(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	q, err := s.CreateQuestion(ctx, newQuestion(k, time.Minute, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { _, err := s.WaitQuestion(ctx, q.ID); waited <- err }()
	time.Sleep(200 * time.Millisecond) // the waiter blocks: its wake-up path runs
	if _, _, err := s.AnswerQuestion(ctx, q.ID, QuestionAccept, "U1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if err := s.PutConnectNotice(ctx, k.Team, "linear", "U1", []byte(`{}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	keys := scanKeys(t, s)
	if len(keys) < 3 {
		t.Errorf("only keys %v", keys)
	}
	for _, key := range keys {
		if ttl := s.rdb.PTTL(ctx, key).Val(); ttl <= 0 {
			t.Errorf("key %s has no TTL (%v)", key, ttl)
		}
	}
}
