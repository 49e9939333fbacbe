package ask

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/session"
)

// TestStatusLines: approvals and questions say how they ended in the
// words they always used, from one writer (words.status).
func TestStatusLines(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	when := fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", at.Unix(), at.Format("2006-01-02 15:04 UTC"))
	for _, tt := range []struct {
		got, want string
	}{
		{statusLine(session.Approval{Prompt: session.Prompt{State: session.ApprovalAllowOnce, DecidedBy: "U1", DecidedAt: at}}), ":white_check_mark: Allowed once by <@U1> at " + when + "."},
		{statusLine(session.Approval{Prompt: session.Prompt{State: session.ApprovalAllowSession, DecidedBy: "U1", DecidedAt: at}}), ":white_check_mark: Always allowed in this thread by <@U1> at " + when + "."},
		{statusLine(session.Approval{Prompt: session.Prompt{State: session.ApprovalDeny, DecidedBy: "U1", DecidedAt: at}}), ":no_entry_sign: Denied by <@U1> at " + when + "."},
		{statusLine(session.Approval{Prompt: session.Prompt{State: session.ApprovalExpired, DecidedAt: at}}), ":hourglass: Nobody answered in time; denied at " + when + "."},
		{statusLine(session.Approval{Prompt: session.Prompt{State: session.ApprovalWithdrawn, DecidedBy: "U1", DecidedAt: at}}), ":black_square_for_stop: Withdrawn: the answer was stopped by <@U1> at " + when + "."},
		{statusLine(session.Approval{Prompt: session.Prompt{State: session.ApprovalWithdrawn, DecidedAt: at}}), ":black_square_for_stop: Withdrawn: the answer was stopped at " + when + "."},
		{statusLine(session.Approval{Prompt: session.Prompt{State: session.ApprovalPending}}), "Pending."},
		{questionStatus(session.Question{Prompt: session.Prompt{State: session.QuestionAccept, DecidedBy: "U1", DecidedAt: at}, Mode: QuestionForm}), ":white_check_mark: Answered by <@U1> at " + when + "."},
		{questionStatus(session.Question{Prompt: session.Prompt{State: session.QuestionAccept, DecidedBy: "U1", DecidedAt: at}, Mode: QuestionURL}), ":white_check_mark: Done by <@U1> at " + when + "."},
		{questionStatus(session.Question{Prompt: session.Prompt{State: session.QuestionDecline, DecidedBy: "U1", DecidedAt: at}}), ":no_entry_sign: Declined by <@U1> at " + when + "."},
		{questionStatus(session.Question{Prompt: session.Prompt{State: session.QuestionCancel, DecidedBy: "U1", DecidedAt: at}}), ":heavy_multiplication_x: Cancelled by <@U1> at " + when + "."},
		{questionStatus(session.Question{Prompt: session.Prompt{State: session.QuestionExpired, DecidedAt: at}}), ":hourglass: Nobody answered in time; cancelled at " + when + "."},
		{questionStatus(session.Question{Prompt: session.Prompt{State: session.QuestionWithdrawn, DecidedBy: "U1", DecidedAt: at}}), ":black_square_for_stop: Withdrawn: the answer was stopped by <@U1> at " + when + "."},
		{questionStatus(session.Question{Prompt: session.Prompt{State: session.QuestionWithdrawn, DecidedAt: at}}), ":black_square_for_stop: Withdrawn at " + when + ": the request ended before anyone answered."},
		{questionStatus(session.Question{Prompt: session.Prompt{State: session.QuestionPending}}), "Pending."},
	} {
		if tt.got != tt.want {
			t.Errorf("status\n got %q\nwant %q", tt.got, tt.want)
		}
	}
}

// TestWithdraw: one Withdraw closes a thread's open approvals and
// questions, recording who stopped them; other threads keep theirs.
func TestWithdraw(t *testing.T) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	t.Cleanup(emu.Close)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	ctx := context.Background()
	store, err := session.Open(ctx, session.Options{URL: os.Getenv("REDIS_URL"), Prefix: "askw" + hex.EncodeToString(rnd[:])})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	p := testPrompts(t, emu, store)
	k := session.ThreadKey{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, ThreadTS: "1700000000.000100"}
	other := k
	other.ThreadTS = "1700000000.000200"
	expires := time.Now().Add(time.Minute)
	ap, err := store.CreateApproval(ctx, session.Approval{Prompt: session.Prompt{Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS, Requester: "U1", Expires: expires}, Tool: "t"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := store.CreateQuestion(ctx, session.Question{Prompt: session.Prompt{ID: session.NewApprovalID(), Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS, Requester: "U1", Expires: expires}, Mode: QuestionForm})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := store.CreateApproval(ctx, session.Approval{Prompt: session.Prompt{Team: other.Team, Channel: other.Channel, ThreadTS: other.ThreadTS, Requester: "U1", Expires: expires}, Tool: "t"})
	if err != nil {
		t.Fatal(err)
	}
	p.Withdraw(ctx, k, "U2")
	if got, err := store.GetApproval(ctx, ap.ID); err != nil || got.State != session.ApprovalWithdrawn || got.DecidedBy != "U2" {
		t.Errorf("approval after Withdraw: %+v, %v", got, err)
	}
	if got, err := store.GetQuestion(ctx, q.ID); err != nil || got.State != session.QuestionWithdrawn || got.DecidedBy != "U2" {
		t.Errorf("question after Withdraw: %+v, %v", got, err)
	}
	if got, err := store.GetApproval(ctx, kept.ID); err != nil || got.Decided() {
		t.Errorf("another thread's approval after Withdraw: %+v, %v", got, err)
	}
}
