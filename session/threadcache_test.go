package session

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// cacheTS is the ts of the i-th message of the test thread (0 = root).
func cacheTS(k ThreadKey, i int) string {
	if i == 0 {
		return k.ThreadTS
	}
	return fmt.Sprintf("1700000001.%06d", i)
}

func cacheMsg(k ThreadKey, i int) CachedMessage {
	return CachedMessage{TS: cacheTS(k, i), User: "U222", Text: fmt.Sprintf("canary-msg-%03d the secret plan is <%d>", i, i)}
}

// allValues reads every value stored under the store's prefix, whatever
// the key's type.
func allValues(t *testing.T, s *Store) []string {
	t.Helper()
	ctx := ctxT(t)
	var out []string
	for _, key := range scanKeys(t, s) {
		switch typ := s.rdb.Type(ctx, key).Val(); typ {
		case "string":
			out = append(out, s.rdb.Get(ctx, key).Val())
		case "hash":
			for f, v := range s.rdb.HGetAll(ctx, key).Val() {
				out = append(out, f, v)
			}
		case "zset":
			out = append(out, s.rdb.ZRange(ctx, key, 0, -1).Val()...)
		case "list":
			out = append(out, s.rdb.LRange(ctx, key, 0, -1).Val()...)
		case "set":
			out = append(out, s.rdb.SMembers(ctx, key).Val()...)
		default:
			t.Errorf("key %s of type %s not inspected", key, typ)
		}
	}
	return out
}

func TestThreadCache200(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1)})
	ctx := ctxT(t)
	c := s.ThreadCache(ThreadCacheOptions{})
	k := testThread()
	for i := range 200 {
		if err := c.Append(ctx, k, cacheMsg(k, i)); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
	}
	v, err := c.Newest(ctx, k, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Messages) != 200 || !v.Complete() || v.From != k.ThreadTS {
		t.Fatalf("view: %d messages, from %s, start %v, omitted %d", len(v.Messages), v.From, v.FromStart, v.Omitted)
	}
	for i, m := range v.Messages {
		if want := cacheMsg(k, i); m.TS != want.TS || m.Text != want.Text || m.User != want.User || m.Edited {
			t.Fatalf("message %d = %+v", i, m)
		}
	}
	// The newest 50; then a byte budget.
	v, _ = c.Newest(ctx, k, 50, 0)
	if len(v.Messages) != 50 || v.Omitted != 150 || v.Messages[0].TS != cacheTS(k, 150) || v.Messages[49].TS != cacheTS(k, 199) || v.Complete() {
		t.Errorf("newest 50: %d, omitted %d, first %s", len(v.Messages), v.Omitted, v.Messages[0].TS)
	}
	size := len(cacheMsg(k, 199).Text)
	v, _ = c.Newest(ctx, k, 0, 10*size+size/2)
	if len(v.Messages) != 10 || v.Omitted != 190 || v.Messages[9].TS != cacheTS(k, 199) {
		t.Errorf("budget of 10.5 messages: %d, omitted %d", len(v.Messages), v.Omitted)
	}
	if v, _ := c.Newest(ctx, k, 0, 1); len(v.Messages) != 1 {
		t.Errorf("a budget smaller than one message still gives the newest: %d", len(v.Messages))
	}

	// Nothing in clear text; every key under the thread's hash tag, with
	// a TTL.
	for _, val := range allValues(t, s) {
		if strings.Contains(val, "canary-msg") || strings.Contains(val, "secret plan") {
			t.Fatalf("plaintext in Redis: %.80s", val)
		}
	}
	for _, key := range scanKeys(t, s) {
		if !strings.Contains(key, "{t:"+k.String()+"}") {
			t.Errorf("key %s outside the thread's hash tag", key)
		}
		if ttl := s.rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > s.opt.SessionTTL {
			t.Errorf("key %s: TTL %v, want (0, SessionTTL]", key, ttl)
		}
	}
	// Another key cannot open it.
	other := peer(t, s, Options{SecretKey: testKey(2)}).ThreadCache(ThreadCacheOptions{})
	if _, err := other.Newest(ctx, k, 1, 0); !errors.Is(err, ErrNoSecretKey) {
		t.Errorf("read with another key: %v", err)
	}
	noKey := peer(t, s, Options{}).ThreadCache(ThreadCacheOptions{})
	if err := noKey.Append(ctx, k, cacheMsg(k, 300)); !errors.Is(err, ErrNoSecretKey) {
		t.Errorf("append without a key: %v", err)
	}
}

func TestThreadCacheEditsAndDeletions(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1)})
	ctx := ctxT(t)
	c := s.ThreadCache(ThreadCacheOptions{})
	k := testThread()
	for i := range 5 {
		if err := c.Append(ctx, k, cacheMsg(k, i)); err != nil {
			t.Fatal(err)
		}
	}
	edited := cacheMsg(k, 2)
	edited.Text = "canary-msg edited"
	if ok, err := c.Edit(ctx, k, edited); !ok || err != nil {
		t.Fatalf("Edit: %v %v", ok, err)
	}
	if ok, _ := c.Edit(ctx, k, cacheMsg(k, 9)); ok {
		t.Error("an edit of a message never cached was applied")
	}
	if err := c.Delete(ctx, k, cacheTS(k, 3)); err != nil {
		t.Fatal(err)
	}
	// Replays: the deleted message and an older version of an edited one.
	if err := c.Append(ctx, k, cacheMsg(k, 3)); err != nil {
		t.Fatal(err)
	}
	if err := c.Append(ctx, k, cacheMsg(k, 2)); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Edit(ctx, k, cacheMsg(k, 3)); ok {
		t.Error("an edit of a deleted message was applied")
	}
	v, err := c.Newest(ctx, k, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range v.Messages {
		got = append(got, fmt.Sprintf("%s:%v", m.Text[:min(len(m.Text), 17)], m.Edited))
	}
	want := []string{"canary-msg-000 th:false", "canary-msg-001 th:false", "canary-msg edited:true", "canary-msg-004 th:false"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("after edits and deletions:\n got %v\nwant %v", got, want)
	}
	if !v.Complete() {
		t.Errorf("deletions do not make the cache incomplete: %+v", v)
	}
}

func TestThreadCacheBounds(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1), SessionTTL: 5 * time.Second})
	ctx := ctxT(t)
	k := testThread()
	c := s.ThreadCache(ThreadCacheOptions{MaxMessages: 50})
	for i := range 120 {
		if err := c.Append(ctx, k, cacheMsg(k, i)); err != nil {
			t.Fatal(err)
		}
	}
	v, _ := c.Newest(ctx, k, 0, 0)
	if len(v.Messages) != 50 || v.FromStart || v.From != cacheTS(k, 70) || v.Messages[0].TS != cacheTS(k, 70) {
		t.Errorf("count bound: %d messages, from %s (start %v)", len(v.Messages), v.From, v.FromStart)
	}
	// The TTL is SESSION_TTL unless set.
	for _, key := range scanKeys(t, s) {
		if ttl := s.rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 5*time.Second {
			t.Errorf("key %s: TTL %v", key, ttl)
		}
	}

	// Bytes: sealed values of ~400 bytes, bound 4000.
	k2 := testThread()
	cb := s.ThreadCache(ThreadCacheOptions{MaxBytes: 4000, TTL: time.Minute})
	for i := range 40 {
		if err := cb.Append(ctx, k2, cacheMsg(k2, i)); err != nil {
			t.Fatal(err)
		}
	}
	tk := s.k.threadCache(k2)
	total := 0
	for _, val := range s.rdb.HGetAll(ctx, tk.cache).Val() {
		total += len(val)
	}
	meta := s.rdb.HGet(ctx, tk.meta, "bytes").Val()
	if total > 4000 || fmt.Sprint(total) != meta {
		t.Errorf("sealed bytes %d (meta says %s), bound 4000", total, meta)
	}
	v, _ = cb.Newest(ctx, k2, 0, 0)
	if len(v.Messages) == 0 || len(v.Messages) >= 40 || v.Messages[len(v.Messages)-1].TS != cacheTS(k2, 39) || v.FromStart {
		t.Errorf("byte bound kept %d messages", len(v.Messages))
	}
	if ttl := s.rdb.PTTL(ctx, tk.cache).Val(); ttl <= 5*time.Second || ttl > time.Minute {
		t.Errorf("explicit TTL: %v", ttl)
	}

	// A thread whose cache expired reads as empty.
	if v, err := c.Newest(ctx, testThread(), 0, 0); err != nil || len(v.Messages) != 0 || v.From != "" || v.FromStart {
		t.Errorf("empty thread: %+v %v", v, err)
	}
	if err := c.Append(ctx, k, CachedMessage{TS: "17.1"}); err == nil {
		t.Error("a malformed ts was accepted")
	}
}

func TestThreadCacheBackfill(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1)})
	ctx := ctxT(t)
	c := s.ThreadCache(ThreadCacheOptions{})
	k := testThread()
	// The bot joined at message 100.
	for i := 100; i < 200; i++ {
		if err := c.Append(ctx, k, cacheMsg(k, i)); err != nil {
			t.Fatal(err)
		}
	}
	v, _ := c.Newest(ctx, k, 0, 0)
	if v.FromStart || v.From != cacheTS(k, 100) || len(v.Messages) != 100 {
		t.Fatalf("before backfill: from %s start %v, %d", v.From, v.FromStart, len(v.Messages))
	}
	// It read the first 15 from Slack (a partial read): stored, but the
	// coverage stays.
	var early []CachedMessage
	for i := range 15 {
		early = append(early, cacheMsg(k, i))
	}
	if err := c.Backfill(ctx, k, early, false); err != nil {
		t.Fatal(err)
	}
	v, _ = c.Newest(ctx, k, 0, 0)
	if v.FromStart || v.From != cacheTS(k, 100) || len(v.Messages) != 115 || v.Messages[14].TS != cacheTS(k, 14) {
		t.Errorf("after a partial backfill: from %s start %v, %d messages", v.From, v.FromStart, len(v.Messages))
	}
	// Later the whole start of the thread: covered from the root.
	var rest []CachedMessage
	for i := range 101 {
		rest = append(rest, cacheMsg(k, i))
	}
	if err := c.Backfill(ctx, k, rest, true); err != nil {
		t.Fatal(err)
	}
	v, _ = c.Newest(ctx, k, 0, 0)
	if !v.Complete() || v.From != k.ThreadTS || len(v.Messages) != 200 {
		t.Errorf("after a contiguous backfill: from %s start %v, %d messages", v.From, v.FromStart, len(v.Messages))
	}
}

// TestThreadCacheOutOfOrder: events of one thread arrive in any order;
// the root arriving after its replies still makes the cache whole.
func TestThreadCacheOutOfOrder(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1)})
	ctx := ctxT(t)
	c := s.ThreadCache(ThreadCacheOptions{})
	k := testThread()
	for _, i := range []int{2, 1, 3, 0} {
		if err := c.Append(ctx, k, cacheMsg(k, i)); err != nil {
			t.Fatal(err)
		}
	}
	v, err := c.Newest(ctx, k, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Complete() || v.From != k.ThreadTS || len(v.Messages) != 4 {
		t.Errorf("view: %d messages, from %s, start %v", len(v.Messages), v.From, v.FromStart)
	}
	// After eviction a late delivery of an older message does not lower
	// the coverage again.
	k2 := k
	k2.Channel = "C0OTHER"
	c2 := s.ThreadCache(ThreadCacheOptions{MaxMessages: 3})
	for i := 2; i <= 6; i++ {
		if err := c2.Append(ctx, k2, cacheMsg(k2, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c2.Append(ctx, k2, cacheMsg(k2, 1)); err != nil {
		t.Fatal(err)
	}
	if v, _ := c2.Newest(ctx, k2, 0, 0); v.From != cacheTS(k2, 4) && v.From != cacheTS(k2, 5) {
		t.Errorf("after eviction and a late message: from %s, want the eviction's", v.From)
	}
}
