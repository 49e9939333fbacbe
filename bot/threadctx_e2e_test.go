package bot_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/session"
)

// providers are the two protocols every thread-context and file test runs
// against (real clients, llmemu).
var providers = []string{"openai", "anthropic"}

func eachProvider(t *testing.T, f func(t *testing.T, prov string)) {
	for _, p := range providers {
		t.Run(p, func(t *testing.T) { f(t, p) })
	}
}

// userText joins the text of a request's user messages.
func userText(r llmemu.Recorded) string {
	var parts []string
	for _, m := range r.Messages {
		if m.Role == "user" {
			parts = append(parts, m.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// inOrder reports whether every one of subs occurs in s, in that order.
func inOrder(s string, subs ...string) bool {
	for _, sub := range subs {
		i := strings.Index(s, sub)
		if i < 0 {
			return false
		}
		s = s[i+len(sub):]
	}
	return true
}

// post stores a message (failing the test on error).
func (h *harness) post(p slackemu.UserPost) slackemu.Posted {
	h.t.Helper()
	if p.Team == "" {
		p.Team = slackemu.TeamID
	}
	if p.Channel == "" {
		p.Channel = slackemu.ChannelGen
	}
	got, err := h.emu.Post(p)
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

// waitReplies waits until the bot has n finished replies in the thread
// besides the first skip bot posts, and returns the last one's text.
func (h *harness) waitReplies(channel, thread string, skip, n int) string {
	h.t.Helper()
	var last string
	h.wait("bot replies", func() bool {
		msgs := h.emu.BotReplies(channel, thread)
		if len(msgs) < skip+n {
			return false
		}
		for _, m := range msgs[skip:] {
			s, live := messageText(m)
			if live || m.Streaming {
				return false
			}
			last = s
		}
		return true
	})
	return last
}

// seedThread writes a thread people had before the bot was asked: Alice's
// question, Bob's answer (edited since), a reply deleted since, the bot's
// own earlier post and another app's. It returns the parent's ts.
func seedThread(h *harness) string {
	h.t.Helper()
	parent := h.post(slackemu.UserPost{User: slackemu.UserAlice, Text: "Checkout is failing with HTTP 502 since 09:40", Silent: true, TS: "1767600000.000100"})
	bob := h.post(slackemu.UserPost{User: slackemu.UserBob, Text: "I think it is the DB", ThreadTS: parent.TS, Silent: true, TS: "1767600060.000200"})
	if err := h.emu.EditMessage(slackemu.ChannelGen, bob.TS, "It is the payments gateway, not the DB"); err != nil {
		h.t.Fatal(err)
	}
	gone := h.post(slackemu.UserPost{User: slackemu.UserBob, Text: "oops wrong thread", ThreadTS: parent.TS, Silent: true, TS: "1767600120.000300"})
	if err := h.emu.DeleteMessage(slackemu.ChannelGen, gone.TS); err != nil {
		h.t.Fatal(err)
	}
	h.post(slackemu.UserPost{Text: "Earlier note from the bot: gateway status page is green", ThreadTS: parent.TS, AsApp: true, TS: "1767600180.000400"})
	h.post(slackemu.UserPost{Text: "ALERT payments-gw latency p99 4s", ThreadTS: parent.TS, BotID: "B0PAGER", BotName: "pager", Silent: true, TS: "1767600240.000500"})
	h.post(slackemu.UserPost{User: slackemu.UserAlice, Text: "Who owns the gateway?", ThreadTS: parent.TS, Silent: true, TS: "1767600300.000600"})
	return parent.TS
}

// TestE2EThreadContextImported: mentioned mid-thread, the bot reads the
// thread (one conversations.replies call) and the model gets the earlier
// messages with speakers and times, in order, as context; its own earlier
// post as assistant text; the edit as it stands; not the deleted reply.
func TestE2EThreadContextImported(t *testing.T) {
	eachProvider(t, func(t *testing.T, prov string) {
		h := newHarness(t, harnessOpts{provider: prov})
		parent := seedThread(h)
		h.post(slackemu.UserPost{User: slackemu.UserAdmin, Text: "summarize this and list the open questions", ThreadTS: parent, Mention: true})
		got := h.waitReplies(slackemu.ChannelGen, parent, 2, 1)
		if want := h.lastAnswer(); got != want {
			t.Errorf("reply = %q, want %q", got, want)
		}
		reqs := h.llm.Requests()
		if len(reqs) != 1 {
			t.Fatalf("%d model requests, want 1", len(reqs))
		}
		r := reqs[0]
		text := userText(r)
		if !inOrder(text, "before you were asked",
			"[alice ("+slackemu.UserAlice+"), 2026-01-05 08:00 UTC] Checkout is failing",
			"[bob ("+slackemu.UserBob+"), 2026-01-05 08:01 UTC] It is the payments gateway, not the DB (edited)",
			"[pager (app), 2026-01-05 08:04 UTC] ALERT",
			"[alice ("+slackemu.UserAlice+"), 2026-01-05 08:05 UTC] Who owns the gateway?",
			"summarize this and list the open questions") {
			t.Errorf("request's user text lacks the thread in order:\n%s", text)
		}
		for _, bad := range []string{"I think it is the DB", "oops wrong thread", "gateway status page is green"} {
			if strings.Contains(text, bad) {
				t.Errorf("user text has %q (an old edit, a deleted reply or the bot's own post as a person's words):\n%s", bad, text)
			}
		}
		own := false
		for _, m := range r.Messages {
			if m.Role == "assistant" && strings.Contains(m.Text, "gateway status page is green") {
				own = true
			}
		}
		if !own {
			t.Errorf("the bot's own earlier post is not assistant text: %+v", r.Messages)
		}
		if n := len(h.emu.Calls("conversations.replies")); n != 1 {
			t.Errorf("%d conversations.replies calls, want 1", n)
		}
		// The next turn's request repeats the first one's messages.
		h.emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "thanks, and who is on call?", parent)
		h.waitReplies(slackemu.ChannelGen, parent, 2, 2)
		next := h.llm.Requests()[1]
		if len(next.Messages) < len(r.Messages) {
			t.Fatalf("second request has %d messages, the first %d", len(next.Messages), len(r.Messages))
		}
		for i, m := range r.Messages[:len(r.Messages)-1] {
			if next.Messages[i].Text != m.Text || next.Messages[i].Role != m.Role {
				t.Errorf("message %d changed between requests: %q → %q", i, m.Text, next.Messages[i].Text)
			}
		}
		if n := len(h.emu.Calls("conversations.replies")); n != 1 {
			t.Errorf("%d conversations.replies calls after the second turn, want 1 (only the first turn reads the thread)", n)
		}
	})
}

// TestE2EThreadFollowupsMention: with THREAD_FOLLOWUPS=mention, a reply
// without a mention gets no answer but is in the next mention's request; a
// DM is still answered.
func TestE2EThreadFollowupsMention(t *testing.T) {
	eachProvider(t, func(t *testing.T, prov string) {
		h := newHarness(t, harnessOpts{provider: prov, bot: func(o *bot.Options) { o.ThreadFollowups = bot.FollowupsMention }})
		p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "start a retro thread", "")
		h.waitReplies(slackemu.ChannelGen, p.TS, 0, 1)
		k := session.ThreadKey{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, ThreadTS: p.TS}
		recorded := func(text string) {
			h.wait("a reply recorded as context", func() bool {
				_, msgs, err := h.store.Load(context.Background(), k)
				if err != nil {
					return false
				}
				for _, m := range msgs {
					if strings.Contains(m.Content, text) {
						return true
					}
				}
				return false
			})
		}
		// Slack does not promise delivery order: one at a time.
		h.emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserBob, "the deploy script skipped the canary", p.TS)
		recorded("skipped the canary")
		h.emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "and nobody was paged", p.TS)
		recorded("nobody was paged")
		if n := len(h.emu.BotReplies(slackemu.ChannelGen, p.TS)); n != 1 {
			t.Fatalf("%d bot replies after replies without a mention, want 1", n)
		}
		if n := len(h.llm.Requests()); n != 1 {
			t.Fatalf("%d model requests after replies without a mention, want 1", n)
		}
		h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "what went wrong?", p.TS)
		h.waitReplies(slackemu.ChannelGen, p.TS, 0, 2)
		reqs := h.llm.Requests()
		text := userText(reqs[len(reqs)-1])
		if !inOrder(text, "start a retro thread", "did not mention you",
			"[bob ("+slackemu.UserBob+")", "the deploy script skipped the canary",
			"[alice ("+slackemu.UserAlice+")", "and nobody was paged", "what went wrong?") {
			t.Errorf("mention's request lacks the recorded replies in order:\n%s", text)
		}
		dm := h.emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "hi in a DM", "")
		if got := h.waitReply(slackemu.DMAlice, dm.TS); !strings.Contains(got, "hi in a DM") {
			t.Errorf("DM reply = %q", got)
		}
	})
}

// TestE2EThreadContextNonMarketplace: under the non-Marketplace limit (1
// call a minute, 15 messages a page; SLACK_RATE_LIMITS says so) the first
// thread gets one page and a note, a second thread within the minute none;
// both are answered, and Slack never answers 429.
func TestE2EThreadContextNonMarketplace(t *testing.T) {
	limits := slackapi.DefaultRateLimits()
	limits["conversations.replies"] = slackapi.RateLimit{PerMinute: 1, Burst: 1}
	h := newHarness(t, harnessOpts{emu: slackemu.Options{NonMarketplace: true}, bot: func(o *bot.Options) { o.RateLimits = limits }})
	parent := h.post(slackemu.UserPost{User: slackemu.UserAlice, Text: "long thread", Silent: true, TS: "1767600000.000100"})
	for i := range 30 {
		h.post(slackemu.UserPost{User: slackemu.UserBob, Text: fmt.Sprintf("reply number %02d", i+1), ThreadTS: parent.TS, Silent: true})
	}
	h.post(slackemu.UserPost{User: slackemu.UserAlice, Text: "what did bob say?", ThreadTS: parent.TS, Mention: true})
	h.waitReplies(slackemu.ChannelGen, parent.TS, 0, 1)
	text := userText(h.llm.Requests()[0])
	if !inOrder(text, "not all of the thread could be read", "[alice ("+slackemu.UserAlice+"), 2026-01-05 08:00 UTC] long thread", "[bob ("+slackemu.UserBob+")", "reply number 01", "reply number 14", "what did bob say?") || strings.Contains(text, "reply number 15") {
		t.Errorf("first request should carry the first page only, with a note:\n%s", text)
	}
	other := h.post(slackemu.UserPost{User: slackemu.UserAlice, Text: "another thread", Silent: true})
	h.post(slackemu.UserPost{User: slackemu.UserBob, Text: "a reply", ThreadTS: other.TS, Silent: true})
	h.post(slackemu.UserPost{User: slackemu.UserAlice, Text: "and here?", ThreadTS: other.TS, Mention: true})
	h.waitReplies(slackemu.ChannelGen, other.TS, 0, 1)
	if text := userText(h.llm.Requests()[1]); strings.Contains(text, "another thread") || !inOrder(text, "earlier messages could not be read", "and here?") {
		t.Errorf("second request should have no context: %q", text)
	}
	if n := h.emu.RateLimited()["conversations.replies"]; n != 0 {
		t.Errorf("conversations.replies was rate-limited %d times; the governor should keep to 1 a minute", n)
	}
	if n := len(h.emu.Calls("conversations.replies")); n != 1 {
		t.Errorf("%d conversations.replies calls, want 1", n)
	}
}

// TestE2EThreadContextFailure: conversations.replies failing (missing
// scope) never loses the mention: it is answered without the context.
func TestE2EThreadContextFailure(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.emu.InjectFault("conversations.replies", slackemu.Fault{Error: "missing_scope"})
	parent := h.post(slackemu.UserPost{User: slackemu.UserAlice, Text: "a thread", Silent: true})
	h.post(slackemu.UserPost{User: slackemu.UserBob, Text: "r", ThreadTS: parent.TS, Silent: true})
	h.post(slackemu.UserPost{User: slackemu.UserAlice, Text: "still there?", ThreadTS: parent.TS, Mention: true})
	got := h.waitReplies(slackemu.ChannelGen, parent.TS, 0, 1)
	if want := h.lastAnswer(); got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}
	if text := userText(h.llm.Requests()[0]); strings.Contains(text, "a thread") || !inOrder(text, "earlier messages could not be read", "still there?") {
		t.Errorf("request has context although the read failed, or no note: %q", text)
	}
}

// TestE2EAskBobbinShortcut: the message shortcut acks at once and answers
// in the message's thread with the message and its thread as context.
func TestE2EAskBobbinShortcut(t *testing.T) {
	h := newHarness(t, harnessOpts{emu: slackemu.Options{Shortcuts: []slackemu.Shortcut{{Name: "Ask Bobbin", Type: "message", CallbackID: "bobbin_ask"}}}})
	parent := h.post(slackemu.UserPost{User: slackemu.UserAlice, Text: "Release 4.2 is blocked on the migration", Silent: true, TS: "1767600000.000100"})
	bob := h.post(slackemu.UserPost{User: slackemu.UserBob, Text: "Can we run the migration online?", ThreadTS: parent.TS, Silent: true, TS: "1767600060.000200"})
	in, err := h.emu.MessageShortcut(slackemu.TeamID, slackemu.UserAdmin, slackemu.ChannelGen, bob.TS, "bobbin_ask")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := in.Wait(ctx); err != nil {
		t.Fatalf("shortcut not acked: %v", err)
	}
	got := h.waitReplies(slackemu.ChannelGen, parent.TS, 0, 1)
	if want := h.lastAnswer(); got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}
	text := userText(h.llm.Requests()[0])
	if !inOrder(text, "Release 4.2 is blocked", "“Ask Bobbin” shortcut", "bob ("+slackemu.UserBob+")", "Can we run the migration online?") {
		t.Errorf("request lacks the thread and the message:\n%s", text)
	}
	if strings.Count(text, "Can we run the migration online?") != 1 {
		t.Errorf("the message appears more than once:\n%s", text)
	}
	if f := h.emu.Failures(); len(f) != 0 {
		t.Errorf("Slack gave up on interactions: %+v", f)
	}
}

// TestE2EAssistantTitle: an assistant-pane thread is titled after its
// first question.
func TestE2EAssistantTitle(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	p := h.emu.AssistantThreadStarted(slackemu.TeamID, slackemu.UserAlice, slackemu.DMAlice, slackemu.ChannelGen)
	h.emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "How do I rotate the &lt;prod&gt; keys?\nDetails follow", p.TS)
	h.waitReply(slackemu.DMAlice, p.TS)
	h.wait("a title", func() bool {
		for _, s := range h.emu.AssistantStatuses() {
			if s.Method == "setTitle" && s.ThreadTS == p.TS {
				return s.Title == "How do I rotate the <prod> keys?"
			}
		}
		return false
	})
	if n := len(h.emu.Calls("conversations.replies")); n != 0 {
		t.Errorf("%d conversations.replies calls for an assistant thread, want 0", n)
	}
}

// TestE2EThreadFollowupsTwoReplicas: with two replicas (envelopes spread
// over both), replies without a mention are recorded once each, under the
// thread's lease, and all reach the next mention.
func TestE2EThreadFollowupsTwoReplicas(t *testing.T) {
	h := newHarness(t, harnessOpts{bot: func(o *bot.Options) { o.ThreadFollowups = bot.FollowupsMention }})
	opts := h.opts
	opts.ReplicaID = "second"
	second, err := bot.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- second.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	h.wait("second replica connected", func() bool { return second.Ready(context.Background()) == nil })

	p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "collect notes here", "")
	h.waitReplies(slackemu.ChannelGen, p.TS, 0, 1)
	k := session.ThreadKey{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, ThreadTS: p.TS}
	count := func(text string) int {
		_, msgs, err := h.store.Load(context.Background(), k)
		if err != nil {
			return -1
		}
		n := 0
		for _, m := range msgs {
			n += strings.Count(m.Content, text)
		}
		return n
	}
	notes := []string{"note one", "note two", "note three", "note four"}
	for _, n := range notes {
		h.emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserBob, n, p.TS)
		h.wait("recorded: "+n, func() bool { return count(n) > 0 })
	}
	for _, n := range notes {
		if c := count(n); c != 1 {
			t.Errorf("%q recorded %d times", n, c)
		}
	}
	h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "list the notes", p.TS)
	h.waitReplies(slackemu.ChannelGen, p.TS, 0, 2)
	reqs := h.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	if text := userText(reqs[1]); !inOrder(text, append(notes, "list the notes")...) {
		t.Errorf("mention's request lacks the notes in order:\n%s", text)
	}
}
