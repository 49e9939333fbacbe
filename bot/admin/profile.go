package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent/profile"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/session"
)

// /bobbin profile list | show <name> | use <name> [#channel] | clear [#channel]
// and /bobbin usage [me] (issue 27). Profile commands and the workspace's
// usage are for admins; anyone may see their own usage.

// Audit events of these commands.
const (
	auditProfileUse   = "profile_use"
	auditProfileClear = "profile_clear"
)

const profileHelp = "• `/bobbin profile list`, `/bobbin profile show <name>`: the operator's agent profiles and which applies where _(admins)_\n" +
	"• `/bobbin profile use <name> [#channel]`, `/bobbin profile clear [#channel]`: bind a profile to a channel (default: this one), or remove the binding _(admins)_\n" +
	"• `/bobbin usage`: this month's and today's model usage by channel, person and model _(admins)_; `/bobbin usage me`: yours\n"

// operatorSlash handles the profile and usage commands; ok=false leaves
// the command to Slash.
func (a *Admin) operatorSlash(ctx context.Context, sc slack.SlashCommand) (ack any, ok bool) {
	toks, err := tokenize(sc.Text)
	if err != nil || len(toks) == 0 {
		return nil, false
	}
	verb := strings.ToLower(toks[0])
	if verb != "profile" && verb != "profiles" && verb != "usage" {
		return nil, false
	}
	team, user, channel := sc.TeamID, sc.UserID, sc.ChannelID
	ms := a.o.Store
	args := toks[1:]
	who := a.o.People.Standing(ctx, team, user, "")
	if verb == "usage" && len(args) == 1 && strings.EqualFold(args[0], "me") {
		if !who.MayUse {
			return ephemeralAck(noRightsText(who)), true
		}
		return ephemeralAck(a.usageMe(ctx, team, user)), true
	}
	op := verb
	if verb != "usage" {
		op = "profile"
		if len(args) > 0 {
			op += " " + strings.ToLower(args[0])
		}
	}
	if !who.Admin {
		a.o.Audit(ctx, team, map[string]string{"event": auditAdminRefused, "by": user, "outcome": op})
		if who.Unchecked {
			return ephemeralAck(noRightsText(who)), true
		}
		return ephemeralAck("Only workspace admins can use `/bobbin " + mrkdwn.EscapeText(op) + "`. Ask an admin of this workspace to do it."), true
	}
	to := Target{ResponseURL: sc.ResponseURL, Channel: channel, User: user, Team: team}
	if verb == "usage" {
		if len(args) > 0 {
			return ephemeralAck("Usage: `/bobbin usage` (the workspace's, admins) or `/bobbin usage me` (yours)."), true
		}
		return a.answer(ctx, to, a.usageReport(ctx, team)), true
	}
	cfg := a.o.Profiles
	if cfg == nil {
		return ephemeralAck("No agent profiles are configured: the operator sets them in the file named by `PROFILES_CONFIG`."), true
	}
	if len(args) == 0 {
		return ephemeralAck("Usage: `/bobbin profile list`, `show <name>`, `use <name> [#channel]` or `clear [#channel]`."), true
	}
	sub, rest := strings.ToLower(args[0]), joinMentions(args[1:])
	switch sub {
	case "list", "ls":
		return a.answer(ctx, to, a.profileList(ctx, team, channel)), true
	case "show":
		if len(rest) != 1 {
			return ephemeralAck("Usage: `/bobbin profile show <name>`."), true
		}
		p := cfg.Profile(rest[0])
		if p == nil {
			return ephemeralAck(fmt.Sprintf("There is no profile %s. `/bobbin profile list` shows them.", inlineCodeQ(rest[0]))), true
		}
		return a.answer(ctx, to, a.profileShow(ctx, team, p)), true
	case "use":
		if len(rest) < 1 || len(rest) > 2 {
			return ephemeralAck("Usage: `/bobbin profile use <name> [#channel]`."), true
		}
		if cfg.Profile(rest[0]) == nil {
			return ephemeralAck(fmt.Sprintf("There is no profile %s. `/bobbin profile list` shows them.", inlineCodeQ(rest[0]))), true
		}
		ch, err := channelArg(rest[1:], channel)
		if err != nil {
			return ephemeralAck(mrkdwn.EscapeText(err.Error())), true
		}
		if err := ms.SetProfileBinding(ctx, team, ch, rest[0]); err != nil {
			a.log.Warn("bot: binding a profile failed", "team", team, "channel", ch, "err", err)
			return ephemeralAck("I couldn't save that just now. Please try again in a moment."), true
		}
		a.o.Audit(ctx, team, map[string]string{"event": auditProfileUse, "by": user, "channel": ch, "profile": rest[0]})
		return ephemeralAck(fmt.Sprintf("<#%s> now uses the profile %s, from its next turn on.", ch, inlineCodeQ(rest[0]))), true
	case "clear":
		if len(rest) > 1 {
			return ephemeralAck("Usage: `/bobbin profile clear [#channel]`."), true
		}
		ch, err := channelArg(rest, channel)
		if err != nil {
			return ephemeralAck(mrkdwn.EscapeText(err.Error())), true
		}
		if err := ms.SetProfileBinding(ctx, team, ch, ""); err != nil {
			a.log.Warn("bot: clearing a profile binding failed", "team", team, "channel", ch, "err", err)
			return ephemeralAck("I couldn't save that just now. Please try again in a moment."), true
		}
		a.o.Audit(ctx, team, map[string]string{"event": auditProfileClear, "by": user, "channel": ch})
		p, src := cfg.Resolve(ch, strings.HasPrefix(ch, "D"), "")
		return ephemeralAck(fmt.Sprintf("<#%s> has no profile binding now; it uses %s.", ch, describeProfile(p, src))), true
	}
	return ephemeralAck("I don't know `profile " + mrkdwn.EscapeText(mrkdwn.Clip(sub, 30)) + "`: use `list`, `show`, `use` or `clear`."), true
}

// channelArg is the channel of a [#channel] argument, or here.
func channelArg(args []string, here string) (string, error) {
	if len(args) == 0 {
		return here, nil
	}
	a := args[0]
	id := a
	if strings.HasPrefix(a, "<") && strings.HasSuffix(a, ">") {
		id = a[1 : len(a)-1]
		if i := strings.IndexByte(id, '|'); i >= 0 {
			id = id[:i]
		}
	}
	id = strings.TrimPrefix(id, "#")
	if !scopeChannelRE.MatchString(id) {
		return "", usageError(fmt.Sprintf("I can't tell which channel %q is. Pick it from Slack's suggestions as you type `#`, or give its id (C…).", mrkdwn.Clip(a, 40)))
	}
	return id, nil
}

func inlineCodeQ(s string) string { return "`" + mrkdwn.InlineCode(s) + "`" }

func describeProfile(p *profile.Profile, src profile.Source) string {
	if p == nil {
		return "no profile (the bot's plain settings)"
	}
	where := map[profile.Source]string{profile.SourceBinding: "bound by an admin", profile.SourceChannel: "from the configuration's channels",
		profile.SourceDM: "the configuration's profile for DMs", profile.SourceDefault: "the configuration's default"}[src]
	return fmt.Sprintf("the profile %s (%s)", inlineCodeQ(p.Name), where)
}

// profileHereLine says which profile applies in channel, for mcp list
// ("" without profiles).
func (a *Admin) profileHereLine(ctx context.Context, team, channel string) string {
	if a.o.Profiles == nil {
		return ""
	}
	p, src := a.o.Profile(ctx, team, channel)
	line := "Agent profile here: " + describeProfile(p, src)
	if p.Narrows() {
		line += "; it offers only the servers it names"
	}
	return line + ".\n"
}

// homeProfileLine says which profiles apply in DMs and in channels without
// their own, for the App Home ("" without profiles).
func (a *Admin) homeProfileLine() string {
	cfg := a.o.Profiles
	if cfg == nil {
		return ""
	}
	dm, dmSrc := cfg.Resolve("", true, "")
	def, defSrc := cfg.Resolve("", false, "")
	return "Agent profile in DMs with me: " + describeProfile(dm, dmSrc) + ". In channels without one of their own: " +
		describeProfile(def, defSrc) + " (`/bobbin mcp list` in a channel says which applies there)."
}

func (a *Admin) profileList(ctx context.Context, team, here string) string {
	cfg := a.o.Profiles
	var s strings.Builder
	p, src := a.o.Profile(ctx, team, here)
	fmt.Fprintf(&s, "*Agent profiles* (here: %s)\n", describeProfile(p, src))
	for _, p := range cfg.Profiles {
		fmt.Fprintf(&s, "• %s: model %s", inlineCodeQ(p.Name), inlineCodeQ(cmp.Or(p.Model, a.o.Model)))
		if p.Respond != "" {
			fmt.Fprintf(&s, ", answers %s", p.Respond)
		}
		if p.Narrows() {
			fmt.Fprintf(&s, ", %d MCP servers", len(p.Servers)+len(p.RegisteredServers))
		}
		s.WriteString("\n")
	}
	if cfg.Default != "" {
		fmt.Fprintf(&s, "Default: %s. ", inlineCodeQ(cfg.Default))
	}
	if cfg.DM != "" {
		fmt.Fprintf(&s, "Direct messages: %s. ", inlineCodeQ(cfg.DM))
	}
	if bs, err := a.o.Store.ProfileBindings(ctx, team); err == nil && len(bs) > 0 {
		s.WriteString("\n*Bound by admins*\n")
		for _, ch := range slices.Sorted(maps.Keys(bs)) {
			fmt.Fprintf(&s, "• <#%s>: %s\n", ch, inlineCodeQ(bs[ch]))
		}
	}
	return strings.TrimSpace(s.String())
}

func (a *Admin) profileShow(ctx context.Context, team string, p *profile.Profile) string {
	var s strings.Builder
	fmt.Fprintf(&s, "*Profile %s*\n", inlineCodeQ(p.Name))
	fmt.Fprintf(&s, "• Model: %s", inlineCodeQ(cmp.Or(p.Model, a.o.Model)))
	if p.Provider != "" {
		fmt.Fprintf(&s, " via %s", inlineCodeQ(p.Provider))
	}
	s.WriteString("\n")
	fmt.Fprintf(&s, "• Answers: %s\n", cmp.Or(p.Respond, "as THREAD_FOLLOWUPS says"))
	switch {
	case !p.Narrows():
		s.WriteString("• MCP servers: all the access policy allows\n")
	case len(p.Servers)+len(p.RegisteredServers) == 0:
		s.WriteString("• MCP servers: none\n")
	default:
		if len(p.Servers) > 0 {
			names := make([]string, len(p.Servers))
			for i, n := range p.Servers {
				names[i] = inlineCodeQ(n)
			}
			fmt.Fprintf(&s, "• MCP servers: %s (within the access policy)\n", strings.Join(names, ", "))
		}
		if len(p.RegisteredServers) > 0 {
			fmt.Fprintf(&s, "• Servers registered from Slack: %s (within the access policy)\n", a.registeredNow(ctx, team, p.RegisteredServers))
		}
	}
	if p.MaxTokens > 0 {
		fmt.Fprintf(&s, "• Output cap: %d tokens\n", p.MaxTokens)
	}
	if !p.Budget.IsZero() {
		fmt.Fprintf(&s, "• Channel budget: %s\n", a.limitsText(p.Budget))
	}
	if sp := strings.TrimSpace(p.SystemPrompt); sp != "" {
		fmt.Fprintf(&s, "• Instructions: %s\n", mrkdwn.EscapeText(mrkdwn.Clip(sp, 300)))
	}
	return strings.TrimSpace(s.String())
}

// registeredNow lists a profile's registered_servers, each saying
// whether this workspace has registered it now (/bobbin mcp add): only
// those are offered.
func (a *Admin) registeredNow(ctx context.Context, team string, names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		state := "not registered in this workspace"
		switch err := a.registered(ctx, team, n); {
		case err == nil:
			state = "registered here"
		case !errors.Is(err, session.ErrNotFound):
			a.log.Warn("bot: reading a registration failed", "team", team, "server", n, "err", err)
			state = "couldn't check just now"
		}
		out[i] = inlineCodeQ(n) + " (" + state + ")"
	}
	return strings.Join(out, ", ")
}

// registered is MCP.Registered, or session.ErrNotFound when MCP is off.
func (a *Admin) registered(ctx context.Context, team, name string) error {
	if a.o.MCP == nil {
		return session.ErrNotFound
	}
	return a.o.MCP.Registered(ctx, team, name)
}

func (a *Admin) limitsText(l profile.Limits) string {
	var parts []string
	if l.DailyTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens a day", l.DailyTokens))
	}
	if l.MonthlyTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens a month", l.MonthlyTokens))
	}
	if l.DailyCost > 0 {
		parts = append(parts, a.money(int64(l.DailyCost*1e6))+" a day")
	}
	if l.MonthlyCost > 0 {
		parts = append(parts, a.money(int64(l.MonthlyCost*1e6))+" a month")
	}
	return strings.Join(parts, ", ")
}

// usageReport is the workspace's usage this month and today: totals, then
// the top 10 channels, people and models.
func (a *Admin) usageReport(ctx context.Context, team string) string {
	now := a.o.Now()
	var s strings.Builder
	for _, period := range []string{session.PeriodMonth, session.PeriodDay} {
		r, err := a.o.Store.Usage(ctx, team, period, now)
		if err != nil {
			a.log.Warn("bot: reading usage failed", "team", team, "err", err)
			return "I couldn't read the usage just now. Please try again in a moment."
		}
		title := "This month (" + now.UTC().Format("January 2006") + ")"
		if period == session.PeriodDay {
			title = "Today (" + now.UTC().Format("2 January") + ", UTC)"
		}
		fmt.Fprintf(&s, "*%s*: %s\n", title, a.totalsText(r.Total))
		if r.Total.Tokens == 0 {
			continue
		}
		top(&s, "Channels", r.Channels, func(id string) string { return "<#" + id + ">" }, a.totalsText)
		top(&s, "People", r.People, func(id string) string { return "<@" + id + ">" }, a.totalsText)
		models := map[string]session.Totals{}
		for m, t := range r.Models {
			models[m] = session.Totals{Tokens: t.Tokens, CostMicros: t.CostMicros}
		}
		top(&s, "Models", models, inlineCodeQ, func(t session.Totals) string {
			return a.totalsText(t)
		})
	}
	return strings.TrimSpace(s.String())
}

// usageMe is the person's own usage.
func (a *Admin) usageMe(ctx context.Context, team, user string) string {
	now := a.o.Now()
	var parts []string
	for _, period := range []string{session.PeriodDay, session.PeriodMonth} {
		r, err := a.o.Store.Usage(ctx, team, period, now)
		if err != nil {
			a.log.Warn("bot: reading usage failed", "team", team, "err", err)
			return "I couldn't read your usage just now. Please try again in a moment."
		}
		name := "This month"
		if period == session.PeriodDay {
			name = "Today"
		}
		parts = append(parts, fmt.Sprintf("%s: %s", name, a.totalsText(r.People[user])))
	}
	return "*Your model usage*\n" + strings.Join(parts, "\n")
}

func (a *Admin) totalsText(t session.Totals) string {
	s := fmt.Sprintf("%d tokens", t.Tokens)
	if t.CostMicros > 0 {
		s += ", " + a.money(t.CostMicros)
	}
	return s
}

// top writes the ten largest entries of m by tokens.
func top(s *strings.Builder, title string, m map[string]session.Totals, name func(string) string, text func(session.Totals) string) {
	if len(m) == 0 {
		return
	}
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b].Tokens, m[a].Tokens), strings.Compare(a, b))
	})
	if len(keys) > 10 {
		keys = keys[:10]
	}
	fmt.Fprintf(s, "_%s_: ", title)
	for i, k := range keys {
		if i > 0 {
			s.WriteString(" · ")
		}
		fmt.Fprintf(s, "%s %s", name(k), text(m[k]))
	}
	s.WriteString("\n")
}

// money formats micros of the configured currency (as the root's budget
// refusals do).
func (a *Admin) money(micros int64) string {
	cur := ""
	if cfg := a.o.Profiles; cfg != nil && cfg.Currency != "" {
		cur = " " + cfg.Currency
	}
	return fmt.Sprintf("%.2f%s", float64(micros)/1e6, cur)
}
