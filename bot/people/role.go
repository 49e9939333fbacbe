package people

import (
	"context"
	"slices"
	"strings"

	"github.com/slack-go/slack"
)

// Role is what a person may do with the bot's controls.
type Role int

const (
	// None may not decide approvals or administer anything: bots, guests,
	// people of another workspace or organization, deactivated accounts,
	// and anyone users.info could not vouch for. The Reason says which.
	None Role = iota
	// Member is a full member of the workspace.
	Member
	// Admin is a workspace admin or owner, or listed in BOT_ADMINS.
	Admin
)

func (r Role) String() string {
	switch r {
	case Member:
		return "member"
	case Admin:
		return "admin"
	}
	return "none"
}

// Reason says why a person has no role (None); members and admins have
// NoReason.
type Reason int

const (
	NoReason Reason = iota
	// UnknownUser: no user, or users.info does not know them.
	UnknownUser
	// Bot: a bot, app or workflow user.
	Bot
	// Deactivated: a deactivated account.
	Deactivated
	// OtherWorkspace: a member of another workspace or organization.
	OtherWorkspace
	// Guest: a multi- or single-channel guest.
	Guest
	// LookupFailed: users.info could not be read just now (not cached:
	// the person may simply try again).
	LookupFailed
)

// String is the reason as people read it ("guest", "lookup failed").
func (r Reason) String() string {
	switch r {
	case UnknownUser:
		return "unknown user"
	case Bot:
		return "bot"
	case Deactivated:
		return "deactivated account"
	case OtherWorkspace:
		return "member of another workspace"
	case Guest:
		return "guest"
	case LookupFailed:
		return "lookup failed"
	}
	return ""
}

// plural names the people of a reason ("guest" → "guests").
func (r Reason) plural() string {
	if rest, ok := strings.CutPrefix(r.String(), "member of "); ok {
		return "members of " + rest
	}
	return r.String() + "s"
}

// classify decides a person's role from users.info in workspace team; the
// Reason says, for people who may not act, what they are.
func classify(u *slack.User, team string) (Role, Reason) {
	switch {
	case u == nil:
		return None, UnknownUser
	case u.IsBot || u.IsAppUser || u.IsWorkflowBot || u.IsConnectorBot:
		return None, Bot
	case u.Deleted:
		return None, Deactivated
	case u.IsStranger, u.TeamID != "" && team != "" && u.TeamID != team:
		return None, OtherWorkspace
	case u.IsRestricted || u.IsUltraRestricted:
		return None, Guest
	case u.IsAdmin || u.IsOwner || u.IsPrimaryOwner,
		u.Enterprise.IsAdmin || u.Enterprise.IsOwner || u.Enterprise.IsPrimaryOwner:
		return Admin, NoReason
	}
	return Member, NoReason
}

// Role returns the role of user, acting in workspace team. userTeam is the
// team the interaction payload names for the user ("" when absent): a
// mismatch means another workspace and no rights, even for BOT_ADMINS.
// BOT_ADMINS are admins without a users.info check. A failed lookup is
// None with LookupFailed, and not cached.
func (d *Directory) Role(ctx context.Context, team, user, userTeam string) (Role, Reason) {
	switch {
	case team == "" || user == "":
		return None, UnknownUser
	case userTeam != "" && userTeam != team:
		return None, OtherWorkspace
	case slices.Contains(d.admins, user):
		return Admin, NoReason
	}
	f, err := d.facts(ctx, team, user)
	if err != nil {
		return None, LookupFailed
	}
	return f.role, f.why
}

// MayDecide reports whether user may answer (or revoke) an approval that
// requester's turn asked for: the requester or an admin, and never a bot,
// guest, deactivated account or someone of another workspace. deny is the
// explanation for everyone else (mrkdwn-safe).
func (d *Directory) MayDecide(ctx context.Context, team, user, userTeam, requester string) (ok bool, deny string) {
	return d.MayAct(ctx, team, user, userTeam, requester, "answer this request")
}

// MayStop is MayDecide for the Stop button: the same people may stop the
// answer as may approve its tool calls.
func (d *Directory) MayStop(ctx context.Context, team, user, userTeam, requester string) (ok bool, deny string) {
	return d.MayAct(ctx, team, user, userTeam, requester, "stop this answer")
}

// MayAct is MayDecide's rule for any action on requester's behalf; action
// names it in the refusal ("answer this question").
func (d *Directory) MayAct(ctx context.Context, team, user, userTeam, requester, action string) (ok bool, deny string) {
	r, why := d.Role(ctx, team, user, userTeam)
	return decideRule(r, why, user, requester, action)
}

// decideRule is MayAct's rule, apart from the lookup.
func decideRule(r Role, why Reason, user, requester, action string) (bool, string) {
	switch {
	case r == None && why == LookupFailed:
		return false, "I couldn't check your account just now, so nothing happened. Please try again in a moment."
	case r == None:
		return false, "Only the person who asked, or a workspace admin, can " + action + " (" + why.plural() + " can't). Nothing happened."
	case r == Admin, user == requester && requester != "":
		return true, ""
	}
	return false, "Only the person who asked, or a workspace admin, can " + action + ". Nothing happened."
}
