package ask

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot/internal/jobs"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// button is a rendered button as Slack receives it.
type button struct {
	ActionID string `json:"action_id"`
	Value    string `json:"value"`
	Text     struct {
		Text string `json:"text"`
	} `json:"text"`
}

// renderedBlocks decodes blocks as JSON: block ids, all text, and buttons.
func renderedBlocks(t *testing.T, blocks []slack.Block) (ids []string, text string, buttons []button) {
	t.Helper()
	raw, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	var bs []struct {
		BlockID string `json:"block_id"`
		Text    *struct {
			Text string `json:"text"`
		} `json:"text"`
		Elements []json.RawMessage `json:"elements"`
	}
	if err := json.Unmarshal(raw, &bs); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, b := range bs {
		ids = append(ids, b.BlockID)
		if b.Text != nil {
			sb.WriteString(b.Text.Text + "\n")
		}
		for _, e := range b.Elements {
			var el struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			_ = json.Unmarshal(e, &el)
			if el.Type == "button" {
				var bt button
				_ = json.Unmarshal(e, &bt)
				buttons = append(buttons, bt)
			} else {
				sb.WriteString(el.Text + "\n")
			}
		}
	}
	return ids, sb.String(), buttons
}

func approvalRequest(args string, h agent.Hints) agent.ApprovalRequest {
	return agent.ApprovalRequest{
		Call:  provider.ToolCall{ID: "call_1", Name: "gh__create_issue", Arguments: args},
		Spec:  provider.ToolSpec{Name: "gh__create_issue"},
		Hints: h,
	}
}

func TestPromptBlocks(t *testing.T) {
	req := approvalRequest(`{"title":"<!channel> ping <@U999>","body":"a & b","n":12345678901234567890}`,
		agent.Hints{Server: "gh", Tool: "create_issue", Destructive: true, OpenWorld: true})
	p := newPrompt(req, "U222")
	id := session.NewApprovalID()
	ids, text, buttons := renderedBlocks(t, p.pendingBlocks(id, time.Now().Add(10*time.Minute)))

	wantIDs := []string{blockApprovalHead, blockApprovalRisk, blockApprovalArgs, blockApprovalActions, blockApprovalStatus}
	if diff := cmp.Diff(wantIDs, ids); diff != "" {
		t.Errorf("block ids (-want +got):\n%s", diff)
	}
	want := []button{
		{ActionID: actionAllowOnce, Value: id}, {ActionID: actionAllowThread, Value: id}, {ActionID: actionDeny, Value: id},
	}
	want[0].Text.Text, want[1].Text.Text, want[2].Text.Text = "Allow once", "Always allow in this thread", "Deny"
	if diff := cmp.Diff(want, buttons); diff != "" {
		t.Errorf("buttons (-want +got):\n%s", diff)
	}
	for _, s := range []string{"gh/create_issue", "destructive", "open-world", "unverified server", "&lt;!channel&gt;", "&lt;@U999&gt;", "a &amp; b", "12345678901234567890", "<@U222>"} {
		if !strings.Contains(text, s) {
			t.Errorf("prompt lacks %q:\n%s", s, text)
		}
	}
	for _, s := range []string{"<!channel>", "<@U999>", "read-only"} {
		if strings.Contains(text, s) {
			t.Errorf("prompt contains %q:\n%s", s, text)
		}
	}
}

func TestPromptRisk(t *testing.T) {
	tests := []struct {
		h    agent.Hints
		want string
	}{
		{agent.Hints{ReadOnly: true, Trusted: true}, "Risk: read-only"},
		{agent.Hints{ReadOnly: true}, "Risk: read-only · unverified server (these hints come from the server itself)"},
		{agent.Hints{Destructive: true, Trusted: true}, "Risk: may change data · :warning: destructive"},
		{agent.Hints{OpenWorld: true, Trusted: true}, "Risk: may change data · open-world (reaches outside systems)"},
	}
	for _, tt := range tests {
		if got := riskLine(tt.h); got != tt.want {
			t.Errorf("riskLine(%+v) = %q, want %q", tt.h, got, tt.want)
		}
	}
}

func TestPromptLongArguments(t *testing.T) {
	long := strings.Repeat("x", 5000)
	args, _ := json.Marshal(map[string]any{"content": long, "list": []string{strings.Repeat("y", 400)}, "code": "```\nfence\n```"})
	p := newPrompt(approvalRequest(string(args), agent.Hints{}), "U222")
	if !p.truncated {
		t.Fatal("long arguments not marked truncated")
	}
	_, text, buttons := renderedBlocks(t, p.pendingBlocks("ab12", time.Now().Add(time.Minute)))
	if len(p.args) > argBlockLimit {
		t.Errorf("argument block of %d bytes > %d", len(p.args), argBlockLimit)
	}
	if !strings.Contains(text, "more characters") {
		t.Errorf("no truncation marker in %q", text)
	}
	if strings.Count(text, "```") != 2 {
		t.Errorf("the arguments' own fences leak into the code block: %d fences", strings.Count(text, "```"))
	}
	if len(buttons) != 4 || buttons[3].ActionID != actionViewArgs || buttons[3].Text.Text != "View full arguments" || buttons[3].Value != "ab12" {
		t.Errorf("buttons = %+v, want a fourth View full arguments button", buttons)
	}
	// The modal holds all of it.
	m := argsModal("gh__create_issue", args)
	raw, _ := json.Marshal(m)
	if !strings.Contains(string(raw), strings.Repeat("x", 2000)) {
		t.Error("modal lacks the full value")
	}
	if len(m.Blocks.BlockSet) > 100 {
		t.Errorf("modal has %d blocks", len(m.Blocks.BlockSet))
	}
}

func TestClosedBlocks(t *testing.T) {
	p := newPrompt(approvalRequest(`{"a":1}`, agent.Hints{Trusted: true}), "U222")
	base := p.pendingBlocks("ab12", time.Now().Add(time.Minute))
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		state   string
		buttons []slack.BlockElement
		want    string
	}{
		{session.ApprovalAllowOnce, nil, "Allowed once by <@UADMIN>"},
		{session.ApprovalDeny, nil, "Denied by <@UADMIN>"},
		{session.ApprovalAllowSession, []slack.BlockElement{slack.NewButtonBlockElement(actionRevoke, "ab12", slack.NewTextBlockObject(slack.PlainTextType, labelRevoke, false, false))}, "Always allowed in this thread by <@UADMIN>"},
		{session.ApprovalExpired, nil, "Nobody answered in time"},
	} {
		t.Run(tt.state, func(t *testing.T) {
			a := session.Approval{Prompt: session.Prompt{ID: "ab12", State: tt.state, DecidedBy: "UADMIN", DecidedAt: at}}
			if tt.state == session.ApprovalExpired {
				a.DecidedBy = ""
			}
			ids, text, buttons := renderedBlocks(t, closeApproval(base, statusLine(a), tt.buttons))
			if !strings.Contains(text, tt.want) || !strings.Contains(text, fmt.Sprintf("<!date^%d^", at.Unix())) {
				t.Errorf("status %q lacks %q or the date", text, tt.want)
			}
			if ids[0] != blockApprovalHead || ids[2] != blockApprovalArgs {
				t.Errorf("block ids %v: head and arguments not kept", ids)
			}
			if tt.buttons == nil && len(buttons) != 0 {
				t.Errorf("buttons left after the decision: %+v", buttons)
			}
			if tt.buttons != nil && (len(buttons) != 1 || buttons[0].Text.Text != "Revoke" || buttons[0].Value != "ab12") {
				t.Errorf("buttons = %+v, want only Revoke", buttons)
			}
		})
	}
}

func TestApprovalClicks(t *testing.T) {
	raw := `{"type":"block_actions","user":{"id":"U222","team_id":"T111"},"team":{"id":"T111"},
	"container":{"type":"message","message_ts":"1.2","channel_id":"C111"},"channel":{"id":"C111"},
	"actions":[{"type":"button","action_id":"bobbin_allow_once","block_id":"x","value":"0123abcd"},
	{"type":"button","action_id":"bobbin_deny","value":"NOT-HEX"},{"type":"button","action_id":"bobbin_stop","value":"a"}]}`
	var cb slack.InteractionCallback
	if err := json.Unmarshal([]byte(raw), &cb); err != nil {
		t.Fatal(err)
	}
	got := Clicks(cb)
	if len(got) != 1 || got[0].ActionID != actionAllowOnce || got[0].Value != "0123abcd" {
		t.Errorf("Clicks = %+v, want the one allow-once click", got)
	}
}

func FuzzApprovalPayload(f *testing.F) {
	f.Add(`{"type":"block_actions","user":{"id":"U1","team_id":"T1"},"team":{"id":"T1"},"actions":[{"action_id":"bobbin_allow_once","value":"ab"}]}`)
	f.Add(`{"type":"block_actions","actions":[null,{"action_id":"bobbin_revoke","value":""}]}`)
	f.Add(`{"type":"view_submission","view":{"callback_id":"bobbin_mcp_add","state":{"values":{"mcp_name":{"name":{"value":"x"}}}}}}`)
	f.Add(`{"type":"block_actions","actions":{"bad":1}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var cb slack.InteractionCallback
		if json.Unmarshal([]byte(raw), &cb) != nil {
			return
		}
		for _, a := range Clicks(cb) {
			if !ValidID(a.Value) {
				t.Fatalf("accepted approval id %q", a.Value)
			}
		}
	})
}

// testPrompts are Prompts on the emulated Slack and store, with roles
// that let everyone decide.
func testPrompts(t *testing.T, emu *slackemu.Server, store *session.Store) *Prompts {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	m := slackapi.NewMetrics()
	gov := slackapi.NewGovernor(store, slackapi.DefaultRateLimits(), m, log, time.Minute)
	hc := &http.Client{Transport: slackapi.NewTransport(http.DefaultTransport, gov, m)}
	api := slackapi.New(gov, slackapi.Static{API: slack.New(slackemu.BotToken, slack.OptionAPIURL(emu.APIURL()), slack.OptionHTTPClient(hc))}, log)
	runner := jobs.New(log, time.Minute)
	t.Cleanup(runner.Close)
	return New(Options{API: api, Store: store, Roles: anyone{}, Jobs: runner, Logger: log,
		Audit: func(context.Context, string, map[string]string) {}})
}

// anyone lets everyone decide and see.
type anyone struct{}

func (anyone) MayAct(context.Context, string, string, string, string, string) (bool, string) {
	return true, ""
}
func (anyone) IsAdmin(context.Context, string, string, string) (bool, bool) { return true, false }
func (anyone) MaySee(context.Context, string, string, string) bool          { return true }

// A turn resumed on another replica waits on the prompt its predecessor
// posted instead of asking twice.
func TestApproverResumesPendingPrompt(t *testing.T) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	t.Cleanup(emu.Close)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	store, err := session.Open(context.Background(), session.Options{URL: os.Getenv("REDIS_URL"), Prefix: "apr" + hex.EncodeToString(rnd[:])})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	p := testPrompts(t, emu, store)
	k := session.ThreadKey{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, ThreadTS: "1700000000.000100"}
	ap, err := store.CreateApproval(context.Background(), session.Approval{Prompt: session.Prompt{Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS, Requester: slackemu.UserAlice, Expires: time.Now().Add(1500 * time.Millisecond), MessageTS: "1700000001.000200"}, Tool: "gh__create_issue", CallID: "call_1"})
	if err != nil {
		t.Fatal(err)
	}
	// Nobody answers: the resumed wait ends with the prompt's own expiry
	// (PendingApprovals lists it even when the resume comes after that).
	d, err := p.Approver(k, slackemu.UserAlice).Approve(context.Background(), approvalRequest(`{"a":1}`, agent.Hints{}))
	if !errors.Is(err, errApprovalExpired) || d != agent.Deny {
		t.Errorf("Approve = %v, %v; want deny, expired", d, err)
	}
	if got, err := store.GetApproval(context.Background(), ap.ID); err != nil || got.State != session.ApprovalExpired {
		t.Errorf("approval after the wait: %+v, %v", got, err)
	}
	if n := len(emu.Calls("chat.update")); n == 0 {
		t.Error("the resumed prompt was not updated")
	}
	if n := len(emu.Calls("chat.postMessage")); n != 0 {
		t.Errorf("a resumed approval posted %d new prompts", n)
	}
}

// A person answered while the turn changed hands (their click beat the
// shutdown's withdrawal): the resumed turn takes that answer and asks
// nobody again; a withdrawn prompt is asked again.
func TestApproverResumesAnsweredPrompt(t *testing.T) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	t.Cleanup(emu.Close)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	store, err := session.Open(context.Background(), session.Options{URL: os.Getenv("REDIS_URL"), Prefix: "apa" + hex.EncodeToString(rnd[:])})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	p := testPrompts(t, emu, store)
	ctx := context.Background()
	k := session.ThreadKey{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, ThreadTS: "1700000000.000100"}
	record := func(callID, state string) {
		t.Helper()
		ap, err := store.CreateApproval(ctx, session.Approval{Prompt: session.Prompt{Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS, Requester: slackemu.UserAlice, Expires: time.Now().Add(time.Minute), MessageTS: "1700000001.000200"}, Tool: "gh__create_issue", CallID: callID})
		if err != nil {
			t.Fatal(err)
		}
		if _, won, err := store.Decide(ctx, ap.ID, state, slackemu.UserAlice); err != nil || !won {
			t.Fatalf("decide %s: %v %v", state, won, err)
		}
	}
	record("call_1", session.ApprovalAllowOnce)
	d, err := p.Approver(k, slackemu.UserAlice).Approve(ctx, approvalRequest(`{"a":1}`, agent.Hints{}))
	if err != nil || d != agent.AllowOnce {
		t.Errorf("Approve = %v, %v; want the person's allow once", d, err)
	}
	if n := len(emu.Calls("chat.postMessage")); n != 0 {
		t.Errorf("an answered approval posted %d new prompts", n)
	}

	// Withdrawn by the shutdown before anyone answered: asked again.
	k.ThreadTS = "1700000000.000900"
	record("call_1", session.ApprovalWithdrawn)
	actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, _ = p.Approver(k, slackemu.UserAlice).Approve(actx, approvalRequest(`{"a":1}`, agent.Hints{}))
	if n := len(emu.Calls("chat.postMessage")); n != 1 {
		t.Errorf("a withdrawn approval posted %d new prompts; want 1", n)
	}
}
