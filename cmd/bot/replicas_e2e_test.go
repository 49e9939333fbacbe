package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// replicaSet runs several replicas of the whole program (run) against one
// Slack emulator, one fake model and one Redis (REDIS_URL, else a
// miniredis of the test's own), in a workspace of its own so that what one
// test stores in Redis is never seen by another.
type replicaSet struct {
	t    *testing.T
	emu  *slackemu.Server
	llm  *llmemu.Server
	team string
	env  map[string]string
	ctx  context.Context
	reps []*replica
	// redis is a client of the replicas' Redis, for looking at what they
	// stored.
	redis *redis.Client
}

type replica struct {
	addr string
	logs *syncBuffer
}

// newReplicaSet prepares the environment; start runs replicas. The model
// calls the tool a message names ("call <tool> [json args]") and then
// answers "RESULT: " and the tool's output.
func newReplicaSet(t *testing.T, env map[string]string) *replicaSet {
	t.Helper()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	team := "T" + strings.ToUpper(hex.EncodeToString(rnd[:]))
	teams := slackemu.DefaultTeams()
	teams[0].ID = team
	emu := slackemu.New(slackemu.Options{Teams: teams, NoRateLimits: true})
	t.Cleanup(emu.Close)
	llm := llmemu.New(llmemu.Options{TokenInterval: time.Millisecond, Respond: toolResponder})
	t.Cleanup(llm.Close)
	redisURL := os.Getenv("REDIS_URL")
	if redisURL == "" {
		mr := miniredis.RunT(t)
		redisURL = "redis://" + mr.Addr() + "/0"
	}
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { _ = rc.Close() })
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	base := map[string]string{
		"SLACK_BOT_TOKEN":            slackemu.BotToken,
		"SLACK_APP_TOKEN":            slackemu.AppToken,
		"SLACK_API_URL":              emu.APIURL(),
		"REDIS_URL":                  redisURL,
		"LLM_PROVIDER":               "openai",
		"LLM_BASE_URL":               llm.URL() + "/v1",
		"LLM_API_KEY":                "sk-test",
		"LLM_MODEL":                  "gpt-4o",
		"LOG_LEVEL":                  "debug",
		"SECRET_KEY":                 base64.StdEncoding.EncodeToString(key),
		"MCP_ALLOW_PRIVATE_NETWORKS": "true",
		"STREAM_EDIT_INTERVAL":       "100ms",
		"SHUTDOWN_GRACE":             "4s",
		"LEASE_TTL":                  "3s",
	}
	maps.Copy(base, env)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &replicaSet{t: t, emu: emu, llm: llm, team: team, env: base, ctx: ctx, redis: rc}
}

// toolResponder is the fake model of these tests.
func toolResponder(r llmemu.Recorded) llmemu.Reply {
	if last := r.LastMessage(); last.Role == "tool" {
		return llmemu.Reply{Text: "RESULT: " + last.Text}
	}
	if _, rest, ok := strings.Cut(r.LastUserText(), "call "); ok {
		name, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if args = strings.TrimSpace(args); args == "" {
			args = "{}"
		}
		return llmemu.Reply{ToolCalls: []llmemu.ToolCall{{Name: name, Arguments: args}}}
	}
	return llmemu.Reply{Text: "ok"}
}

// start runs n more replicas and waits until each is ready.
func (rs *replicaSet) start(n int) {
	rs.t.Helper()
	for range n {
		r := &replica{addr: rs.env["HTTP_ADDR"], logs: &syncBuffer{}}
		if r.addr == "" || len(rs.reps) > 0 {
			r.addr = freeAddr(rs.t)
		}
		env := maps.Clone(rs.env)
		env["HTTP_ADDR"] = r.addr
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- run(ctx, envFunc(env), r.logs, io.Discard) }()
		rs.t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				rs.t.Errorf("replica %s: %v", r.addr, err)
			}
			if rs.t.Failed() && os.Getenv("E2E_LOGS") != "" {
				rs.t.Logf("logs of %s:\n%s", r.addr, r.logs.String())
			}
		})
		rs.reps = append(rs.reps, r)
		rs.waitFor("replica "+r.addr+" ready", func() bool {
			code, _ := rs.get(r, "/readyz")
			return code == http.StatusOK
		})
	}
}

func (rs *replicaSet) waitFor(what string, cond func() bool) {
	rs.t.Helper()
	ctx, cancel := context.WithTimeout(rs.ctx, 30*time.Second)
	defer cancel()
	if err := rs.emu.WaitFor(ctx, cond); err != nil {
		rs.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// get fetches path from a replica's HTTP server.
func (rs *replicaSet) get(r *replica, path string) (int, string) {
	req, _ := http.NewRequestWithContext(rs.ctx, http.MethodGet, "http://"+r.addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// other is a replica that did not log every one of subs (the one that
// did made a link, say: a callback to the other proves it works anywhere).
func (rs *replicaSet) other(subs ...string) *replica {
	rs.t.Helper()
	var did *replica
	rs.waitFor("a replica logging "+strings.Join(subs, " "), func() bool {
		for _, r := range rs.reps {
			for _, line := range strings.Split(r.logs.String(), "\n") {
				all := true
				for _, s := range subs {
					all = all && strings.Contains(line, s)
				}
				if all {
					did = r
					return true
				}
			}
		}
		return false
	})
	for _, r := range rs.reps {
		if r != did {
			return r
		}
	}
	return did
}

// ephemeralText is what an ephemeral message shows: text and blocks.
func ephemeralText(e slackemu.Ephemeral) string { return e.Text + "\n" + jsonText(e.Blocks) }

// jsonText is blocks JSON with <, > and & as the reader sees them.
func jsonText(raw []byte) string {
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(raw))
}

// slash runs /bobbin as user and returns the first answer (ephemeral)
// that contains want.
func (rs *replicaSet) slash(user, text, want string) slackemu.Ephemeral {
	rs.t.Helper()
	before := len(rs.emu.Ephemerals(user))
	in := rs.emu.SlashCommand(rs.team, slackemu.ChannelGen, user, "/bobbin", text)
	if _, err := in.Wait(rs.ctx); err != nil {
		rs.t.Fatalf("/bobbin %s: %v", text, err)
	}
	return rs.ephemeral(user, before, want, "/bobbin "+text)
}

// ephemeral waits for an ephemeral message to user, after the first
// `after` ones, that contains want.
func (rs *replicaSet) ephemeral(user string, after int, want, what string) slackemu.Ephemeral {
	rs.t.Helper()
	var got slackemu.Ephemeral
	var seen []string
	ctx, cancel := context.WithTimeout(rs.ctx, 30*time.Second)
	defer cancel()
	err := rs.emu.WaitFor(ctx, func() bool {
		seen = seen[:0]
		es := rs.emu.Ephemerals(user)
		for _, e := range es[min(after, len(es)):] {
			seen = append(seen, ephemeralText(e))
			if strings.Contains(ephemeralText(e), want) {
				got = e
				return true
			}
		}
		return false
	})
	if err != nil {
		rs.t.Fatalf("%s: no answer to %s containing %q; got %q", what, user, want, seen)
	}
	return got
}

// mention starts a thread as user; it returns the thread ts.
func (rs *replicaSet) mention(user, text string) string {
	return rs.emu.Mention(rs.team, slackemu.ChannelGen, user, text, "").TS
}

// threadText is everything the bot shows in a thread (texts and blocks).
func (rs *replicaSet) threadText(thread string) string {
	var b strings.Builder
	for _, m := range rs.emu.BotReplies(slackemu.ChannelGen, thread) {
		b.WriteString(m.Text + "\n" + m.MarkdownText + "\n" + jsonText(m.Blocks) + "\n")
	}
	return b.String()
}

// waitThread waits until the thread shows want.
func (rs *replicaSet) waitThread(thread, want string) {
	rs.t.Helper()
	ctx, cancel := context.WithTimeout(rs.ctx, 30*time.Second)
	defer cancel()
	if err := rs.emu.WaitFor(ctx, func() bool { return strings.Contains(rs.threadText(thread), want) }); err != nil {
		rs.t.Fatalf("thread %s never showed %q; it shows:\n%s", thread, want, rs.threadText(thread))
	}
}

// buttonMessage waits for a bot message in thread with a button actionID
// and returns its ts.
func (rs *replicaSet) buttonMessage(thread, actionID string) string {
	rs.t.Helper()
	var ts string
	rs.waitFor("a message with "+actionID+" in "+thread, func() bool {
		for _, m := range rs.emu.BotReplies(slackemu.ChannelGen, thread) {
			if strings.Contains(string(m.Blocks), `"action_id":"`+actionID+`"`) {
				ts = m.TS
				return true
			}
		}
		return false
	})
	return ts
}

// click presses a button of a channel message (or ephemeral) as user and
// waits for the ack.
func (rs *replicaSet) click(user, ts, actionID string) *slackemu.Interaction {
	rs.t.Helper()
	in, err := rs.emu.Click(rs.team, user, slackemu.ChannelGen, ts, actionID, "")
	if err != nil {
		rs.t.Fatalf("click %s: %v", actionID, err)
	}
	if _, err := in.Wait(rs.ctx); err != nil {
		rs.t.Fatalf("click %s not acked: %v", actionID, err)
	}
	return in
}

// allow answers the next approval prompt of thread with Allow once.
func (rs *replicaSet) allow(user, thread string) {
	rs.t.Helper()
	var ts string
	rs.waitFor("an open approval prompt in "+thread, func() bool {
		for _, m := range rs.emu.BotReplies(slackemu.ChannelGen, thread) {
			if strings.Contains(string(m.Blocks), `"action_id":"bobbin_allow_once"`) {
				ts = m.TS
				return true
			}
		}
		return false
	})
	rs.click(user, ts, "bobbin_allow_once")
}

// buttonURL returns the url of the button actionID in blocks.
func buttonURL(t *testing.T, blocks json.RawMessage, actionID string) string {
	t.Helper()
	var bs []struct {
		Elements  []map[string]any `json:"elements"`
		Accessory map[string]any   `json:"accessory"`
	}
	if err := json.Unmarshal(blocks, &bs); err != nil {
		t.Fatalf("blocks: %v", err)
	}
	for _, b := range bs {
		for _, e := range append(b.Elements, b.Accessory) {
			if e != nil && e["action_id"] == actionID {
				u, _ := e["url"].(string)
				return u
			}
		}
	}
	t.Fatalf("no button %s in %s", actionID, blocks)
	return ""
}

// rawRedis is every value stored in the replicas' Redis, as Redis has it.
func (rs *replicaSet) rawRedis() string {
	ctx := rs.ctx
	var b strings.Builder
	iter := rs.redis.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		b.WriteString(k + "\n")
		switch rs.redis.Type(ctx, k).Val() {
		case "string":
			b.WriteString(rs.redis.Get(ctx, k).Val())
		case "hash":
			for f, v := range rs.redis.HGetAll(ctx, k).Val() {
				b.WriteString(f + "=" + v + "\n")
			}
		case "list":
			b.WriteString(strings.Join(rs.redis.LRange(ctx, k, 0, -1).Val(), "\n"))
		case "set":
			b.WriteString(strings.Join(rs.redis.SMembers(ctx, k).Val(), "\n"))
		case "stream":
			for _, m := range rs.redis.XRange(ctx, k, "-", "+").Val() {
				raw, _ := json.Marshal(m.Values)
				b.Write(raw)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// leaks reports where needle shows up: Slack calls, logs, Redis.
func (rs *replicaSet) leaks(needle string) []string {
	var out []string
	for _, c := range rs.emu.Journal() {
		if raw, _ := json.Marshal(c.Params); strings.Contains(string(raw), needle) {
			out = append(out, "Slack call "+c.Method)
		}
	}
	for _, r := range rs.reps {
		if strings.Contains(r.logs.String(), needle) {
			out = append(out, "logs of "+r.addr)
		}
	}
	if strings.Contains(rs.rawRedis(), needle) {
		out = append(out, "Redis")
	}
	return out
}
