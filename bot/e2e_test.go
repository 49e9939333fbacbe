package bot_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/anthropic"
	"github.com/bobbinbot/bobbin/provider/openai"
	"github.com/bobbinbot/bobbin/session"
)

// harness is a bot wired to the Slack emulator, the fake model server and
// Redis (REDIS_URL, else the embedded one), the way cmd/bot wires it.
type harness struct {
	t     testing.TB
	emu   *slackemu.Server
	llm   *llmemu.Server
	store *session.Store
	opts  bot.Options

	// newAgent builds the model side as a new process would (an empty
	// media cache): for restarts.
	newAgent func() *agent.Agent

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
	bot    *bot.Bot // the running bot
}

type harnessOpts struct {
	emu  slackemu.Options
	bot  func(*bot.Options)
	llm  llmemu.Options
	logs bool
	// provider is "openai" (default) or "anthropic"; agent tweaks the
	// agent's options.
	provider string
	agent    func(*agent.Options)
	// modelClient carries the model requests (nil: the provider's own).
	modelClient *http.Client
}

func newHarness(t testing.TB, ho harnessOpts) *harness {
	t.Helper()
	ctx := context.Background()
	emu := slackemu.New(ho.emu)
	t.Cleanup(emu.Close)
	if ho.llm.TokenInterval == 0 {
		ho.llm.TokenInterval = time.Millisecond
	}
	llm := llmemu.New(ho.llm)
	t.Cleanup(llm.Close)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	store, err := session.Open(ctx, session.Options{URL: os.Getenv("REDIS_URL"), Prefix: "bt" + hex.EncodeToString(rnd[:]), LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	var prov provider.Provider = openai.New(openai.Options{ClientOptions: provider.ClientOptions{BaseURL: llm.URL() + "/v1", APIKey: "sk-test", HTTPClient: ho.modelClient}})
	model := "gpt-4o"
	if ho.provider == "anthropic" {
		prov = anthropic.New(anthropic.Options{ClientOptions: provider.ClientOptions{BaseURL: llm.URL(), APIKey: "sk-test", HTTPClient: ho.modelClient}})
		model = "claude-sonnet-4-5"
	}
	newAgent := func() *agent.Agent {
		ao := agent.Options{Model: model}
		if ho.agent != nil {
			ho.agent(&ao)
		}
		return agent.New(prov, ao)
	}
	log := slog.New(slog.DiscardHandler)
	if ho.logs || os.Getenv("BOT_TEST_LOGS") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	opts := bot.Options{
		BotToken:         slackemu.BotToken,
		AppToken:         slackemu.AppToken,
		APIURL:           emu.APIURL(),
		Store:            store,
		Agent:            newAgent(),
		Logger:           log,
		Model:            model,
		EditInterval:     100 * time.Millisecond,
		ShutdownGrace:    4 * time.Second,
		UpdatesPerMinute: 45,
	}
	if ho.bot != nil {
		ho.bot(&opts)
	}
	h := &harness{t: t, emu: emu, llm: llm, store: store, opts: opts, newAgent: newAgent}
	h.start()
	t.Cleanup(h.stop)
	return h
}

// start runs a bot (a new process, as far as Slack can tell).
func (h *harness) start() {
	h.t.Helper()
	b, err := bot.New(h.opts)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	h.mu.Lock()
	h.cancel, h.done, h.bot = cancel, done, b
	h.mu.Unlock()
	h.wait("socket connected", func() bool { return b.Ready(context.Background()) == nil })
}

// stop shuts the bot down and waits for it.
func (h *harness) stop() {
	h.mu.Lock()
	cancel, done := h.cancel, h.done
	h.cancel, h.done = nil, nil
	h.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	if err := <-done; err != nil {
		h.t.Errorf("bot.Run: %v", err)
	}
}

func (h *harness) wait(what string, cond func() bool) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.emu.WaitFor(ctx, cond); err != nil {
		h.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// replyText is what the bot's reply in a thread shows, unescaped, pieces
// joined by a blank line; done is false while any piece still streams or
// still carries the Stop button.
func (h *harness) replyText(channel, thread string) (text string, n int, done bool) {
	var parts []string
	done = true
	msgs := h.emu.BotReplies(channel, thread)
	for _, m := range msgs {
		if m.Deleted {
			continue
		}
		if strings.Contains(string(m.Blocks), bot.SignBlockID) {
			done = false // a sign of life, deleted once the reply shows
			continue
		}
		s, live := messageText(m)
		if live || m.Streaming {
			done = false
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "\n\n"), len(parts), done && len(parts) > 0
}

func messageText(m slackemu.Message) (text string, live bool) {
	if m.MarkdownText != "" {
		return unescape(m.MarkdownText), false
	}
	var blocks []struct {
		Type     string `json:"type"`
		Text     any    `json:"text"`
		Elements []struct {
			ActionID string `json:"action_id"`
		} `json:"elements"`
	}
	_ = json.Unmarshal(m.Blocks, &blocks)
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "markdown":
			if s, ok := b.Text.(string); ok {
				parts = append(parts, unescape(s))
			}
		case "actions":
			for _, e := range b.Elements {
				if e.ActionID == "bobbin_stop" {
					live = true
				}
			}
		}
	}
	if len(parts) == 0 && len(blocks) == 0 {
		return unescape(m.Text), live
	}
	return strings.Join(parts, "\n"), live
}

func unescape(s string) string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}

// lastAnswer is the default answer to the last model request.
func (h *harness) lastAnswer() string {
	reqs := h.llm.Requests()
	if len(reqs) == 0 {
		h.t.Fatal("no model request")
	}
	return llmemu.AnswerFor(reqs[len(reqs)-1].LastUserText())
}

// waitReply waits until the thread's reply is complete and returns it.
func (h *harness) waitReply(channel, thread string) string {
	h.t.Helper()
	var text string
	h.wait("reply in "+thread, func() bool {
		var done bool
		text, _, done = h.replyText(channel, thread)
		return done
	})
	return text
}

// waitLiveReply waits until the bot's reply in the thread is streaming
// (still live) and returns its ts.
func (h *harness) waitLiveReply(channel, thread string) string {
	h.t.Helper()
	var ts string
	h.wait("a live reply", func() bool {
		for _, m := range h.emu.BotReplies(channel, thread) {
			if _, live := messageText(m); live {
				ts = m.TS
				return true
			}
		}
		return false
	})
	return ts
}

func TestE2EMentionStreamsReply(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.llm.SetTokenInterval(5 * time.Millisecond)
	// Slack escapes &, < and > in message text; the model reads what was typed.
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "hello there: is a &lt;b&gt; tag &amp; more ok?", "")
	got := h.waitReply(slackemu.ChannelGen, p.TS)
	if want := h.lastAnswer(); got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}
	replies := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
	if len(replies) != 1 {
		t.Fatalf("got %d bot replies, want 1", len(replies))
	}
	m := replies[0]
	if m.UnfurlLinks == nil || *m.UnfurlLinks || m.UnfurlMedia == nil || *m.UnfurlMedia {
		t.Errorf("reply unfurls: links %v media %v", m.UnfurlLinks, m.UnfurlMedia)
	}
	if len(m.History) < 2 {
		t.Errorf("reply has %d versions, want a streamed reply (post then edits)", len(m.History))
	}
	// Every post and edit turns unfurls off.
	for _, method := range []string{"chat.postMessage", "chat.update"} {
		for _, c := range h.emu.Calls(method) {
			if fmt.Sprint(c.Params["unfurl_links"]) != "false" || fmt.Sprint(c.Params["unfurl_media"]) != "false" {
				t.Errorf("%s without unfurls off: %v", method, c.Params)
			}
		}
	}
	// The model saw who spoke.
	reqs := h.llm.Requests()
	if len(reqs) == 0 || !strings.Contains(reqs[0].LastUserText(), "alice") {
		t.Errorf("model request does not name the speaker: %+v", reqs)
	}
	if len(reqs) > 0 && !strings.Contains(reqs[0].LastUserText(), "is a <b> tag & more ok?") {
		t.Errorf("model read %q, want Slack's escaping undone", reqs[0].LastUserText())
	}
}

// noLeaks fails t if goroutines started during the test outlive its
// clean-ups (registered first, it runs last). Idle HTTP keep-alive
// connections are not leaks.
func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, opt,
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
	})
}

func TestE2EFollowUpAndRestartKeepHistory(t *testing.T) {
	noLeaks(t)
	h := newHarness(t, harnessOpts{})
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "first question", "")
	h.waitReply(slackemu.ChannelGen, p.TS)

	// A plain reply in the thread continues the session without a mention.
	h.emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserBob, "second question", p.TS)
	h.wait("second reply", func() bool {
		_, n, done := h.replyText(slackemu.ChannelGen, p.TS)
		return n == 2 && done
	})

	// A restarted bot keeps the history.
	h.stop()
	h.start()
	h.emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "third question", p.TS)
	h.wait("third reply", func() bool {
		_, n, done := h.replyText(slackemu.ChannelGen, p.TS)
		return n == 3 && done
	})
	reqs := h.llm.Requests()
	last := reqs[len(reqs)-1]
	var users []string
	for _, m := range last.Messages {
		if m.Role == "user" {
			users = append(users, m.Text)
		}
	}
	joined := strings.Join(users, "|")
	for _, q := range []string{"first question", "second question", "third question", "bob"} {
		if !strings.Contains(joined, q) {
			t.Errorf("last model request lacks %q: %q", q, joined)
		}
	}
	// A plain message in a thread without a session is ignored.
	other := h.emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "not for the bot", "")
	h.emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserBob, "reply", other.TS)
	time.Sleep(300 * time.Millisecond)
	if n := len(h.emu.BotReplies(slackemu.ChannelGen, other.TS)); n != 0 {
		t.Errorf("bot answered %d times in a thread it was not part of", n)
	}
}

func TestE2EDuplicatesGiveOneReply(t *testing.T) {
	h := newHarness(t, harnessOpts{emu: slackemu.Options{MessageEventsOnMention: true}})
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "only once please", "")
	if err := h.emu.Redeliver(p.Envelope); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.emu.Resend(p.Envelope); err != nil {
		t.Fatal(err)
	}
	h.waitReply(slackemu.ChannelGen, p.TS)
	// Let any duplicate turn show up.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, e := range h.emu.Envelopes() {
		if _, err := h.emu.WaitAck(ctx, e.ID); err != nil {
			t.Fatalf("envelope %s not acked: %v", e.ID, err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(h.emu.BotReplies(slackemu.ChannelGen, p.TS)); n != 1 {
		t.Errorf("got %d replies, want exactly 1", n)
	}
	if n := len(h.llm.Requests()); n != 1 {
		t.Errorf("model called %d times, want 1", n)
	}
}

func TestE2EDirectMessage(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	p := h.emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "hi in a DM", "")
	got := h.waitReply(slackemu.DMAlice, p.TS)
	if want := h.lastAnswer(); got != want || !strings.Contains(got, "hi in a DM") {
		t.Errorf("reply = %q, want %q", got, want)
	}
}

func TestE2ELongMarkdownAnswer(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	var b strings.Builder
	b.WriteString("# Report\n\n")
	for i := 0; b.Len() < 9000; i++ {
		b.WriteString("Paragraph with **bold**, `code` and <!channel> text that goes on for a while to fill the space. ")
		b.WriteString("More words follow here so that the paragraph is long enough.\n\n")
		if i%5 == 4 {
			b.WriteString("```go\nfor i := 0; i < 10; i++ {\n\tfmt.Println(i)\n}\n```\n\n")
		}
	}
	answer := strings.TrimSpace(b.String())
	h.llm.Enqueue(llmemu.Reply{Text: answer})
	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "write a long report", "")
	got := h.waitReply(slackemu.ChannelGen, p.TS)
	squash := func(s string) string { return strings.Join(strings.Fields(s), "") }
	if squash(got) != squash(answer) {
		t.Errorf("long answer not delivered whole: got %d bytes, want %d", len(got), len(answer))
	}
	replies := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
	if len(replies) < 3 {
		t.Errorf("9 000 characters arrived in %d messages, want at least 3", len(replies))
	}
	for _, m := range replies {
		var blocks []struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(m.Blocks, &blocks); err != nil {
			t.Fatal(err)
		}
		raw := m.Text
		for _, b := range blocks {
			raw += b.Text
		}
		if strings.Contains(raw, "<!channel>") || !strings.Contains(raw, "&lt;!channel&gt;") {
			t.Errorf("message %s does not neutralize <!channel>", m.TS)
		}
		if len(m.Text) > 4000 {
			t.Errorf("message %s text is %d bytes", m.TS, len(m.Text))
		}
	}
}
