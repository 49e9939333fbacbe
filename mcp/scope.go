package mcp

import (
	"context"
	"fmt"
	"strings"

	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/agent/servers"
)

// Scope is who may use a server's tools, and where (one definition with
// the bot: access.Scope).
type Scope = access.Scope

// Access is where a turn runs and whose messages it answers: what the
// scopes are checked against (one definition with the bot:
// access.Access). The Manager binds the tools it offers to it and checks
// it again at every call.
type Access = access.Access

// Person is one person a turn answers, as users.info described them
// (access.Person).
type Person = access.Person

// Verdict is a scope's answer for one Access (access.Verdict).
type Verdict = access.Verdict

// ValidateScope checks the ids of a scope (for registered servers; the
// config file's are checked by LoadConfig).
func ValidateScope(s Scope) error {
	var errs []string
	s.Validate(func(field, format string, args ...any) {
		errs = append(errs, field+": "+fmt.Sprintf(format, args...))
	})
	if len(errs) > 0 {
		return fmt.Errorf("mcp: scope: %s", strings.Join(errs, "; "))
	}
	return nil
}

// describe says in words, for the model, why a call was refused.
func describeVerdict(v Verdict) string {
	switch v.Reason {
	case access.ScopeChannel:
		return "its server is not offered in this channel"
	case access.ScopeDM:
		return "its server is not offered in direct messages"
	case access.ScopeGuest:
		return "its server is not offered to guests"
	case access.ScopeExternal:
		return "its server is not offered to people of other organizations"
	case access.ScopeUnverified:
		return "the account of a person in this conversation could not be checked"
	}
	return "its server is not offered to the people in this conversation"
}

// scopeAt checks a against the current scope of mt's server: registrations
// are reconciled first (from the cache, re-read every RegistrationTTL), so
// a scope narrowed on any replica applies to calls of turns already
// running.
func (m *Manager) scopeAt(ctx context.Context, mt *mount, a Access) Verdict {
	scope := mt.scopeNow()
	if mts, err := m.mounts(ctx, mt.team); err == nil {
		for _, cur := range mts {
			if cur.cfg.Name == mt.cfg.Name {
				scope = cur.scopeNow()
				break
			}
		}
	}
	return scope.Check(ctx, a)
}

// StatusAt is StatusFor for the first person of a (OAuth states) with
// every server's verdict for a in ServerStatus.Here: whether its tools are
// offered to those people in that place.
func (m *Manager) StatusAt(ctx context.Context, a Access) []servers.Status {
	user := ""
	if len(a.People) > 0 {
		user = a.People[0].ID
	}
	out := m.StatusFor(ctx, a.Team, user)
	for i := range out {
		v := out[i].Scope.Check(ctx, a)
		out[i].Here = &v
	}
	return out
}
