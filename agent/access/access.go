// Package access is the vocabulary of who a turn's tools are for: where
// the turn runs and whose messages it answers. bot builds an Access (the
// people's flags from users.info, user group members) and mcp checks its
// servers' scopes (Scope, Verdict) against it, both with this one
// definition. The Caller of a tool call (WithCaller, CallerFrom) is how
// the bot tells a tool who asked, and where.
package access

import "context"

// Access is where a turn runs and whose messages it answers: what the
// scopes are checked against. The tool source binds the tools it offers
// to it and checks it again at every call.
type Access struct {
	Team string
	// Channel is the conversation id; DM is set for direct messages
	// (including the assistant pane). Neither set: no place is known and
	// only servers without channel restrictions are offered.
	Channel string
	DM      bool
	// AnyPlace skips the place: whether the people may use the server
	// somewhere (the App Home, which is no conversation, offers Connect
	// only for servers the person may use).
	AnyPlace bool
	// People are the people whose messages the turn answers: every one of
	// them must be allowed (a merged turn of several people needs all).
	People []Person
	// Members lists a user group's members (cached); nil, or an error,
	// counts as no members (the group grants nothing).
	Members func(ctx context.Context, group string) ([]string, error)
}

// Person is one person a turn answers, as users.info described them.
type Person struct {
	ID string
	// Guest: is_restricted or is_ultra_restricted.
	Guest bool
	// External: of another organization (Slack Connect): is_stranger, or
	// a workspace that is not this one (users.info team_id, the event's
	// user_team) and not of the same Enterprise Grid org.
	External bool
	// Unverified: users.info could not be read; treated like a guest.
	Unverified bool
}

// Caller is who asked for a tool call, and where: OAuth user mode acts as
// User, and servers' questions go to them in Channel/Thread.
type Caller struct {
	Team, User, Channel, Thread string
}

type callerKey struct{}

// WithCaller returns ctx carrying who asked. The bot sets it on the
// context of a turn; tool calls read it (CallerFrom).
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller set by WithCaller; ok is false when there
// is none (or it names no user).
func CallerFrom(ctx context.Context) (c Caller, ok bool) {
	c, ok = ctx.Value(callerKey{}).(Caller)
	return c, ok && c.User != ""
}
