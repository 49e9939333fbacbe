package bot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// lastUserText is the text of the last user message of a recorded Chat
// Completions request.
func lastUserText(t *testing.T, body []byte) string {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return string(req.Messages[i].Content)
		}
	}
	return ""
}

// TestE2EAssistantPaneContext: the channel the person views in the
// assistant pane reaches the model, at the thread's first message and
// again after assistant_thread_context_changed, and only when it changed.
func TestE2EAssistantPaneContext(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	p := h.emu.AssistantThreadStarted(slackemu.TeamID, slackemu.UserAlice, slackemu.DMAlice, slackemu.ChannelGen)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := h.emu.WaitAck(ctx, p.Envelope); err != nil {
		t.Fatal(err)
	}
	ask := func(text string, n int) string {
		t.Helper()
		h.emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, text, p.TS)
		reqs, err := h.llm.WaitRequests(ctx, n)
		if err != nil {
			t.Fatalf("waiting for model request %d: %v", n, err)
		}
		h.wait("turn done", func() bool { _, _, done := h.replyText(slackemu.DMAlice, p.TS); return done })
		return lastUserText(t, reqs[n-1].Body)
	}
	if got := ask("first question", 1); !strings.Contains(got, "viewing the channel #general (C111)") || !strings.Contains(got, "first question") {
		t.Errorf("first message to the model = %s, want the pane's channel #general and the text", got)
	}

	env, _ := h.emu.DeliverEvent(slackemu.TeamID, map[string]any{
		"type": "assistant_thread_context_changed",
		"assistant_thread": map[string]any{
			"user_id": slackemu.UserAlice, "channel_id": slackemu.DMAlice, "thread_ts": p.TS,
			"context": map[string]any{"channel_id": slackemu.ChannelRandom, "team_id": slackemu.TeamID},
		},
		"event_ts": fmt.Sprintf("%d.000000", time.Now().Add(time.Minute).Unix()),
	})
	if _, err := h.emu.WaitAck(ctx, env); err != nil {
		t.Fatal(err)
	}
	if got := ask("second question", 2); !strings.Contains(got, "viewing the channel #random (C222)") {
		t.Errorf("after the pane moved, the model got %s, want #random", got)
	}
	if got := ask("third question", 3); strings.Contains(got, "[Slack:") {
		t.Errorf("the pane did not move, yet the model was told again: %s", got)
	}
}
