package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

// Approval states. Every state but ApprovalPending is final.
const (
	ApprovalPending      = promptPending
	ApprovalAllowOnce    = "allow_once"
	ApprovalAllowSession = "allow_session"
	ApprovalDeny         = "deny"
	// ApprovalExpired is set when nobody decided before Expires; callers
	// treat it as a denial.
	ApprovalExpired = promptExpired
	// ApprovalWithdrawn is set when the turn was stopped while waiting.
	ApprovalWithdrawn = "withdrawn"
)

// Approval is a pending or decided tool-call approval, shared by all
// replicas: the click may reach any of them.
type Approval struct {
	// Prompt: the id, thread, requester (whose message started the turn),
	// server, times, state (one of the Approval* constants), who decided
	// and the Slack message carrying the buttons.
	Prompt
	Tool, ArgsDigest string
	// CallID is the model's tool-call id, so a replica resuming the turn finds
	// the approval of the call it is about to run.
	CallID string
	// AdminOnly: the tool policy says only an admin's click counts.
	// OnceOnly: no thread-wide permission may be given (destructive).
	AdminOnly, OnceOnly bool
	// Grant is what Always allow stores in the thread's grants (the tool
	// bound to its definition: agent.GrantKey); empty on approvals
	// recorded before it existed, which grant Tool (GrantName).
	Grant string
}

// GrantName is the thread grant this approval gives and revokes.
func (a Approval) GrantName() string {
	if a.Grant != "" {
		return a.Grant
	}
	return a.Tool
}

// approvalPrompts is the lifecycle of approvals (prompt.go).
var approvalPrompts = &prompts[Approval]{
	noun: "approval", settleVerb: "decide",
	final:  []string{ApprovalAllowOnce, ApprovalAllowSession, ApprovalDeny, ApprovalExpired, ApprovalWithdrawn},
	record: keys.approval,
	index:  func(k keys, t ThreadKey) string { return k.thread(t).approvals },
	encode: func(_ *Store, a Approval) ([]any, error) {
		return append(a.core().fields("tool", a.Tool, "args_digest", a.ArgsDigest, "call_id", a.CallID),
			"admin_only", flag(a.AdminOnly), "once_only", flag(a.OnceOnly), "grant", a.Grant), nil
	},
	decode: func(_ *Store, _ string, h map[string]string, c Prompt) (Approval, error) {
		a := Approval{Tool: h["tool"], ArgsDigest: h["args_digest"], CallID: h["call_id"],
			AdminOnly: h["admin_only"] == "1", OnceOnly: h["once_only"] == "1", Grant: h["grant"]}
		return a.withCore(c), nil
	},
}

func (a Approval) core() Prompt { return a.Prompt }

func (a Approval) withCore(c Prompt) Approval {
	a.Prompt = c
	return a
}

// NewApprovalID returns a random approval (or question) id.
func NewApprovalID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// CreateApproval stores a pending approval and indexes it under its thread.
// It fills ID (when empty), Created and State and returns the stored record.
// Expires must be in the future. The record is kept until ApprovalRetention
// after Expires so late clicks get a precise answer.
func (s *Store) CreateApproval(ctx context.Context, a Approval) (Approval, error) {
	return approvalPrompts.create(ctx, s, a)
}

// GetApproval returns an approval; ErrNotFound when unknown or long expired.
// A pending approval past its expiry is returned as it is: WaitApproval or
// Decide turn it into ApprovalExpired.
func (s *Store) GetApproval(ctx context.Context, id string) (Approval, error) {
	return approvalPrompts.get(ctx, s, id)
}

// Decide moves a pending approval to state (allow_once, allow_session, deny,
// withdrawn or expired), recording who decided, exactly once across all
// replicas: won is true only for the call that made the change. Every call
// returns the approval as stored afterwards, so a losing click can say who
// decided what. A decision after Expires records ApprovalExpired and does
// not win. Waiters on any replica are woken.
func (s *Store) Decide(ctx context.Context, id, state, by string) (a Approval, won bool, err error) {
	if err := approvalPrompts.check(id, state); err != nil {
		return Approval{}, false, err
	}
	return approvalPrompts.settle(ctx, s, id, state, by, "")
}

// WaitApproval blocks until the approval is decided (on any replica), its
// expiry passes (it is then decided ApprovalExpired through the same
// compare-and-set, and returned), or ctx ends (ctx's error; the approval
// stays pending). It wakes through a per-approval Redis list, checking ctx at
// least every second.
func (s *Store) WaitApproval(ctx context.Context, id string) (Approval, error) {
	return approvalPrompts.wait(ctx, s, id)
}

// PendingApprovals lists the thread's approvals still pending (including
// ones past expiry that nobody has decided yet), oldest first: for
// withdrawing them on Stop, and for a replica resuming a turn, which waits on
// the existing approval instead of posting a second prompt.
func (s *Store) PendingApprovals(ctx context.Context, k ThreadKey) ([]Approval, error) {
	return approvalPrompts.pending(ctx, s, k)
}

// ThreadApprovals lists thread k's approvals, pending or decided (until
// they expire), oldest first: a turn resumed by another holder finds the
// answer a person gave while the turn changed hands.
func (s *Store) ThreadApprovals(ctx context.Context, k ThreadKey) ([]Approval, error) {
	return approvalPrompts.inThread(ctx, s, k, true)
}
