package admin

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/session"
)

// /bobbin mcp scope: who may use a registered server's tools, and where.
// The scope lives in the registration's record (key "scope"), so every
// replica's MCP manager picks it up with the registrations (within its
// refresh, 10 s).

var (
	scopeChannelRE = regexp.MustCompile(`^[CG][A-Z0-9]{1,31}$`)
	scopeUserRE    = regexp.MustCompile(`^[UW][A-Z0-9]{1,31}$`)
	scopeGroupRE   = regexp.MustCompile(`^S[A-Z0-9]{1,31}$`)
)

// maxScopeEntries bounds the channels, people and groups of one scope.
const maxScopeEntries = 100

// parseScope reads the words after `/bobbin mcp scope <name>`: Slack's
// escaped mentions as they arrive in slash-command text (<#C…|name>,
// <@U…|name>, <!subteam^S…|@handle>), bare ids, `guests`, `dm:off`,
// `dm:on`; or `clear` alone.
func parseScope(args []string) (sc access.Scope, clear bool, err error) {
	args = joinMentions(args)
	if len(args) == 1 && strings.EqualFold(args[0], "clear") {
		return access.Scope{}, true, nil
	}
	add := func(list *[]string, id string) {
		if !slices.Contains(*list, id) {
			*list = append(*list, id)
		}
	}
	for _, a := range args {
		word := strings.ToLower(a)
		id := a
		if strings.HasPrefix(a, "<") && strings.HasSuffix(a, ">") {
			id = a[1 : len(a)-1]
			if i := strings.IndexByte(id, '|'); i >= 0 {
				id = id[:i]
			}
		}
		switch {
		case word == "clear":
			return access.Scope{}, false, usageError("`clear` lifts the whole scope: use it alone.")
		case word == "guests":
			sc.Guests = true
		case word == "dm:off" || word == "dm:no" || word == "dm:false":
			f := false
			sc.DM = &f
		case word == "dm:on" || word == "dm:yes" || word == "dm:true":
			t := true
			sc.DM = &t
		case strings.HasPrefix(id, "#"):
			ch := strings.TrimPrefix(id, "#")
			switch {
			case strings.HasPrefix(ch, "D"):
				return access.Scope{}, false, usageError("Direct messages are not channels: use `dm:on` to offer the server in DMs.")
			case scopeChannelRE.MatchString(ch):
				add(&sc.Channels, ch)
			default:
				return access.Scope{}, false, usageError(fmt.Sprintf("I can't tell which channel %q is. Pick it from Slack's suggestions as you type `#`, so it arrives as a link, or give its id (C…, in the channel's details).", mrkdwn.Clip(a, 40)))
			}
		case strings.HasPrefix(id, "@"):
			u := strings.TrimPrefix(id, "@")
			if !scopeUserRE.MatchString(u) {
				return access.Scope{}, false, usageError(fmt.Sprintf("I can't tell who %q is. Pick the person from Slack's suggestions as you type `@`, or give their member id (U…, in their profile).", mrkdwn.Clip(a, 40)))
			}
			add(&sc.Users, u)
		case strings.HasPrefix(id, "!subteam^"):
			g := strings.TrimPrefix(id, "!subteam^")
			if !scopeGroupRE.MatchString(g) {
				return access.Scope{}, false, usageError(fmt.Sprintf("%q is not a user group.", mrkdwn.Clip(a, 40)))
			}
			add(&sc.Usergroups, g)
		case strings.HasPrefix(id, "D") && scopeChannelRE.MatchString("C"+id[1:]):
			return access.Scope{}, false, usageError("Direct messages are not channels: use `dm:on` to offer the server in DMs.")
		case scopeChannelRE.MatchString(id):
			add(&sc.Channels, id)
		case scopeUserRE.MatchString(id):
			add(&sc.Users, id)
		case scopeGroupRE.MatchString(id):
			add(&sc.Usergroups, id)
		default:
			return access.Scope{}, false, usageError(fmt.Sprintf("I don't understand %q in a scope: use channels (#channel), people (@person), user groups (@group), `guests`, `dm:off`, `dm:on`, or `clear` alone.", mrkdwn.Clip(a, 40)))
		}
	}
	if len(sc.Channels)+len(sc.Users)+len(sc.Usergroups) > maxScopeEntries {
		return access.Scope{}, false, usageError(fmt.Sprintf("At most %d channels, people and groups in one scope, please.", maxScopeEntries))
	}
	if sc.IsZero() {
		return access.Scope{}, false, usageError("Say who may use the server and where, or `clear` to lift its scope.")
	}
	return sc, false, nil
}

// joinMentions puts back together a mention whose label has spaces
// (<@U1|Alice Archer>) that tokenize split.
func joinMentions(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "<") && !strings.HasSuffix(a, ">") {
			j := i + 1
			for j < len(args) && !strings.HasSuffix(args[j], ">") {
				j++
			}
			if j < len(args) {
				a = strings.Join(args[i:j+1], " ")
				i = j
			}
		}
		out = append(out, a)
	}
	return out
}

// describeScope says in a line who may use a server, and where. Groups are
// shown as ids, never as <!subteam^…> (that would notify them).
func describeScope(s access.Scope) string {
	var where string
	if len(s.Channels) == 0 {
		where = "every channel"
	} else {
		chans := make([]string, len(s.Channels))
		for i, c := range s.Channels {
			chans[i] = "<#" + mrkdwn.EscapeText(c) + ">"
		}
		where = "only in " + strings.Join(chans, ", ")
	}
	if s.DMAllowed() {
		where += " and DMs"
	} else {
		where += ", not in DMs"
	}
	who := "every member"
	if len(s.Users) > 0 || len(s.Usergroups) > 0 {
		var names []string
		for _, u := range s.Users {
			names = append(names, "<@"+mrkdwn.EscapeText(u)+">")
		}
		for _, g := range s.Usergroups {
			names = append(names, "members of `"+mrkdwn.InlineCode(g)+"`")
		}
		who = "only " + strings.Join(names, ", ")
	}
	guests := "no guests or people of other organizations"
	if s.Guests {
		guests = "guests and people of other organizations too"
	}
	return where + " · " + who + " · " + guests
}

// describeVerdict says whether the tools are offered to the person asking.
func describeVerdict(v *access.Verdict) string {
	if v == nil {
		return ""
	}
	if v.OK {
		return ":white_check_mark: available to you here"
	}
	why := "you are not among its people or groups"
	switch v.Reason {
	case access.ScopeChannel:
		why = "not offered in this channel"
	case access.ScopeDM:
		why = "not offered in direct messages"
	case access.ScopeGuest:
		why = "not offered to guests"
	case access.ScopeExternal:
		why = "not offered to people of other organizations"
	case access.ScopeUnverified:
		why = "I couldn't check your account"
	}
	return ":no_entry_sign: not available to you here (" + why + ")"
}

// scopeSummary is the audit's one-line form of a scope.
func scopeSummary(s access.Scope) string {
	if s.IsZero() {
		return "unrestricted"
	}
	var parts []string
	for _, f := range []struct {
		k string
		v []string
	}{{"channels", s.Channels}, {"users", s.Users}, {"usergroups", s.Usergroups}} {
		if len(f.v) > 0 {
			parts = append(parts, f.k+"="+strings.Join(f.v, ","))
		}
	}
	if s.Guests {
		parts = append(parts, "guests")
	}
	if s.DM != nil {
		parts = append(parts, fmt.Sprintf("dm=%t", *s.DM))
	}
	return strings.Join(parts, " ")
}

// mcpScope answers /bobbin mcp scope: it replaces (or, with clear, lifts)
// the scope of a server registered from Slack. Servers of MCP_CONFIG are
// the operator's.
func (a *Admin) mcpScope(ctx context.Context, team, user, name string, want access.Scope, clear bool) string {
	err := a.o.MCP.Registered(ctx, team, name)
	if errors.Is(err, session.ErrNotFound) {
		for _, st := range a.o.MCP.Status(ctx, team) {
			if st.Name == name && st.Source == "config" {
				return fmt.Sprintf("`%s` comes from the operator's configuration (MCP_CONFIG): its scope can only be changed there. Now: %s.",
					mrkdwn.InlineCode(name), describeScope(st.Scope))
			}
		}
		return fmt.Sprintf("This workspace has no MCP server named `%s`. See `/bobbin mcp list`.", mrkdwn.InlineCode(name))
	}
	if err != nil {
		a.log.Warn("bot: reading a registration failed", "team", team, "server", name, "err", err)
		return "I couldn't read the server's registration just now. Nothing changed; please try again in a moment."
	}
	for _, g := range want.Usergroups {
		err := a.o.People.CheckGroup(ctx, team, g)
		switch {
		case errors.Is(err, ErrNoSuchGroup):
			return fmt.Sprintf("This workspace has no user group `%s` (or it is disabled). Nothing changed.", mrkdwn.InlineCode(g))
		case errors.Is(err, ErrGroupsNeedPlan):
			return "User groups need a paid Slack plan, which this workspace does not have. Nothing changed."
		case err != nil:
			return fmt.Sprintf("I couldn't check the user group `%s` just now. Nothing changed; please try again in a moment.", mrkdwn.InlineCode(g))
		}
	}
	// The manager keeps every other field of the record as it is.
	var set *access.Scope
	if clear {
		want = access.Scope{}
	} else {
		set = &want
	}
	err = a.o.MCP.SetScope(ctx, team, name, set)
	switch {
	case errors.Is(err, session.ErrNotFound): // removed meanwhile: not brought back
		return fmt.Sprintf("This workspace has no MCP server named `%s`. See `/bobbin mcp list`.", mrkdwn.InlineCode(name))
	case errors.Is(err, servers.ErrBadRecord):
		a.log.Warn("bot: a registration record does not decode", "team", team, "server", name, "err", err)
		return "The server's registration is damaged; remove it and add it again. Nothing changed."
	case err != nil:
		a.log.Warn("bot: saving a registration failed", "team", team, "server", name, "err", err)
		return "I couldn't save the scope just now. Nothing changed; please try again in a moment."
	}
	a.o.Audit(ctx, team, map[string]string{"event": auditMCPScope, "by": user, "server": name, "outcome": scopeSummary(want)})
	if clear {
		return fmt.Sprintf("Lifted the scope of `%s`: %s. Every replica applies it from its next turn.", mrkdwn.InlineCode(name), describeScope(want))
	}
	return fmt.Sprintf("*Scope of `%s`*: %s. Every replica applies it from its next turn; turns already running are refused calls that it no longer allows.",
		mrkdwn.InlineCode(name), describeScope(want))
}

// auditMCPScope records a scope change.
const auditMCPScope = "mcp_scope"
