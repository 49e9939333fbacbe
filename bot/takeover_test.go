package bot_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// TestTakeoverOfOrphanedTurns plays a replica that died mid-turn (it holds
// no lease any more but left the thread in the active-turns index): the
// running bot's orphan scan must take each thread over and end it with
// exactly one answer. Cases: the person's message was never answered (the
// model is asked again), and the answer was complete but its delivery was
// not recorded (it is delivered into the same message, not posted twice).
func TestTakeoverOfOrphanedTurns(t *testing.T) {
	h := newHarness(t, harnessOpts{emu: slackemu.Options{NoRateLimits: true}})
	ctx := context.Background()
	h.llm.SetResponder(func(llmemu.Recorded) llmemu.Reply { return llmemu.Reply{Text: "The resumed answer one."} })
	tests := []struct {
		name     string
		msgs     []provider.Message
		posted   bool // the dead replica had posted its reply
		want     string
		llmCalls int
	}{
		{"unanswered", []provider.Message{{Role: provider.RoleUser, Content: "question one", UserID: slackemu.UserAlice}},
			true, "The resumed answer one.", 1},
		{"answered, delivery cut", []provider.Message{
			{Role: provider.RoleUser, Content: "question two", UserID: slackemu.UserAlice},
			{Role: provider.RoleAssistant, Content: "The complete answer two."}},
			true, "The complete answer two.", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(h.llm.Requests())
			root := h.emu.PostUserMessage(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "<@"+slackemu.BotUserID+"> "+tt.name, "")
			k := session.ThreadKey{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, ThreadTS: root}
			dead, err := h.store.Acquire(ctx, k, "deadreplica")
			if err != nil {
				t.Fatal(err)
			}
			if err := h.store.Append(ctx, k, dead.Token(), tt.msgs...); err != nil {
				t.Fatal(err)
			}
			meta := session.Meta{Model: "gpt-4o", TurnID: "turn" + strings.ReplaceAll(tt.name, " ", ""), RequesterID: slackemu.UserAlice, Phase: "model"}
			if err := h.store.SaveMeta(ctx, k, dead.Token(), meta); err != nil {
				t.Fatal(err)
			}
			var oldTS string
			if tt.posted {
				oldTS = postAsBot(t, h.emu, slackemu.ChannelGen, root, "partial…")
				if err := h.store.SaveReply(ctx, k, dead.Token(), meta.TurnID, oldTS); err != nil {
					t.Fatal(err)
				}
			}
			// The lease runs out (Handover: released, still indexed).
			if err := dead.Handover(ctx); err != nil {
				t.Fatal(err)
			}
			var got []slackemu.Message
			h.wait("the orphaned turn finished", func() bool {
				got = nil
				for _, m := range h.emu.BotReplies(slackemu.ChannelGen, root) {
					if strings.Contains(m.Visible(), tt.want) {
						got = append(got, m)
					}
				}
				return len(got) > 0
			})
			time.Sleep(300 * time.Millisecond)
			n := 0
			for _, m := range h.emu.BotReplies(slackemu.ChannelGen, root) {
				if strings.Contains(m.Visible(), tt.want) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d messages show the answer %q, want 1", n, tt.want)
			}
			if calls := len(h.llm.Requests()) - before; calls != tt.llmCalls {
				t.Errorf("model called %d times, want %d", calls, tt.llmCalls)
			}
			meta2, _, err := h.store.Load(ctx, k)
			if err != nil || meta2.Phase != "done" {
				t.Errorf("after takeover: phase %q, err %v; want done", meta2.Phase, err)
			}
			if m, _ := h.emu.MessageAt(slackemu.ChannelGen, oldTS); tt.llmCalls > 0 && !strings.Contains(m.Visible(), "was interrupted") {
				t.Errorf("the half-streamed message shows %q, want it marked interrupted", m.Visible())
			}
			if tt.llmCalls == 0 && got[0].TS != oldTS {
				t.Errorf("a complete answer was posted as a new message %s; want the dead replica's message %s finished", got[0].TS, oldTS)
			}
		})
	}
}

// postAsBot posts a message with the bot's token, as the dead replica did.
func postAsBot(t *testing.T, emu *slackemu.Server, channel, threadTS, text string) string {
	t.Helper()
	resp, err := http.PostForm(emu.APIURL()+"chat.postMessage", url.Values{
		"token": {slackemu.BotToken}, "channel": {channel}, "thread_ts": {threadTS}, "text": {text}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		OK    bool   `json:"ok"`
		TS    string `json:"ts"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || !out.OK {
		t.Fatalf("chat.postMessage: %v %s", err, out.Error)
	}
	return out.TS
}
