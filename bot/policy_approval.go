package bot

import (
	"context"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/session"
)

// The approval prompt under a tool policy: `admin` tools take an admin's
// click only; tools a trusted server calls destructive are asked for every
// time, without "Always allow in this thread".

// policyAdminWho replaces "<@asker> or a workspace admin can decide".
const policyAdminWho = "Only a workspace admin can decide (this tool's policy is `admin`)."

// policyMayDecide refuses, with a word to the clicker and an audit entry,
// a click the tool policy does not accept: on an admin-only approval,
// anyone but an admin (the asker included). mayDecide has already
// accepted the asker or an admin.
func (b *Bot) policyMayDecide(ctx context.Context, cb slack.InteractionCallback, ap session.Approval, action string) bool {
	if !ap.AdminOnly {
		return true
	}
	r, why := b.roleOf(ctx, ap.Team, cb.User.ID, cb.User.TeamID)
	if r == roleAdmin {
		return true
	}
	msg := "Only a workspace admin can approve this tool (its policy is `admin`). Nothing happened."
	if why == "lookup failed" {
		msg = "I couldn't check your account just now, so nothing happened. Please try again in a moment."
	}
	b.tell(ctx, cb, ap.ThreadTS, msg)
	b.audit(ctx, ap.Team, map[string]string{
		"event": auditRefused, "channel": ap.Channel, "thread": ap.ThreadTS, "user": ap.Requester, "by": cb.User.ID,
		"tool": ap.Tool, "server": ap.Server, "approval": ap.ID, "outcome": action, "policy": "admin",
	})
	return false
}
