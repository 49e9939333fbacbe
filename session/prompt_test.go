package session

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// settleRace settles one prompt n times at once, alternating between two
// replicas, with states in turn (settle gets the store, the state and the
// clicker). Exactly one call must win, recording its own state and clicker,
// and every call must return the winner's decision. It returns the winner's
// record.
func settleRace[T prompt[T]](t *testing.T, stores [2]*Store, n int, states []string, settle func(st *Store, state, by string) (T, bool, error)) T {
	t.Helper()
	type click struct {
		by, want string
		v        T
		won      bool
		err      error
	}
	clicks := make([]click, n)
	var wg sync.WaitGroup
	for i := range clicks {
		st := stores[i%2]
		clicks[i].by, clicks[i].want = fmt.Sprintf("U%d", i), states[i%len(states)]
		wg.Go(func() { clicks[i].v, clicks[i].won, clicks[i].err = settle(st, clicks[i].want, clicks[i].by) })
	}
	wg.Wait()
	var final T
	winners := 0
	for _, c := range clicks {
		if c.err != nil {
			t.Fatalf("settle: %v", c.err)
		}
		if got := c.v.core(); c.won {
			winners++
			final = c.v
			if got.State != c.want || got.DecidedBy != c.by {
				t.Errorf("winner got %+v, want state %s by %s", c.v, c.want, c.by)
			}
		}
	}
	if winners != 1 {
		t.Fatalf("%d calls won the compare-and-set, want exactly 1", winners)
	}
	f := final.core()
	for _, c := range clicks {
		if got := c.v.core(); got.State != f.State || got.DecidedBy != f.DecidedBy {
			t.Errorf("click by %s saw %s by %s, want the winner's %s by %s", c.by, got.State, got.DecidedBy, f.State, f.DecidedBy)
		}
	}
	return final
}

// The records of approvals and questions outlive a deploy: a replica of
// the previous version may have written the record a new one reads, and
// the other way round. These tests spell the Redis layout out literally
// (keys, fields, encodings), so a change of the encoding fails here.

func msText(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// TestApprovalRecordLayout: what CreateApproval and Decide write.
func TestApprovalRecordLayout(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	in := newApproval(k, time.Minute)
	in.AdminOnly = true
	in.Grant = "delete_file@9f2c"
	ap, err := s.CreateApproval(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	P := s.opt.Prefix
	rec, wake, index := P+":{a:"+ap.ID+"}", P+":{a:"+ap.ID+"}:wake", P+":{t:"+k.String()+"}:approvals"
	want := map[string]string{
		"id": ap.ID, "team": k.Team, "channel": k.Channel, "thread_ts": k.ThreadTS,
		"requester": "U1", "server": "srv", "tool": "delete_file", "args_digest": "sha256:abc", "call_id": "call_1",
		"created": msText(ap.Created), "expires": msText(ap.Expires), "state": "pending",
		"decided_by": "", "decided_at": "", "message_ts": "1700000002.000300",
		"admin_only": "1", "once_only": "", "grant": "delete_file@9f2c",
	}
	if got := s.rdb.HGetAll(ctx, rec).Val(); !maps.Equal(got, want) {
		t.Errorf("record %s =\n%v\nwant\n%v", rec, got, want)
	}
	if ttl := s.rdb.PTTL(ctx, rec).Val(); ttl <= time.Minute-5*time.Second || ttl > time.Minute+s.opt.ApprovalRetention {
		t.Errorf("record TTL %v, want about expiry + retention (%v)", ttl, time.Minute+s.opt.ApprovalRetention)
	}
	if ids := s.rdb.SMembers(ctx, index).Val(); len(ids) != 1 || ids[0] != ap.ID {
		t.Errorf("index %s = %v", index, ids)
	}
	if ttl := s.rdb.PTTL(ctx, index).Val(); ttl < s.opt.SessionTTL-5*time.Second {
		t.Errorf("index TTL %v, want ≥ SessionTTL", ttl)
	}
	before := time.Now()
	if _, won, err := s.Decide(ctx, ap.ID, ApprovalDeny, "U2"); err != nil || !won {
		t.Fatalf("Decide = %v, %v", won, err)
	}
	got := s.rdb.HGetAll(ctx, rec).Val()
	at, _ := strconv.ParseInt(got["decided_at"], 10, 64)
	if at < before.UnixMilli() || at > time.Now().UnixMilli() {
		t.Errorf("decided_at %q is not the decision's unix milliseconds", got["decided_at"])
	}
	want["state"], want["decided_by"], want["decided_at"] = "deny", "U2", got["decided_at"]
	if !maps.Equal(got, want) {
		t.Errorf("decided record =\n%v\nwant\n%v", got, want)
	}
	if l := s.rdb.LRange(ctx, wake, 0, -1).Val(); len(l) != 1 || l[0] != "1" {
		t.Errorf("wake list %s = %v, want one token", wake, l)
	}
	if ttl := s.rdb.PTTL(ctx, wake).Val(); ttl <= 0 {
		t.Errorf("wake list TTL %v", ttl)
	}
}

// TestApprovalOldRecordRead: a record as the previous version wrote it is
// read, listed, waited on and decided.
func TestApprovalOldRecordRead(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	P := s.opt.Prefix
	created := time.Now().Add(-time.Second).Truncate(time.Millisecond).UTC()
	expires := created.Add(time.Minute)
	if err := s.rdb.HSet(ctx, P+":{a:old1}",
		"id", "old1", "team", k.Team, "channel", k.Channel, "thread_ts", k.ThreadTS,
		"requester", "U1", "server", "srv", "tool", "t", "args_digest", "d", "call_id", "c1",
		"created", msText(created), "expires", msText(expires), "state", "pending",
		"decided_by", "", "decided_at", "", "message_ts", "1.2", "admin_only", "", "once_only", "1").Err(); err != nil {
		t.Fatal(err)
	}
	s.rdb.PExpire(ctx, P+":{a:old1}", time.Hour)
	s.rdb.SAdd(ctx, P+":{t:"+k.String()+"}:approvals", "old1")
	want := Approval{Prompt: Prompt{ID: "old1", Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS, Requester: "U1", Server: "srv", Created: created, Expires: expires, State: ApprovalPending, MessageTS: "1.2"}, Tool: "t", ArgsDigest: "d", CallID: "c1", OnceOnly: true}
	if got, err := s.GetApproval(ctx, "old1"); err != nil || got != want {
		t.Fatalf("GetApproval = %+v, %v\nwant %+v", got, err, want)
	}
	if g := want.GrantName(); g != "t" {
		t.Errorf("GrantName of a record without grant = %q, want the tool", g)
	}
	if p, err := s.PendingApprovals(ctx, k); err != nil || len(p) != 1 || p[0] != want {
		t.Fatalf("PendingApprovals = %+v, %v", p, err)
	}
	waited := make(chan Approval, 1)
	go func() { a, _ := s.WaitApproval(ctx, "old1"); waited <- a }()
	time.Sleep(50 * time.Millisecond)
	got, won, err := s.Decide(ctx, "old1", ApprovalAllowSession, "U3")
	if err != nil || !won || got.State != ApprovalAllowSession || got.DecidedBy != "U3" || got.DecidedAt.IsZero() {
		t.Fatalf("Decide = %+v, %v, %v", got, won, err)
	}
	if w := <-waited; w != got {
		t.Errorf("WaitApproval = %+v, want %+v", w, got)
	}
}

// TestQuestionRecordLayout: what CreateQuestion and AnswerQuestion write,
// plain (no SECRET_KEY) and sealed.
func TestQuestionRecordLayout(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	k := testThread()
	q, err := s.CreateQuestion(ctx, newQuestion(k, time.Minute, `{"m":1}`))
	if err != nil {
		t.Fatal(err)
	}
	P := s.opt.Prefix
	rec, wake, index := P+":{e:"+q.ID+"}", P+":{e:"+q.ID+"}:wake", P+":{t:"+k.String()+"}:elicits"
	want := map[string]string{
		"id": q.ID, "team": k.Team, "channel": k.Channel, "thread_ts": k.ThreadTS,
		"requester": "U1", "server": "forms", "mode": "form", "spec": `p:{"m":1}`,
		"created": msText(q.Created), "expires": msText(q.Expires), "state": "pending",
		"decided_by": "", "decided_at": "", "message_ts": "1700000002.000300",
	}
	if got := s.rdb.HGetAll(ctx, rec).Val(); !maps.Equal(got, want) {
		t.Errorf("record %s =\n%v\nwant\n%v", rec, got, want)
	}
	if ttl := s.rdb.PTTL(ctx, rec).Val(); ttl <= time.Minute-5*time.Second || ttl > time.Minute+s.opt.ApprovalRetention {
		t.Errorf("record TTL %v", ttl)
	}
	if ids := s.rdb.SMembers(ctx, index).Val(); len(ids) != 1 || ids[0] != q.ID {
		t.Errorf("index %s = %v", index, ids)
	}
	if _, won, err := s.AnswerQuestion(ctx, q.ID, QuestionAccept, "U2", []byte(`{"a":2}`)); err != nil || !won {
		t.Fatalf("AnswerQuestion = %v, %v", won, err)
	}
	got := s.rdb.HGetAll(ctx, rec).Val()
	want["state"], want["decided_by"], want["decided_at"], want["answer"] = "accept", "U2", got["decided_at"], `p:{"a":2}`
	if _, err := strconv.ParseInt(got["decided_at"], 10, 64); err != nil || !maps.Equal(got, want) {
		t.Errorf("answered record =\n%v\nwant\n%v", got, want)
	}
	if l := s.rdb.LRange(ctx, wake, 0, -1).Val(); len(l) != 1 {
		t.Errorf("wake list %s = %v, want one token", wake, l)
	}

	// Sealed: "s:" and the keyring's JSON, bound to the question.
	sealedStore := oauthStore(t)
	q2, err := sealedStore.CreateQuestion(ctx, newQuestion(k, time.Minute, `{"m":2}`))
	if err != nil {
		t.Fatal(err)
	}
	rec2 := sealedStore.opt.Prefix + ":{e:" + q2.ID + "}"
	spec := sealedStore.rdb.HGet(ctx, rec2, "spec").Val()
	if !strings.HasPrefix(spec, "s:{") {
		t.Fatalf("sealed spec %q", spec)
	}
	if pt, err := sealedStore.openRecord(rec2, k.Team, "elicit:"+q2.ID, "spec", spec[2:]); err != nil || string(pt) != `{"m":2}` {
		t.Errorf("opening the spec as sealed for elicit:ID = %q, %v", pt, err)
	}
}

// TestQuestionOldRecordRead: a question as the previous version wrote it
// (spec plain and sealed the old way) is read, listed and answered.
func TestQuestionOldRecordRead(t *testing.T) {
	s := oauthStore(t)
	ctx := ctxT(t)
	k := testThread()
	P := s.opt.Prefix
	created := time.Now().Add(-time.Second).Truncate(time.Millisecond).UTC()
	expires := created.Add(time.Minute)
	sealedSpec, err := s.sealRecord(k.Team, "elicit:old2", "spec", []byte(`{"s":2}`))
	if err != nil {
		t.Fatal(err)
	}
	for id, spec := range map[string]string{"old1": `p:{"s":1}`, "old2": "s:" + sealedSpec} {
		if err := s.rdb.HSet(ctx, P+":{e:"+id+"}",
			"id", id, "team", k.Team, "channel", k.Channel, "thread_ts", k.ThreadTS,
			"requester", "U1", "server", "forms", "mode", "url", "spec", spec,
			"created", msText(created), "expires", msText(expires), "state", "pending",
			"decided_by", "", "decided_at", "", "message_ts", "1.2").Err(); err != nil {
			t.Fatal(err)
		}
		s.rdb.PExpire(ctx, P+":{e:"+id+"}", time.Hour)
		s.rdb.SAdd(ctx, P+":{t:"+k.String()+"}:elicits", id)
	}
	p, err := s.PendingQuestions(ctx, k)
	if err != nil || len(p) != 2 {
		t.Fatalf("PendingQuestions = %+v, %v", p, err)
	}
	for _, q := range p {
		if q.Team != k.Team || q.Mode != "url" || q.MessageTS != "1.2" || !q.Created.Equal(created) || !q.Expires.Equal(expires) ||
			string(q.Spec) != map[string]string{"old1": `{"s":1}`, "old2": `{"s":2}`}[q.ID] {
			t.Errorf("old question read as %+v", q)
		}
	}
	got, won, err := s.AnswerQuestion(ctx, "old2", QuestionAccept, "U3", []byte(`{"ok":true}`))
	if err != nil || !won || string(got.Answer) != `{"ok":true}` || string(got.Spec) != `{"s":2}` {
		t.Fatalf("AnswerQuestion = %+v, %v, %v", got, won, err)
	}
	if got, err := s.WaitQuestion(ctx, "old2"); err != nil || got.State != QuestionAccept || got.DecidedBy != "U3" {
		t.Errorf("WaitQuestion = %+v, %v", got, err)
	}
}
