package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
)

// Tool policies (/bobbin mcp policy): per server and tool glob, ask, auto,
// auto-in-dm, admin or deny, and private or public. The mcp package
// resolves them; the bot sets them, shows them and applies their approval
// rules (bot/ask/policy.go).

// Policies is what /bobbin mcp policy needs of the MCP manager; an MCP
// without it has no policies to show or set.
type Policies interface {
	Policies(ctx context.Context, team string) ([]servers.PolicyReport, error)
	// SetPolicy stores an admin's rule (a rule with no mode and no
	// privacy removes the glob's rule); servers.ErrUnknownServer for a server
	// the workspace does not have.
	SetPolicy(ctx context.Context, team, server string, r servers.Rule) (servers.PolicyReport, error)
}

// opPolicy is /bobbin mcp policy.
const opPolicy = "mcp policy"

// policyUsage is the command's grammar, for mistakes.
const policyUsage = "Usage: `/bobbin mcp policy <server> [<tool-glob>] ask|auto|auto-in-dm|admin|deny [private|public]` " +
	"(`private` or `public` may stand alone; `clear` removes the rule of that glob; `/bobbin mcp policy <server>` shows the policy)."

// policyHelp is the help line.
const policyHelp = "• `/bobbin mcp policy <name> [<tool-glob>] ask|auto|auto-in-dm|admin|deny [private]`: which tools run without asking, need an admin, or are never offered; `private` results go to the asker only _(admins)_\n"

// policyCmd is a parsed /bobbin mcp policy.
type policyCmd struct {
	Rule  servers.Rule
	Clear bool
	Show  bool
}

// parsePolicy parses the arguments of `mcp policy`.
func parsePolicy(args []string) (command, error) {
	if len(args) == 0 {
		return command{}, usageError(policyUsage)
	}
	if err := checkServerName(args[0]); err != nil {
		return command{}, err
	}
	cmd := command{Op: opPolicy, Name: args[0], Policy: &policyCmd{Rule: servers.Rule{Tool: "*"}}}
	rest := args[1:]
	if len(rest) == 0 {
		cmd.Policy.Show = true
		return cmd, nil
	}
	if w := strings.ToLower(rest[0]); !isPolicyWord(w) && w != "clear" {
		glob := rest[0]
		if len(glob) > 128 {
			return command{}, usageError("That tool name is too long.")
		}
		cmd.Policy.Rule.Tool = glob
		rest = rest[1:]
	}
	if len(rest) == 1 && strings.EqualFold(rest[0], "clear") {
		cmd.Policy.Clear = true
		return cmd, nil
	}
	if len(rest) == 0 {
		return command{}, usageError("Say the policy for `" + mrkdwn.InlineCode(cmd.Policy.Rule.Tool) + "`. " + policyUsage)
	}
	for _, w := range rest {
		lw := strings.ToLower(w)
		switch {
		case lw == "private" || lw == "public":
			if cmd.Policy.Rule.Private != nil {
				return command{}, usageError("Say `private` or `public` once. " + policyUsage)
			}
			p := lw == "private"
			cmd.Policy.Rule.Private = &p
		case slices.Contains(servers.Modes, servers.Mode(lw)):
			if cmd.Policy.Rule.Mode != "" {
				return command{}, usageError("Say one mode, not `" + string(cmd.Policy.Rule.Mode) + "` and `" + lw + "`. " + policyUsage)
			}
			cmd.Policy.Rule.Mode = servers.Mode(lw)
		default:
			return command{}, usageError(fmt.Sprintf("%q is not a mode (ask, auto, auto-in-dm, admin, deny) nor private or public. %s", mrkdwn.Clip(w, 40), policyUsage))
		}
	}
	return cmd, nil
}

func isPolicyWord(w string) bool {
	return w == "private" || w == "public" || slices.Contains(servers.Modes, servers.Mode(w))
}

// mcpPolicy answers /bobbin mcp policy: it sets (or clears, or shows) a
// rule and confirms with the server's policy as it now is.
func (a *Admin) mcpPolicy(ctx context.Context, team, user, name string, pc policyCmd) string {
	pa, ok := a.o.MCP.(Policies)
	if !ok {
		return "Tool policies are not available on this bot."
	}
	if pc.Show {
		all, err := pa.Policies(ctx, team)
		if err != nil {
			a.log.Warn("bot: reading tool policies failed", "team", team, "err", err)
			return "I couldn't read the tool policies just now. Please try again in a moment."
		}
		for _, sp := range all {
			if sp.Server == name {
				return fmt.Sprintf("*Tool policy of `%s`*\n%s", mrkdwn.InlineCode(name), describePolicy(sp, true))
			}
		}
		return fmt.Sprintf("This workspace has no MCP server named `%s`. See `/bobbin mcp list`.", mrkdwn.InlineCode(name))
	}
	rule := pc.Rule
	if pc.Clear {
		rule = servers.Rule{Tool: pc.Rule.Tool}
	}
	sp, err := pa.SetPolicy(ctx, team, name, rule)
	if errors.Is(err, servers.ErrUnknownServer) {
		return fmt.Sprintf("This workspace has no MCP server named `%s`. See `/bobbin mcp list`.", mrkdwn.InlineCode(name))
	}
	if err != nil {
		a.log.Warn("bot: setting a tool policy failed", "team", team, "server", name, "err", err)
		return "I couldn't save the policy just now. Nothing changed; please try again in a moment."
	}
	words := policyWords(rule)
	if pc.Clear {
		words = "clear"
	}
	a.o.Audit(ctx, team, map[string]string{"event": auditMCPPolicy, "by": user, "server": name, "tool": rule.Tool, "outcome": words})
	head := fmt.Sprintf("*Tool policy of `%s`*: `%s` is now %s.", mrkdwn.InlineCode(name), mrkdwn.InlineCode(rule.Tool), mrkdwn.EscapeText(words))
	if pc.Clear {
		head = fmt.Sprintf("*Tool policy of `%s`*: removed the rule of `%s`.", mrkdwn.InlineCode(name), mrkdwn.InlineCode(rule.Tool))
	}
	return head + " The next turn on every replica applies it.\n" + describePolicy(sp, true)
}

// auditMCPPolicy records a policy change.
const auditMCPPolicy = "mcp_policy"

// policyWords is a rule as typed ("auto private").
func policyWords(r servers.Rule) string {
	w := r.Words()
	if r.Reset {
		w = strings.TrimSpace(w + " (reset to ask: its definition changed)")
	}
	return w
}

// modeWords says what a mode does, for people.
func policyModeWords(mode string) string {
	switch mode {
	case "auto":
		return "runs without asking"
	case "auto-in-dm":
		return "runs without asking in DMs, asks in channels"
	case "admin":
		return "an admin must approve"
	case "deny":
		return "never offered"
	}
	return "asks"
}

// describePolicy lists a server's rules (with rules true) and groups its
// tools by what happens when the model calls them.
func describePolicy(sp servers.PolicyReport, rules bool) string {
	var s strings.Builder
	if rules {
		for _, set := range []struct {
			who   string
			rules []servers.Rule
		}{{"operator's configuration", sp.Config}, {"set by admins", sp.Admin}} {
			if len(set.rules) == 0 {
				continue
			}
			parts := make([]string, 0, len(set.rules))
			for _, r := range set.rules {
				parts = append(parts, fmt.Sprintf("`%s` %s", mrkdwn.InlineCode(r.Tool), mrkdwn.EscapeText(policyWords(r))))
			}
			fmt.Fprintf(&s, "    rules (%s): %s\n", set.who, strings.Join(parts, " · "))
		}
	}
	if line := policyToolsLine(sp); line != "" {
		s.WriteString("    " + line + "\n")
	}
	if s.Len() == 0 {
		return "    every tool asks (no rules, no trusted annotations)\n"
	}
	return s.String()
}

// policyToolsLine groups tools by mode: "auto: `a`, `b` · ask: `c`".
func policyToolsLine(sp servers.PolicyReport) string {
	var parts []string
	for _, mode := range servers.Modes {
		var names []string
		for _, t := range sp.Tools {
			if t.Mode != mode {
				continue
			}
			n := "`" + mrkdwn.InlineCode(t.Tool) + "`"
			var notes []string
			if t.OnceOnly {
				notes = append(notes, "every time")
			}
			if t.Private {
				notes = append(notes, "private")
			}
			if t.Source == "definition changed" {
				notes = append(notes, "definition changed")
			}
			if len(notes) > 0 {
				n += " (" + strings.Join(notes, ", ") + ")"
			}
			names = append(names, n)
		}
		if len(names) > 0 {
			parts = append(parts, fmt.Sprintf("%s (%s): %s", mode, policyModeWords(string(mode)), strings.Join(names, ", ")))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "policy: " + strings.Join(parts, " · ")
}

// fillPolicies sets ServerStatus.Policy of every server, when the MCP
// manager knows policies (for /bobbin mcp list and the App Home).
func (a *Admin) fillPolicies(ctx context.Context, team string, st []servers.Status) {
	pa, ok := a.o.MCP.(Policies)
	if !ok || len(st) == 0 {
		return
	}
	all, err := pa.Policies(ctx, team)
	if err != nil {
		a.log.Info("bot: reading tool policies failed", "team", team, "err", err)
		return
	}
	for i := range st {
		for _, sp := range all {
			if sp.Server == st[i].Name {
				st[i].Policy = &sp
			}
		}
	}
}
