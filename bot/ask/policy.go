package ask

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/session"
)

// The approval prompt under a tool policy: `admin` tools take an admin's
// click only; tools a trusted server calls destructive are asked for every
// time, without "Always allow in this thread".

// policyAdminWho replaces "<@asker> or a workspace admin can decide".
// What a refusal names: "Only the person who asked, or a workspace admin,
// can answer this request."
const (
	actApprove = "answer this request"
	actAnswer  = "answer this question"
)

const policyAdminWho = "Only a workspace admin can decide (this tool's policy is `admin`)."

// policyMayDecide refuses, with a word to the clicker and an audit entry,
// a click the tool policy does not accept: on an admin-only approval,
// anyone but an admin (the asker included). Roles.MayAct has already
// accepted the asker or an admin.
func (p *Prompts) policyMayDecide(ctx context.Context, cb slack.InteractionCallback, ap session.Approval, action string) bool {
	if !ap.AdminOnly {
		return true
	}
	admin, unchecked := p.opts.Roles.IsAdmin(ctx, ap.Team, cb.User.ID, cb.User.TeamID)
	if admin {
		return true
	}
	msg := "Only a workspace admin can approve this tool (its policy is `admin`). Nothing happened."
	if unchecked {
		msg = "I couldn't check your account just now, so nothing happened. Please try again in a moment."
	}
	p.Tell(ctx, cb, ap.ThreadTS, msg)
	p.opts.Audit(ctx, ap.Team, map[string]string{
		"event": auditRefused, "channel": ap.Channel, "thread": ap.ThreadTS, "user": ap.Requester, "by": cb.User.ID,
		"tool": ap.Tool, "server": ap.Server, "approval": ap.ID, "outcome": action, "policy": "admin",
	})
	return false
}

// ArgsDigest is a short digest of a call's arguments (compacted JSON), so
// the audit can tell calls apart without holding their content.
func ArgsDigest(args json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, args) != nil {
		buf.Reset()
		buf.Write(args)
	}
	sum := sha256.Sum256(buf.Bytes())
	return "sha256:" + hex.EncodeToString(sum[:12])
}
