package access

import (
	"context"
	"regexp"
	"slices"
	"strings"
)

// Scope is who may use a server's tools, and where. Empty lists mean no
// restriction of that kind; when several are set, a call is allowed when
// the place is allowed and every person the turn answers is allowed
// (listed in Users, or a member of a listed user group). The zero value
// offers the server to every full member of the workspace, in every
// channel and DM. The JSON is a stored format (the "scope" of a
// registration record, mcp.Record): extend, never rename; the YAML is
// MCP_CONFIG's.
type Scope struct {
	// Channels are the channel ids ("C…", "G…") the server is offered in.
	Channels []string `json:"channels,omitempty" yaml:"channels"`
	// Users are the user ids ("U…", "W…") who may use it.
	Users []string `json:"users,omitempty" yaml:"users"`
	// Usergroups are Slack user group ids ("S…") whose members may use it
	// (usergroups.users.list, resolved by the caller of Access.Members).
	Usergroups []string `json:"usergroups,omitempty" yaml:"usergroups"`
	// Guests lets guests (is_restricted, is_ultra_restricted) and people
	// of another organization (Slack Connect) use it; without it they get
	// none of its tools, even when listed in Users.
	Guests bool `json:"guests,omitempty" yaml:"guests"`
	// DM offers the server in direct messages (and the assistant pane,
	// which is one). A DM is not a channel: nil means true when Channels
	// is empty and false otherwise.
	DM *bool `json:"dm,omitempty" yaml:"dm"`
}

// IsZero reports whether the scope restricts nothing.
func (s Scope) IsZero() bool {
	return len(s.Channels) == 0 && len(s.Users) == 0 && len(s.Usergroups) == 0 && !s.Guests && s.DM == nil
}

// DMAllowed reports whether the server is offered in direct messages.
func (s Scope) DMAllowed() bool {
	if s.DM != nil {
		return *s.DM
	}
	return len(s.Channels) == 0
}

// Clone is a deep copy of s.
func (s Scope) Clone() Scope {
	c := s
	c.Channels, c.Users, c.Usergroups = slices.Clone(s.Channels), slices.Clone(s.Users), slices.Clone(s.Usergroups)
	if s.DM != nil {
		dm := *s.DM
		c.DM = &dm
	}
	return c
}

// Reasons a scope refuses an Access (Verdict.Reason).
const (
	ScopeChannel    = "channel"    // the channel is not listed (or no channel is known)
	ScopeDM         = "dm"         // the server is not offered in DMs
	ScopePerson     = "person"     // the person is not listed nor in a listed group
	ScopeGuest      = "guest"      // guests need guests: true
	ScopeExternal   = "external"   // people of another organization need guests: true
	ScopeUnverified = "unverified" // users.info failed: treated like a guest
)

// Verdict is a scope's answer for one Access.
type Verdict struct {
	OK bool
	// Reason is one of the Scope* constants when !OK; Person is the
	// person it concerns ("" for the place, or when nobody is known).
	Reason string
	Person string
}

// Check evaluates the scope for a: the place first, then every person.
func (s Scope) Check(ctx context.Context, a Access) Verdict {
	switch {
	case a.AnyPlace:
	case a.DM:
		if !s.DMAllowed() {
			return Verdict{Reason: ScopeDM}
		}
	case len(s.Channels) > 0 && !slices.Contains(s.Channels, a.Channel):
		return Verdict{Reason: ScopeChannel}
	}
	lists := len(s.Users) > 0 || len(s.Usergroups) > 0
	if lists && len(a.People) == 0 {
		return Verdict{Reason: ScopePerson}
	}
	var members map[string][]string // group → members, resolved once per Check
	for _, p := range a.People {
		if !s.Guests {
			switch {
			case p.Unverified:
				return Verdict{Reason: ScopeUnverified, Person: p.ID}
			case p.External:
				return Verdict{Reason: ScopeExternal, Person: p.ID}
			case p.Guest:
				return Verdict{Reason: ScopeGuest, Person: p.ID}
			}
		}
		if !lists || slices.Contains(s.Users, p.ID) {
			continue
		}
		if members == nil {
			members = map[string][]string{}
			for _, g := range s.Usergroups {
				if a.Members == nil {
					break
				}
				if m, err := a.Members(ctx, g); err == nil {
					members[g] = m
				}
			}
		}
		in := false
		for _, m := range members {
			if slices.Contains(m, p.ID) {
				in = true
				break
			}
		}
		if !in {
			return Verdict{Reason: ScopePerson, Person: p.ID}
		}
	}
	return Verdict{OK: true}
}

var (
	channelIDRE   = regexp.MustCompile(`^[CG][A-Z0-9]{1,31}$`)
	userIDRE      = regexp.MustCompile(`^[UW][A-Z0-9]{1,31}$`)
	usergroupIDRE = regexp.MustCompile(`^S[A-Z0-9]{1,31}$`)
)

// Validate calls bad with the field and the problem for every malformed
// id of the scope.
func (s Scope) Validate(bad func(field, format string, args ...any)) {
	for _, c := range s.Channels {
		switch {
		case strings.HasPrefix(c, "D"):
			bad("channels", "%q is a direct message, not a channel: use dm instead", c)
		case !channelIDRE.MatchString(c):
			bad("channels", "%q is not a channel id (C… or G…, as in the channel's details)", c)
		}
	}
	for _, u := range s.Users {
		if !userIDRE.MatchString(u) {
			bad("users", "%q is not a user id (U… or W…, as in the person's profile)", u)
		}
	}
	for _, g := range s.Usergroups {
		if !usergroupIDRE.MatchString(g) {
			bad("usergroups", "%q is not a user group id (S…)", g)
		}
	}
}
