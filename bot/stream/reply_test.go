package stream

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// rig is an emulated Slack, a client through a local governor and a
// thread to answer in.
type rig struct {
	emu *slackemu.Server
	api *slackapi.Client
	k   session.ThreadKey
}

func newRig(t *testing.T, opts ...slackemu.Options) *rig {
	t.Helper()
	o := slackemu.Options{NoRateLimits: true}
	if len(opts) > 0 {
		o = opts[0]
	}
	emu := slackemu.New(o)
	t.Cleanup(emu.Close)
	m := slackapi.NewMetrics()
	log := slog.New(slog.DiscardHandler)
	gov := slackapi.NewGovernor(nil, slackapi.DefaultRateLimits(), m, log, time.Minute)
	hc := &http.Client{Transport: slackapi.NewTransport(http.DefaultTransport, gov, m)}
	api := slackapi.New(gov, slackapi.Static{API: slack.New(slackemu.BotToken, slack.OptionAPIURL(emu.APIURL()), slack.OptionHTTPClient(hc))}, log)
	ts := emu.PostUserMessage(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "question", "")
	return &rig{emu: emu, api: api, k: session.ThreadKey{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, ThreadTS: ts}}
}

func (g *rig) options() Options {
	return Options{API: g.api, Budget: g.api.Governor(), APIURL: g.emu.APIURL(), Thread: g.k, Requester: slackemu.UserAlice,
		Mode: Edit, EditInterval: 50 * time.Millisecond, Feedback: slack.NewDividerBlock()}
}

// replies are the bot's messages in the rig's thread.
func (g *rig) replies() []slackemu.Message {
	var out []slackemu.Message
	for _, m := range g.emu.Messages(g.k.Channel) {
		if m.ThreadTS == g.k.ThreadTS && m.TS != g.k.ThreadTS && m.BotID != "" {
			out = append(out, m)
		}
	}
	return out
}

func ctx(t *testing.T) context.Context {
	c, _ := contextWithTimeout(t, 20*time.Second)
	return c
}

func contextWithTimeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c, cancel
}

// TestReplyEditFinish: a reply that streamed nothing yet is posted once,
// complete, with the footer, the feedback block and no Stop button; its
// first ts reaches OnPost and TS; a masked mention in the footer becomes
// a live mention, one in the model's text does not.
func TestReplyEditFinish(t *testing.T) {
	g := newRig(t)
	var posted []string
	o := g.options()
	o.OnPost = func(_ context.Context, ts string) { posted = append(posted, ts) }
	var calls []string
	o.ToolCall = func(decision, result string) { calls = append(calls, decision+"/"+result) }
	r := New(o)
	r.Observe(agent.Event{Kind: agent.EventStep, Step: 1})
	r.Observe(agent.Event{Kind: agent.EventText, Text: "Hello " + MaskUser("U0EVE") + " *there*"})
	r.Observe(agent.Event{Kind: agent.EventToolFinished, IsError: true})
	r.Close()
	r.Finish(ctx(t), "", "_Stopped by "+MaskUser(slackemu.UserAlice)+"._")

	msgs := g.replies()
	if len(msgs) != 1 {
		t.Fatalf("%d reply messages, want 1: %+v", len(msgs), msgs)
	}
	m := msgs[0]
	if !strings.Contains(m.Text, "Hello U0EVE") || !strings.Contains(m.Text, "<@"+slackemu.UserAlice+">") {
		t.Errorf("reply text %q: want the model's mask stripped and the footer's mention live", m.Text)
	}
	if blocks := string(m.Blocks); strings.Contains(blocks, ActionStop) || !strings.Contains(blocks, `"divider"`) {
		t.Errorf("final blocks %s: want the feedback block and no Stop button", blocks)
	}
	if r.TS() != m.TS || len(posted) != 1 || posted[0] != m.TS {
		t.Errorf("TS %q, OnPost %v, want %q once", r.TS(), posted, m.TS)
	}
	if len(calls) != 1 || calls[0] != (agent.Event{}).Decision.String()+"/error" {
		t.Errorf("tool calls counted %v", calls)
	}
}

// TestReplyLiveThenFinal: while Run runs, the text goes out with the
// status and the Stop button (value: the thread key); Finish edits the
// same message to the final text without them.
func TestReplyLiveThenFinal(t *testing.T) {
	g := newRig(t)
	r := New(g.options())
	var wg sync.WaitGroup
	run, stop := context.WithCancel(ctx(t))
	defer stop()
	wg.Go(func() { r.Run(run) })
	r.Observe(agent.Event{Kind: agent.EventText, Text: "partial answer"})
	r.Observe(agent.Event{Kind: agent.EventToolStarted, Call: provider.ToolCall{ID: "call1", Name: "lookup"}})
	deadline := time.Now().Add(10 * time.Second)
	var live slackemu.Message
	for time.Now().Before(deadline) {
		if msgs := g.replies(); len(msgs) == 1 && strings.Contains(string(msgs[0].Blocks), ActionStop) {
			live = msgs[0]
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if live.TS == "" {
		t.Fatalf("no live message with a Stop button: %+v", g.replies())
	}
	if !strings.Contains(string(live.Blocks), g.k.String()) {
		t.Errorf("Stop button without the thread key: %s", live.Blocks)
	}
	r.Close()
	wg.Wait()
	r.Finish(ctx(t), "", "")
	msgs := g.replies()
	if len(msgs) != 1 || msgs[0].TS != live.TS {
		t.Fatalf("replies %+v, want the live message edited", msgs)
	}
	if b := string(msgs[0].Blocks); strings.Contains(b, ActionStop) || strings.Contains(b, "Running") {
		t.Errorf("final blocks %s still live", b)
	}
}

// TestReplyLeaseLost: once the guard says the lease is lost, nothing is
// written, not even the final text.
func TestReplyLeaseLost(t *testing.T) {
	g := newRig(t)
	o := g.options()
	o.Guard = func(context.Context) error { return session.ErrLeaseLost }
	r := New(o)
	r.Observe(agent.Event{Kind: agent.EventText, Text: "answer"})
	r.Close()
	r.Finish(ctx(t), "", "")
	if msgs := g.replies(); len(msgs) != 0 {
		t.Errorf("%d messages written after the lease was lost", len(msgs))
	}
	// Other guard errors (Redis away) do not stop the reply.
	o.Guard = func(context.Context) error { return errors.New("redis away") }
	r = New(o)
	r.Observe(agent.Event{Kind: agent.EventText, Text: "answer"})
	r.Close()
	r.Finish(ctx(t), "", "")
	if msgs := g.replies(); len(msgs) != 1 {
		t.Errorf("%d messages, want 1 when the guard merely failed", len(msgs))
	}
}

// TestReplyExisting: a reply taken over finishes the message posted
// before instead of posting a new one.
func TestReplyExisting(t *testing.T) {
	g := newRig(t)
	o := g.options()
	r := New(o)
	r.Observe(agent.Event{Kind: agent.EventText, Text: "half"})
	r.Close()
	r.Finish(ctx(t), "", "")
	old := r.TS()
	o.Existing = old
	r = New(o)
	r.Close()
	r.Finish(ctx(t), "the whole answer", "")
	msgs := g.replies()
	if len(msgs) != 1 || msgs[0].TS != old || !strings.Contains(msgs[0].Text, "the whole answer") {
		t.Errorf("replies %+v, want %s edited to the whole answer", msgs, old)
	}
}

// TestPiecesBreakAtPrompts: text after an approval prompt goes into a
// message of its own.
func TestPiecesBreakAtPrompts(t *testing.T) {
	r := New(Options{Thread: session.ThreadKey{Team: "T", Channel: "C", ThreadTS: "1"}})
	r.Observe(agent.Event{Kind: agent.EventText, Text: "before"})
	r.Observe(agent.Event{Kind: agent.EventApprovalNeeded, Call: provider.ToolCall{ID: "c1", Name: "rm"}})
	r.Observe(agent.Event{Kind: agent.EventStep, Step: 2})
	r.Observe(agent.Event{Kind: agent.EventText, Text: "after"})
	text, status := r.snapshot()
	if got := r.pieces(text); len(got) != 2 || got[0] != "before" || got[1] != "after" {
		t.Errorf("pieces %q, want [before after]", got)
	}
	if status != "" {
		t.Errorf("status %q after text, want none", status)
	}
	if !r.waitsOnPerson() {
		t.Error("a reply past an approval prompt does not wait on a person")
	}
}

// TestReplyTableAsMarkdownBlock: a Markdown table from the model reaches
// the final message as a pipe table in its markdown block (which Slack
// renders as a table), not as monospace text; only the notification
// fallback, mrkdwn, has the aligned code block.
func TestReplyTableAsMarkdownBlock(t *testing.T) {
	g := newRig(t)
	r := New(g.options())
	table := "| name | size |\n|---|---:|\n| a<b | 1 |\n| c | 22 |"
	r.Observe(agent.Event{Kind: agent.EventText, Text: "Sizes:\n\n" + table})
	r.Close()
	r.Finish(ctx(t), "", "")
	msgs := g.replies()
	if len(msgs) != 1 {
		t.Fatalf("%d replies, want 1", len(msgs))
	}
	md := shownText(msgs[0])
	if !strings.Contains(md, "| name | size |\n|---|---:|\n| a&lt;b | 1 |") || strings.Contains(md, "```") {
		t.Errorf("markdown block %q: want the pipe table, escaped, not a code block", md)
	}
	if !strings.Contains(msgs[0].Text, "```") {
		t.Errorf("fallback %q: want the table as an aligned code block", msgs[0].Text)
	}
}
