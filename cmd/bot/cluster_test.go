package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/rediscluster"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestRunAgainstRedisCluster runs the whole program with REDIS_URL naming a
// real three-primary Redis Cluster and answers a mention, then a follow-up
// in the same thread (the session, lease, queue and dedupe keys of one
// thread share a hash slot; the workspace's keys and the rate budgets live
// on other nodes).
func TestRunAgainstRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no Redis Cluster")
	}
	if why := rediscluster.Available(); why != "" {
		t.Skip("no Redis Cluster: " + why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cluster, err := rediscluster.Start(ctx, t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()

	emu := slackemu.New(slackemu.Options{})
	defer emu.Close()
	llm := llmemu.New(llmemu.Options{})
	defer llm.Close()
	env := map[string]string{
		"SLACK_BOT_TOKEN": slackemu.BotToken,
		"SLACK_APP_TOKEN": slackemu.AppToken,
		"SLACK_API_URL":   emu.APIURL(),
		"REDIS_URL":       cluster.URL(),
		"LLM_PROVIDER":    "openai",
		"LLM_BASE_URL":    llm.URL() + "/v1",
		"LLM_MODEL":       "gpt-4o",
		"HTTP_ADDR":       freeAddr(t),
		"SHUTDOWN_GRACE":  "4s",
	}
	logs, stop := startRun(t, env)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	p := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "hello cluster", "")
	if err := emu.WaitFor(ctx, func() bool {
		r := emu.BotReplies(slackemu.ChannelGen, p.TS)
		return len(r) == 1 && strings.Contains(r[0].Text, "hello cluster") && !strings.Contains(string(r[0].Blocks), "bobbin_stop")
	}); err != nil {
		t.Fatalf("no reply: %v\nlogs:\n%s", err, logs.String())
	}
	emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "and again", p.TS)
	if err := emu.WaitFor(ctx, func() bool {
		r := emu.BotReplies(slackemu.ChannelGen, p.TS)
		return len(r) == 2 && strings.Contains(r[1].Text, "and again") && !strings.Contains(string(r[1].Blocks), "bobbin_stop")
	}); err != nil {
		t.Fatalf("no second reply: %v\nlogs:\n%s", err, logs.String())
	}
	if strings.Contains(logs.String(), "CROSSSLOT") {
		t.Errorf("a command crossed hash slots:\n%s", logs.String())
	}
}
