package bot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/internal/testlog"
	"github.com/bobbinbot/bobbin/session"
)

// searchSnippets are texts of seeded messages that reach the bot only
// through a search (the posts are silent and the mention starts its own
// thread, so no import or cache brings them in).
var searchSnippets = []string{"we go with Postgres", "Postgres approved by eng"}

// TestE2ESlackSearchNotKept: Slack's terms forbid storing search results.
// A turn searches twice: the model gets the first results in the next
// step and both in the step after, while Redis, read after the first
// search's checkpoint and after the turn (every key under the store's
// prefix, the transcript through the store and the sealed thread cache
// opened through it), never holds a snippet, nor do the logs; the
// transcript keeps placeholders, which is what a follow-up turn in the
// thread sees.
func TestE2ESlackSearchNotKept(t *testing.T) {
	logs := &testlog.Buffer{}
	e := newCacheEnv(t, harnessOpts{emu: slackemu.Options{NoRateLimits: true}, bot: func(o *bot.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}})
	seedSearch(e.harness)
	var (
		mu      sync.Mutex
		k       session.ThreadKey
		keyed   = make(chan struct{}) // closed once k is set
		midTurn []string
		scanned int
	)
	search := func(query string) llmemu.Reply {
		return llmemu.Reply{ToolCalls: []llmemu.ToolCall{{Name: "slack_search", Arguments: fmt.Sprintf(`{"query":%q}`, query)}}}
	}
	e.llm.SetResponder(func(r llmemu.Recorded) llmemu.Reply {
		results := 0
		for _, m := range r.Messages {
			if m.Role == "tool" {
				results++
			}
		}
		switch last := r.LastMessage(); {
		case last.Role == "tool" && results == 1:
			// Mid-turn: the first search's step is checkpointed.
			select {
			case <-keyed:
			case <-time.After(30 * time.Second):
				t.Error("the thread key was never set")
			}
			mu.Lock()
			defer mu.Unlock()
			leaks, n := e.storedLeaks(k)
			midTurn, scanned = append(midTurn, leaks...), n
			return search("Postgres")
		case last.Role == "tool":
			return llmemu.Reply{Text: "I found the billing decision; see the linked messages."}
		case strings.Contains(r.LastUserText(), "decide") && slices.Contains(r.Tools, "slack_search"):
			return search("billing decision")
		}
		return llmemu.Reply{Text: "Bob made the call."}
	})

	p := e.emu.Mention(slackemu.TeamID, chanProj, slackemu.UserAlice, "what did we decide about billing?", "")
	mu.Lock()
	k = session.ThreadKey{Team: slackemu.TeamID, Channel: chanProj, ThreadTS: p.TS}
	mu.Unlock()
	close(keyed)
	if got := e.waitReply(chanProj, p.TS); got != "I found the billing decision; see the linked messages." {
		t.Fatalf("reply %q", got)
	}

	// Within the turn the model had the results, the first search's in
	// the step after it and in the step after that.
	var withResults []llmemu.Recorded
	for _, r := range e.llm.Requests() {
		if r.LastMessage().Role == "tool" {
			withResults = append(withResults, r)
		}
	}
	if len(withResults) != 2 {
		t.Fatalf("%d model requests ending in a tool result, want 2", len(withResults))
	}
	for i, r := range withResults {
		tools := toolTexts(r)
		if len(tools) != i+1 || !strings.Contains(tools[0], searchSnippets[0]) || !strings.Contains(tools[0], searchSnippets[1]) {
			t.Errorf("request %d of the turn: tool results %q, want the first search's in full", i+1, tools)
		}
	}
	if n := len(e.emu.Searches()); n != 2 {
		t.Errorf("%d searches, want 2", n)
	}

	mu.Lock()
	if len(midTurn) > 0 || scanned == 0 {
		t.Errorf("mid-turn, after the first search's checkpoint (%d keys read), Redis held results: %v", scanned, midTurn)
	}
	mu.Unlock()
	if leaks, n := e.storedLeaks(k); len(leaks) > 0 || n == 0 {
		t.Errorf("after the turn (%d keys read), Redis holds results: %v", n, leaks)
	}
	_, stored, err := e.store.Load(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, m := range stored {
		if m.Role == "tool" {
			kept = append(kept, m.Content)
		}
	}
	want := []string{
		`[Slack search results are not kept after the turn, per Slack's terms: 2 results for "billing decision"; search again if needed]`,
		`[Slack search results are not kept after the turn, per Slack's terms: 2 results for "Postgres"; search again if needed]`,
	}
	if !slices.Equal(kept, want) {
		t.Errorf("stored tool results %q, want %q", kept, want)
	}

	// A follow-up turn in the thread sees the placeholders.
	e.emu.Mention(slackemu.TeamID, chanProj, slackemu.UserAlice, "thanks! who made the call?", p.TS)
	if got := e.waitReplies(chanProj, p.TS, 1, 1); got != "Bob made the call." {
		t.Fatalf("follow-up reply %q", got)
	}
	var follow *llmemu.Recorded
	for _, r := range e.llm.Requests() {
		if strings.Contains(r.LastUserText(), "who made the call") {
			follow = &r
		}
	}
	if follow == nil {
		t.Fatal("no model request for the follow-up")
	}
	if got := toolTexts(*follow); !slices.Equal(got, want) {
		t.Errorf("the follow-up's model request has tool results %q, want the placeholders", got)
	}
	for _, s := range searchSnippets {
		if strings.Contains(string(follow.Body), s) {
			t.Errorf("the follow-up's model request carries %q", s)
		}
	}
	if leaks, _ := e.storedLeaks(k); len(leaks) > 0 {
		t.Errorf("after the follow-up, Redis holds results: %v", leaks)
	}
	for _, s := range searchSnippets {
		if strings.Contains(logs.String(), s) {
			t.Errorf("the logs hold %q", s)
		}
	}
}

// toolTexts are the tool results of a model request, in order.
func toolTexts(r llmemu.Recorded) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "tool" {
			out = append(out, m.Text)
		}
	}
	return out
}

// storedLeaks reads what the bot keeps in Redis and returns where a search
// snippet is found, with the number of keys read: every key under the
// store's prefix as Redis holds it (strings, lists, hashes, sets, sorted
// sets, streams: the transcript, metadata, queue, audit stream, usage,
// governor…), thread k's transcript through the store, and k's thread
// cache opened with the store's key (it is sealed in Redis).
func (e *cacheEnv) storedLeaks(k session.ThreadKey) (leaks []string, keys int) {
	e.t.Helper()
	ctx := context.Background()
	check := func(where, v string) {
		for _, s := range searchSnippets {
			if strings.Contains(v, s) {
				leaks = append(leaks, fmt.Sprintf("%s holds %q", where, s))
			}
		}
	}
	_, msgs, err := e.store.Load(ctx, k)
	if err != nil {
		e.t.Errorf("loading the transcript: %v", err)
	}
	raw, _ := json.Marshal(msgs)
	check("the transcript", string(raw))
	view, err := e.cache.Newest(ctx, k, 0, 0)
	if err != nil {
		e.t.Errorf("reading the thread cache: %v", err)
	}
	raw, _ = json.Marshal(view.Messages)
	check("the thread cache", string(raw))
	if os.Getenv("REDIS_URL") == "" {
		return leaks, 0 // the embedded Redis of the store is not reachable from here
	}
	ro, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		e.t.Errorf("REDIS_URL: %v", err)
		return leaks, 0
	}
	rdb := redis.NewClient(ro)
	defer rdb.Close()
	iter := rdb.Scan(ctx, 0, e.prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		keys++
		var vals []string
		switch rdb.Type(ctx, key).Val() {
		case "string":
			vals = []string{rdb.Get(ctx, key).Val()}
		case "list":
			vals = rdb.LRange(ctx, key, 0, -1).Val()
		case "hash":
			for f, v := range rdb.HGetAll(ctx, key).Val() {
				vals = append(vals, f, v)
			}
		case "set":
			vals = rdb.SMembers(ctx, key).Val()
		case "zset":
			vals = rdb.ZRange(ctx, key, 0, -1).Val()
		case "stream":
			for _, m := range rdb.XRange(ctx, key, "-", "+").Val() {
				b, _ := json.Marshal(m.Values)
				vals = append(vals, string(b))
			}
		default:
			vals = []string{rdb.Dump(ctx, key).Val()}
		}
		check("Redis key "+key, strings.Join(vals, "\n"))
	}
	if err := iter.Err(); err != nil {
		e.t.Errorf("scanning Redis: %v", err)
	}
	return leaks, keys
}
