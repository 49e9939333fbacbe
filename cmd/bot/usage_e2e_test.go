package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestUsageMatchesProviders: the metered usage equals what the emulated
// providers reported, for both protocols (OpenAI for the environment's
// model, Anthropic for a profile's), cached input included; /bobbin usage
// and /metrics agree.
func TestUsageMatchesProviders(t *testing.T) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	openModel, anthModel := "m-open-"+id, "m-anth-"+id
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	defer emu.Close()
	llm := llmemu.New(llmemu.Options{TokenInterval: time.Millisecond})
	defer llm.Close()
	llm.SetResponder(func(r llmemu.Recorded) llmemu.Reply {
		if r.Protocol == llmemu.Anthropic {
			return llmemu.Reply{Text: "anthropic says hi", Usage: &llmemu.Usage{InputTokens: 2000, CachedTokens: 1500, OutputTokens: 70}}
		}
		return llmemu.Reply{Text: "openai says hi", Usage: &llmemu.Usage{InputTokens: 1000, CachedTokens: 400, OutputTokens: 50}}
	})
	env := profilesEnv(t, emu, llm, `
profiles:
  - name: anth
    model: `+anthModel+`
    provider: anth
dm: anth
providers:
  anth:
    kind: anthropic
    base_url: `+llm.URL()+`
    api_key: ${SMALL_KEY}
`)
	env["LLM_MODEL"] = openModel
	logs, stop := startRun(t, env)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := emu.WaitFor(ctx, func() bool { return emu.LiveConnections() > 0 }); err != nil {
		t.Fatalf("bot did not connect: %v", err)
	}
	emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "via openai", "")
	emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "via anthropic", "")
	if err := emu.WaitFor(ctx, func() bool { return strings.Count(logs.String(), "bot: turn done") >= 2 }); err != nil {
		t.Fatal("the two turns did not finish")
	}
	m := metrics(t, env["HTTP_ADDR"])
	for _, want := range []string{
		fmt.Sprintf(`bobbin_model_tokens_total{kind="input",model=%q} 600`, openModel),
		fmt.Sprintf(`bobbin_model_tokens_total{kind="cached_input",model=%q} 400`, openModel),
		fmt.Sprintf(`bobbin_model_tokens_total{kind="output",model=%q} 50`, openModel),
		fmt.Sprintf(`bobbin_model_tokens_total{kind="input",model=%q} 500`, anthModel),
		fmt.Sprintf(`bobbin_model_tokens_total{kind="cached_input",model=%q} 1500`, anthModel),
		fmt.Sprintf(`bobbin_model_tokens_total{kind="output",model=%q} 70`, anthModel),
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	in := emu.SlashCommand(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAdmin, "/bobbin", "usage")
	if _, err := in.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var report string
	if err := emu.WaitFor(ctx, func() bool {
		for _, e := range emu.Ephemerals(slackemu.UserAdmin) {
			if strings.Contains(e.Text, "This month") {
				report = e.Text
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal("no usage report")
	}
	for _, want := range []string{"`" + openModel + "` 1050 tokens", "`" + anthModel + "` 2070 tokens"} {
		if !strings.Contains(report, want) {
			t.Errorf("usage report lacks %q:\n%s", want, report)
		}
	}
}
