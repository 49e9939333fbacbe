package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// publicURL is u without query and fragment, for audit and answers (a query
// may carry a token).
func publicURL(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		return u[:i] + "?…"
	}
	return u
}

// hintWords describes a tool's hints in a few words.
func hintWords(h agent.Hints) string {
	var w []string
	if h.ReadOnly {
		w = append(w, "read-only")
	}
	if h.Destructive {
		w = append(w, "destructive")
	}
	if h.OpenWorld {
		w = append(w, "open-world")
	}
	if !h.Trusted {
		w = append(w, "unverified server")
	}
	if len(w) == 0 {
		return "no hints"
	}
	return strings.Join(w, " · ")
}

// mcpList answers /bobbin mcp list for user in channel: with each server's
// scope and whether it is available to them there, and OAuth connection
// states (the workspace's, or theirs).
func (a *Admin) mcpList(ctx context.Context, team, channel, user string) string {
	var st []servers.Status
	if ss, ok := a.o.MCP.(ScopedStatus); ok {
		st = ss.StatusAt(ctx, a.o.Access(ctx, team, channel, user))
	} else if ma := a.auth(); ma != nil {
		st = ma.StatusFor(ctx, team, user)
	} else {
		st = a.o.MCP.Status(ctx, team)
	}
	if len(st) == 0 {
		return "No MCP servers are set up in this workspace. An admin can add one with `/bobbin mcp add`."
	}
	a.fillPolicies(ctx, team, st) // policy.go
	var s strings.Builder
	s.WriteString("*MCP servers in this workspace*\n")
	for _, x := range st {
		fmt.Fprintf(&s, "• `%s`: %s, %s", mrkdwn.InlineCode(x.Name), mrkdwn.EscapeText(cmp.Or(x.Transport, "?")), mrkdwn.EscapeText(cmp.Or(x.State, "unknown")))
		if x.State != "failed" {
			fmt.Fprintf(&s, ", %d tools", x.Tools)
		}
		src := "registered in Slack"
		if x.Source == "config" {
			src = "from the operator's configuration"
		}
		s.WriteString(" (" + src)
		if x.Trusted {
			s.WriteString(", trusted")
		}
		s.WriteString(")")
		if x.URL != "" {
			s.WriteString(" " + mrkdwn.EscapeText(publicURL(x.URL)))
		}
		s.WriteByte('\n')
		switch {
		case x.State == "starting":
			s.WriteString("    :hourglass_flowing_sand: starting… its tools are offered once it is up (a first start may download it)\n")
		case noConnectionYet(x):
			fmt.Fprintf(&s, "    :electric_plug: no connection yet: its tools are listed once it is connected (`/bobbin mcp connect %s`)\n", mrkdwn.InlineCode(x.Name))
		case x.Error != "":
			fmt.Fprintf(&s, "    :x: %s\n", mrkdwn.EscapeText(mrkdwn.Clip(x.Error, 300)))
		}
		if l := oauthLine(x); l != "" {
			s.WriteString(l + "\n")
		}
		if len(x.Disabled) > 0 {
			fmt.Fprintf(&s, "    :warning: disabled because their definition changed: %s. An admin can review them with `/bobbin mcp tools %s` and re-enable them with `/bobbin mcp approve %s`.\n",
				codeList(x.Disabled), mrkdwn.InlineCode(x.Name), mrkdwn.InlineCode(x.Name))
		}
		if len(x.Flagged) > 0 {
			fmt.Fprintf(&s, "    :mag: flagged by the safety scanner: %s\n", codeList(x.Flagged))
		}
		fmt.Fprintf(&s, "    scope: %s", describeScope(x.Scope)) // scope.go
		if v := describeVerdict(x.Here); v != "" {
			s.WriteString(" — " + v)
		}
		s.WriteByte('\n')
		if x.Policy != nil {
			s.WriteString(describePolicy(*x.Policy, true))
		}
	}
	s.WriteString(a.profileHereLine(ctx, team, channel)) // profile.go
	return s.String()
}

func codeList(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "`" + mrkdwn.InlineCode(n) + "`"
	}
	return strings.Join(out, ", ")
}

// mcpTools answers /bobbin mcp tools <name>.
func (a *Admin) mcpTools(ctx context.Context, team, name string) string {
	tools, err := a.o.MCP.ServerTools(ctx, team, name)
	if errors.Is(err, servers.ErrUnknownServer) {
		return fmt.Sprintf("This workspace has no MCP server named `%s`. See `/bobbin mcp list`.", mrkdwn.InlineCode(name))
	}
	if err != nil {
		return mrkdwn.EscapeText(fmt.Sprintf("I couldn't list the tools of %s: %v.", name, err)) + " Check `/bobbin mcp list` for its state, then try again."
	}
	return fmt.Sprintf("*Tools of `%s`* (%d)\n", mrkdwn.InlineCode(name), len(tools)) + formatTools(tools, 300, false)
}

// formatTools lists tools with hints, state and description (cut to
// descLimit runes); withSchema adds the input schemas.
func formatTools(tools []servers.ToolInfo, descLimit int, withSchema bool) string {
	if len(tools) == 0 {
		return "_No tools._\n"
	}
	var s strings.Builder
	for _, t := range tools {
		fmt.Fprintf(&s, "• `%s`", mrkdwn.InlineCode(t.Name))
		if t.Exposed != "" && t.Exposed != t.Name {
			fmt.Fprintf(&s, " (the model sees `%s`)", mrkdwn.InlineCode(t.Exposed))
		}
		fmt.Fprintf(&s, ": %s\n", hintWords(t.Hints))
		if d := strings.TrimSpace(t.Description); d != "" {
			fmt.Fprintf(&s, "    %s\n", mrkdwn.EscapeText(strings.Join(strings.Fields(mrkdwn.Clip(d, descLimit)), " ")))
		}
		if t.Disabled {
			fmt.Fprintf(&s, "    :warning: disabled (%s) until an admin approves it\n", mrkdwn.EscapeText(cmp.Or(t.DisabledReason, "changed")))
		}
		if len(t.Flags) > 0 {
			fmt.Fprintf(&s, "    :mag: flagged: %s\n", mrkdwn.EscapeText(strings.Join(t.Flags, ", ")))
		}
		if withSchema && len(t.InputSchema) > 0 {
			fmt.Fprintf(&s, "```\n%s\n```\n", mrkdwn.Truncate(mrkdwn.EscapeText(mrkdwn.FenceSafe(string(t.InputSchema))), 1200))
		}
	}
	return s.String()
}

// mcpApprove answers /bobbin mcp approve <name>.
func (a *Admin) mcpApprove(ctx context.Context, team, user, name string) string {
	tools, err := a.o.MCP.Approve(ctx, team, name)
	if errors.Is(err, servers.ErrUnknownServer) {
		return fmt.Sprintf("This workspace has no MCP server named `%s`. See `/bobbin mcp list`.", mrkdwn.InlineCode(name))
	}
	if err != nil {
		return mrkdwn.EscapeText(fmt.Sprintf("I couldn't approve %s: %v.", name, err)) + " Check `/bobbin mcp list` for its state, then try again."
	}
	a.o.Audit(ctx, team, map[string]string{"event": auditMCPApprove, "by": user, "server": name, "outcome": strconv.Itoa(len(tools)) + " tools"})
	return fmt.Sprintf("*Approved the current definitions of `%s`*: its %d tools are enabled as defined below. Calls still ask for approval in the thread.\n", mrkdwn.InlineCode(name), len(tools)) +
		formatTools(tools, 1000, true)
}

// mcpRemove answers /bobbin mcp remove <name>.
func (a *Admin) mcpRemove(ctx context.Context, team, user, name string) string {
	err := a.o.MCP.Unregister(ctx, team, name)
	if errors.Is(err, session.ErrNotFound) {
		return fmt.Sprintf("No server named `%s` was registered from Slack in this workspace. (Servers from the operator's configuration can only be removed there.) See `/bobbin mcp list`.", mrkdwn.InlineCode(name))
	}
	if err != nil {
		a.log.Warn("bot: removing a registration failed", "team", team, "server", name, "err", err)
		return "I couldn't remove it just now. Please try again in a moment."
	}
	a.forgetConnections(ctx, team, name)
	a.o.Audit(ctx, team, map[string]string{"event": auditMCPRemove, "by": user, "server": name})
	return fmt.Sprintf("Removed `%s`. Its tools are no longer offered in this workspace.", mrkdwn.InlineCode(name))
}

// mcpAdd probes a server and, when it answers, registers it. The header
// values are secrets: they are stored encrypted and never shown or logged.
// A server that answers 401 with OAuth metadata is registered with OAuth
// (per-user with perUser) and the answer carries a Connect button.
func (a *Admin) mcpAdd(ctx context.Context, to Target, team, user, name, url string, headers map[string]string, perUser bool) reply {
	if msg := a.nameTaken(ctx, team, name); msg != "" {
		return reply{text: msg}
	}
	tools, err := a.o.MCP.Probe(ctx, name, url, headers)
	switch {
	case errors.Is(err, servers.ErrOAuthUnavailable):
		return reply{text: noPublicURL(name, url)}
	case errors.Is(err, servers.ErrNeedsOAuth):
		mode := authWorkspace
		if perUser {
			mode = authUser
		}
		return a.mcpAddOAuth(ctx, to, team, servers.Registration{Name: name, URL: url, Headers: headers, Auth: mode, CreatedBy: user})
	case err != nil:
		msg := scrubSecrets(err.Error(), headers)
		a.log.Info("bot: probing an MCP server failed", "team", team, "server", name, "err", msg)
		return reply{text: mrkdwn.EscapeText(fmt.Sprintf("I couldn't use %s at %s: %s.", name, publicURL(url), msg)) +
			" Nothing was saved. Check the URL and headers, then run `/bobbin mcp add` again."}
	}
	if perUser {
		return reply{text: fmt.Sprintf("`--per-user` is for servers that sign in with OAuth, and `%s` answered without asking for it. Nothing was saved; add it again without `--per-user`.", mrkdwn.InlineCode(name))}
	}
	reg := servers.Registration{Name: name, URL: url, Headers: headers, CreatedBy: user}
	for _, t := range tools {
		reg.Tools = append(reg.Tools, t.Name)
	}
	if msg := a.saveRegistration(ctx, team, reg); msg != "" {
		return reply{text: msg}
	}
	headerNames := slices.Sorted(maps.Keys(headers))
	a.o.Audit(ctx, team, map[string]string{"event": auditMCPAdd, "by": user, "server": name, "url": publicURL(url),
		"outcome": strconv.Itoa(len(tools)) + " tools", "headers": strings.Join(headerNames, ",")})
	var s strings.Builder
	fmt.Fprintf(&s, "*Registered `%s`* at %s with %d tools", mrkdwn.InlineCode(name), mrkdwn.EscapeText(publicURL(url)), len(tools))
	if len(headers) > 0 {
		fmt.Fprintf(&s, " (headers %s stored encrypted)", mrkdwn.EscapeText(strings.Join(headerNames, ", ")))
	}
	s.WriteString(". They are offered to the model in this workspace from now on; each call asks for approval in the thread.\n")
	s.WriteString(formatTools(tools, 300, false))
	return reply{text: s.String()}
}

// nameTaken is "" when no server of that name is registered from Slack,
// else what to tell the admin.
func (a *Admin) nameTaken(ctx context.Context, team, name string) string {
	err := a.o.MCP.Registered(ctx, team, name)
	switch {
	case err == nil:
		return fmt.Sprintf("A server named `%s` is already registered. Remove it first with `/bobbin mcp remove %s`, or pick another name.", mrkdwn.InlineCode(name), mrkdwn.InlineCode(name))
	case !errors.Is(err, session.ErrNotFound):
		a.log.Warn("bot: reading registrations failed", "team", team, "err", err)
		return "I couldn't check the existing servers just now. Please try again in a moment."
	}
	return ""
}

// noPublicURL says an OAuth server cannot be added without PUBLIC_URL.
func noPublicURL(name, url string) string {
	return fmt.Sprintf("`%s` at %s signs in with OAuth, and OAuth needs the bot's PUBLIC_URL (its externally reachable address for the sign-in callback), which is not set. Nothing was saved. Ask the bot's operator to set PUBLIC_URL, then add the server again.",
		mrkdwn.InlineCode(name), mrkdwn.EscapeText(publicURL(url)))
}

// saveRegistration has the MCP manager store a registration (and see
// it); it returns "" or what to tell the admin.
func (a *Admin) saveRegistration(ctx context.Context, team string, reg servers.Registration) string {
	name := reg.Name
	if err := a.o.MCP.Register(ctx, team, reg); err != nil {
		a.log.Warn("bot: saving a registration failed", "team", team, "server", name, "err", err)
		if errors.Is(err, session.ErrNoSecretKey) {
			return "I can't store secret headers: the bot has no SECRET_KEY. Ask the operator to set one, or register the server without headers."
		}
		if errors.Is(err, session.ErrExists) { // another admin added the name meanwhile
			return fmt.Sprintf("A server named `%s` is already registered. Remove it first with `/bobbin mcp remove %s`, or pick another name.", mrkdwn.InlineCode(name), mrkdwn.InlineCode(name))
		}
		return "I found the server but couldn't save it just now. Nothing was saved; please try again."
	}
	return ""
}

// scrubSecrets removes header values from an error text before it is shown.
func scrubSecrets(s string, headers map[string]string) string {
	for _, v := range headers {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
	}
	return s
}

// CallbackAdd is the callback id of the add-server form (Submit).
const CallbackAdd = "bobbin_mcp_add"

// The add-server form's blocks.
const (
	blockMCPName     = "mcp_name"
	blockMCPURL      = "mcp_url"
	blockMCPHeaders  = "mcp_headers"
	actionMCPName    = "name"
	actionMCPURL     = "url"
	actionMCPHeaders = "headers"
	blockMCPAuth     = "mcp_auth"
	actionMCPAuth    = "auth"
)

func addModal(meta string) slack.ModalViewRequest {
	pt := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
	}
	name := slack.NewPlainTextInputBlockElement(pt("github"), actionMCPName)
	name.MaxLength = 32
	url := slack.NewPlainTextInputBlockElement(pt("https://mcp.example.com/mcp"), actionMCPURL)
	hdrs := slack.NewPlainTextInputBlockElement(pt("Authorization: Bearer …"), actionMCPHeaders)
	hdrs.Multiline = true
	hb := slack.NewInputBlock(blockMCPHeaders, pt("Secret headers (one per line)"),
		pt("Stored encrypted; never shown again, not even to admins."), hdrs)
	hb.Optional = true
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		CallbackID:      CallbackAdd,
		Title:           pt("Add an MCP server"),
		Submit:          pt("Connect and add"),
		Close:           pt("Cancel"),
		PrivateMetadata: meta,
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewInputBlock(blockMCPName, pt("Name"), pt("1 to 32 letters, digits, - or _"), name),
			slack.NewInputBlock(blockMCPURL, pt("HTTPS URL of the server"), pt("Only https:// MCP endpoints; commands and stdio servers are refused."), url),
			hb,
			perUserBlock(),
		}},
	}
}

// perUserBlock is the add form's --per-user.
func perUserBlock() slack.Block {
	pt := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
	}
	opt := slack.NewOptionBlockObject("per_user", pt("Each person connects their own account"),
		pt("For servers that sign in with OAuth: calls act as the person who asked."))
	b := slack.NewInputBlock(blockMCPAuth, pt("Sign-in (OAuth servers only)"), nil, slack.NewCheckboxGroupsBlockElement(actionMCPAuth, opt))
	b.Optional = true
	return b
}

// openAddModal answers /bobbin mcp add without arguments.
func (a *Admin) openAddModal(ctx context.Context, sc slack.SlashCommand, to Target) any {
	meta, _ := json.Marshal(to)
	if len(meta) > 3000 {
		meta, _ = json.Marshal(Target{Channel: to.Channel, User: to.User, Team: to.Team})
	}
	err := a.o.API.Do(ctx, slackapi.Call{Team: sc.TeamID, Method: slackapi.ViewsOpen}, func(ctx context.Context, api *slack.Client) error {
		_, err := api.OpenViewContext(ctx, sc.TriggerID, addModal(string(meta)))
		return err
	})
	if err != nil {
		a.log.Warn("bot: opening the add-server form failed", "err", err)
		return ephemeralAck("I couldn't open the form. Try again, or use `/bobbin mcp add <name> <https-url> [Header: value …]`.")
	}
	return nil
}

// Submit handles the add-server form (CallbackAdd): field errors go back with
// response_action errors; a valid form closes and the result arrives as an
// ephemeral message where the command was typed.
func (a *Admin) Submit(ctx context.Context, cb slack.InteractionCallback) any {
	team, user := cb.Team.ID, cb.User.ID
	if who := a.o.People.Standing(ctx, team, user, cb.User.TeamID); !who.Admin {
		a.o.Audit(ctx, team, map[string]string{"event": auditAdminRefused, "by": user, "outcome": opAdd})
		msg := "Only workspace admins can add MCP servers."
		if who.Unchecked {
			msg = "I couldn't check your account just now. Please try again."
		}
		return slack.NewErrorsViewSubmissionResponse(map[string]string{blockMCPName: msg})
	}
	if a.o.MCP == nil {
		return slack.NewErrorsViewSubmissionResponse(map[string]string{blockMCPName: "MCP servers are not enabled on this bot."})
	}
	value := func(block, action string) string {
		if cb.View.State == nil {
			return ""
		}
		return strings.TrimSpace(cb.View.State.Values[block][action].Value)
	}
	name, rawURL, rawHeaders := value(blockMCPName, actionMCPName), value(blockMCPURL, actionMCPURL), value(blockMCPHeaders, actionMCPHeaders)
	errs := map[string]string{}
	if err := checkServerName(name); err != nil {
		errs[blockMCPName] = "Use 1 to 32 letters, digits, - or _."
	} else if err := a.o.MCP.Registered(ctx, team, name); err == nil {
		errs[blockMCPName] = "A server with this name is already registered. Pick another name or remove it first."
	}
	u, err := checkURLShape(rawURL)
	if err == nil {
		err = a.o.MCP.ValidateURL(u)
	}
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			errs[blockMCPURL] = "Only https:// URLs of MCP servers; commands, paths and stdio servers are refused."
		} else {
			errs[blockMCPURL] = mrkdwn.Clip("This URL can't be registered: "+err.Error(), 150)
		}
	}
	hs, err := parseHeaderLines(rawHeaders)
	if err != nil {
		errs[blockMCPHeaders] = mrkdwn.Clip(err.Error(), 150)
	}
	if len(errs) > 0 {
		return slack.NewErrorsViewSubmissionResponse(errs)
	}
	var to Target
	_ = json.Unmarshal([]byte(cb.View.PrivateMetadata), &to)
	to.User, to.Team = user, team
	perUser := cb.View.State != nil && len(cb.View.State.Values[blockMCPAuth][actionMCPAuth].SelectedOptions) > 0
	a.laterReply(ctx, to, "", func(ctx context.Context) reply { return a.mcpAdd(ctx, to, team, user, name, u, headerMap(hs), perUser) })
	return nil
}
