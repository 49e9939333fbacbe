package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestModelErrorsInThread: a model endpoint that is down, refuses the key
// or does not know the model, with both providers. The thread says which
// of these it is and where to look; it never shows the key.
func TestModelErrorsInThread(t *testing.T) {
	const key = "sk-canary-model-key-987654"
	// A port nothing listens on: the endpoint is down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()

	for _, provider := range []string{"openai", "anthropic"} {
		for _, tc := range []struct {
			name  string
			reply *llmemu.ErrorReply // nil: the endpoint is down (or wrongKey)
			wrong bool
			want  []string
		}{
			{name: "down", want: []string{"couldn't reach the model endpoint", "`LLM_BASE_URL`", "bot's log"}},
			{name: "bad key", wrong: true, want: []string{"refused the bot's API key", "HTTP 401", "`LLM_API_KEY`", "bot's log"}},
			{name: "forbidden", reply: &llmemu.ErrorReply{Status: 403}, want: []string{"refused the bot's API key", "HTTP 403", "`LLM_API_KEY`"}},
			{name: "unknown model", reply: unknownModelReply(provider), want: []string{"does not know the model", "HTTP 404", "`LLM_MODEL`", "bot's log"}},
		} {
			t.Run(provider+"/"+tc.name, func(t *testing.T) {
				emu := slackemu.New(slackemu.Options{})
				defer emu.Close()
				llm := llmemu.New(llmemu.Options{APIKey: key})
				defer llm.Close()
				if tc.reply != nil {
					llm.SetResponder(func(llmemu.Recorded) llmemu.Reply { return llmemu.Reply{Error: tc.reply} })
				}
				base := llm.URL()
				if tc.name == "down" {
					base = down
				}
				if provider == "openai" {
					base += "/v1"
				}
				sent := key
				if tc.wrong {
					sent = "sk-wrong-canary-key-123123"
				}
				env := map[string]string{
					"SLACK_BOT_TOKEN":      slackemu.BotToken,
					"SLACK_APP_TOKEN":      slackemu.AppToken,
					"SLACK_API_URL":        emu.APIURL(),
					"REDIS_URL":            os.Getenv("REDIS_URL"),
					"LLM_PROVIDER":         provider,
					"LLM_BASE_URL":         base,
					"LLM_API_KEY":          sent,
					"LLM_MODEL":            "model-x",
					"HTTP_ADDR":            freeAddr(t),
					"STREAM_EDIT_INTERVAL": "100ms",
					"SHUTDOWN_GRACE":       "2s",
				}
				logs, stop := startRun(t, env)
				defer stop()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if err := emu.WaitFor(ctx, func() bool { return emu.LiveConnections() > 0 }); err != nil {
					t.Fatal(err)
				}
				asked := time.Now()
				p := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "hello", "")
				var text string
				err := emu.WaitFor(ctx, func() bool {
					for _, m := range emu.BotReplies(slackemu.ChannelGen, p.TS) {
						if v := m.Visible(); strings.Contains(v, "bot's log") || strings.Contains(v, "Sorry") {
							text = v
							return true
						}
					}
					return false
				})
				if err != nil {
					t.Fatalf("no failure notice in the thread: %v\nlogs:\n%s", err, logs.String())
				}
				t.Logf("%s after %s: %s", tc.name, time.Since(asked).Round(time.Millisecond), text)
				for _, w := range tc.want {
					if !strings.Contains(text, w) {
						t.Errorf("the thread says %q; want it to contain %q", text, w)
					}
				}
				for _, secret := range []string{key, sent, "canary"} {
					if strings.Contains(text, secret) {
						t.Errorf("the thread shows a secret: %q", text)
					}
				}
			})
		}
	}
}

func unknownModelReply(provider string) *llmemu.ErrorReply {
	if provider == "anthropic" {
		return &llmemu.ErrorReply{Status: 404, Type: "not_found_error", Message: "model: model-x"}
	}
	return &llmemu.ErrorReply{Status: 404, Code: "model_not_found", Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", "model-x")}
}
