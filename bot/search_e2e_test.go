package bot_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// Channels of the search tests: #proj (public, the bot in it, the guest
// a member), #eng (public, the guest not in it), #hr (private, alice
// only).
const (
	chanProj = "C0PROJ"
	chanEng  = "C0ENG"
	chanHR   = "G0HR"
)

// newSearchHarness seeds three channels with a billing decision each and
// a model that searches when asked about a decision and then repeats the
// tool's answer.
func newSearchHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, harnessOpts{emu: slackemu.Options{NoRateLimits: true}})
	seedSearch(h)
	h.llm.SetResponder(func(r llmemu.Recorded) llmemu.Reply {
		last := r.LastMessage()
		if last.Role == "tool" {
			return llmemu.Reply{Text: "Search said: " + last.Text}
		}
		if strings.Contains(r.LastUserText(), "decide") && slices.Contains(r.Tools, "slack_search") {
			return llmemu.Reply{ToolCalls: []llmemu.ToolCall{{Name: "slack_search", Arguments: `{"query":"*billing* decision","limit":5}`}}}
		}
		return llmemu.Reply{Text: "no search here"}
	})
	return h
}

// seedSearch adds the search tests' channels and their messages.
func seedSearch(h *harness) {
	h.t.Helper()
	h.emu.AddChannel(slackemu.TeamID, slackemu.Channel{ID: chanProj, Name: "proj", BotMember: true, Members: []string{slackemu.UserGuest, slackemu.UserAlice}})
	h.emu.AddChannel(slackemu.TeamID, slackemu.Channel{ID: chanEng, Name: "eng"})
	h.emu.AddChannel(slackemu.TeamID, slackemu.Channel{ID: chanHR, Name: "hr", Private: true, Members: []string{slackemu.UserAlice}})
	h.post(slackemu.UserPost{Channel: chanProj, User: slackemu.UserBob, Text: "billing decision: we go with Postgres", Silent: true, TS: "1767600000.000100"})
	h.post(slackemu.UserPost{Channel: chanEng, User: slackemu.UserBob, Text: "billing decision record: Postgres approved by eng", Silent: true, TS: "1767600060.000100"})
	h.post(slackemu.UserPost{Channel: chanHR, User: slackemu.UserAlice, Text: "billing decision on salaries is confidential", Silent: true, TS: "1767600120.000100"})
}

// toolResult is the last tool message the model got.
func toolResult(h *harness) string {
	reqs := h.llm.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if m := reqs[i].LastMessage(); m.Role == "tool" {
			return m.Text
		}
	}
	return ""
}

// TestE2ESlackSearch: a mention asking about an earlier decision → the
// model calls slack_search without an approval prompt, Slack sees the
// event's action_token and searches as the asker; results come back as
// cited snippets; a private channel's messages never reach the model (it
// was asked in a public channel), and a guest gets only what a guest may
// see (not #eng, which they are not in).
func TestE2ESlackSearch(t *testing.T) {
	h := newSearchHarness(t)
	p := h.emu.Mention(slackemu.TeamID, chanProj, slackemu.UserAlice, "what did we decide about billing?", "")
	got := h.waitReply(chanProj, p.TS)
	res := toolResult(h)
	if !strings.Contains(got, "Search said:") || res == "" {
		t.Fatalf("no search result reached the model; reply %q", got)
	}
	for _, want := range []string{"#proj", "Bob Baker (" + slackemu.UserBob + ")", "2026-01-05 08:00 UTC", "https://acme.slack.com/archives/" + chanProj + "/p1767600000000100",
		"we go with Postgres", "#eng", "Postgres approved by eng"} {
		if !strings.Contains(res, want) {
			t.Errorf("search result lacks %q:\n%s", want, res)
		}
	}
	if strings.Contains(res, "salaries") {
		t.Errorf("a private channel's message reached the model from a public channel:\n%s", res)
	}
	searches := h.emu.Searches()
	if len(searches) != 1 || searches[0].User != slackemu.UserAlice || searches[0].ActionToken == "" || searches[0].Query != "billing decision" {
		t.Fatalf("searches = %+v, want one as alice with the event's action token and a plain query", searches)
	}
	if n := len(h.emu.BotReplies(chanProj, p.TS)); n != 1 {
		t.Errorf("%d bot posts in the thread, want the answer only (no approval prompt)", n)
	}

	// The guest, in a new thread: only what they may see.
	g := h.emu.Mention(slackemu.TeamID, chanProj, slackemu.UserGuest, "what did we decide about billing?", "")
	h.waitReply(chanProj, g.TS)
	res = toolResult(h)
	if !strings.Contains(res, "we go with Postgres") || strings.Contains(res, "approved by eng") || strings.Contains(res, "salaries") {
		t.Errorf("the guest's search shows what they cannot see, or not what they can:\n%s", res)
	}
	searches = h.emu.Searches()
	if len(searches) != 2 || searches[1].User != slackemu.UserGuest || searches[1].ActionToken == searches[0].ActionToken {
		t.Errorf("second search = %+v, want the guest's own action token", searches)
	}
}

// TestE2ESlackSearchDisabled: a workspace without the Real-time Search API
// → the tool is not offered, no search is tried and no error is shown,
// turn after turn.
func TestE2ESlackSearchDisabled(t *testing.T) {
	h := newSearchHarness(t)
	h.emu.SetSearchDisabled(slackemu.TeamID, "feature_not_enabled")
	for range 2 {
		p := h.emu.Mention(slackemu.TeamID, chanProj, slackemu.UserAlice, "what did we decide about billing?", "")
		if got := h.waitReply(chanProj, p.TS); got != "no search here" {
			t.Errorf("reply = %q, want the model's plain answer", got)
		}
	}
	for i, r := range h.llm.Requests() {
		if slices.Contains(r.Tools, "slack_search") {
			t.Errorf("request %d offers slack_search in a workspace without the API: %v", i, r.Tools)
		}
	}
	if n := len(h.emu.Calls("assistant.search.context")); n != 0 {
		t.Errorf("%d assistant.search.context calls, want 0", n)
	}
	if n := len(h.emu.Calls("assistant.search.info")); n != 1 {
		t.Errorf("%d assistant.search.info calls, want 1 (the answer is remembered)", n)
	}
}

// TestE2ESlackSearchInfoShared: whether a workspace has Slack search is
// asked once for every replica: a bot process that has not asked yet (a
// restart here) reads the answer from Redis instead of asking Slack, and
// still offers the tool (issue 23: a second replica's turns used to wait
// for the method's Tier 2 budget the first had just spent).
func TestE2ESlackSearchInfoShared(t *testing.T) {
	h := newSearchHarness(t)
	for i := range 2 {
		if i == 1 {
			h.stop()
			h.start()
		}
		p := h.emu.Mention(slackemu.TeamID, chanProj, slackemu.UserAlice, "hello there", "")
		if got := h.waitReply(chanProj, p.TS); got != "no search here" {
			t.Errorf("reply %d = %q", i+1, got)
		}
	}
	reqs := h.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if !slices.Contains(r.Tools, "slack_search") {
			t.Errorf("request %d does not offer slack_search: %v", i, r.Tools)
		}
	}
	if n := len(h.emu.Calls("assistant.search.info")); n != 1 {
		t.Errorf("%d assistant.search.info calls, want 1 (the second process reads the shared answer)", n)
	}
}
