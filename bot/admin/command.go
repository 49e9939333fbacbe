package admin

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// Slash command operations.
const (
	opHelp     = "help"
	opAudit    = "audit"
	opFeedback = "feedback"
	opList     = "mcp list"
	opTools    = "mcp tools"
	opAdd      = "mcp add"
	opAddModal = "mcp add (modal)"
	opRemove   = "mcp remove"
	opApprove  = "mcp approve"
	opConnect  = "mcp connect"
	opDiscon   = "mcp disconnect"
	opScope    = "mcp scope"
)

// command is a parsed /bobbin invocation.
type command struct {
	Op      string
	Name    string
	URL     string
	Headers []header
	// PerUser is mcp add's --per-user (OAuth: each person connects).
	PerUser bool
	// Preset is set by `mcp add slack [<url>]` (servers.PresetSlack): the
	// preset's server, at URL when one is given.
	Preset string
	// Scope and ClearScope are mcp scope's (scope.go).
	Scope      access.Scope
	ClearScope bool
	// Policy is mcp policy's (policy.go).
	Policy *policyCmd
}

// header is a secret HTTP header for a registered server.
type header struct{ Name, Value string }

// Limits of a registration's headers.
const (
	maxHeaders     = 10
	maxHeaderValue = 4096
)

// usageError is a mistake in a command, worded for the person who typed it.
type usageError string

func (e usageError) Error() string { return string(e) }

var (
	serverNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
	headerNameRE = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_|~-]{1,64}$`)
)

// reservedHeaders are set by the transport; a registration may not override
// them.
var reservedHeaders = map[string]bool{
	"host": true, "content-length": true, "content-type": true, "transfer-encoding": true,
	"connection": true, "upgrade": true, "te": true, "trailer": true, "keep-alive": true,
	"accept": true, "mcp-session-id": true, "mcp-protocol-version": true, "last-event-id": true,
	"proxy-authorization": true, "proxy-connection": true, "expect": true, "cookie2": true,
}

const helpText = "*Bobbin commands*\n" +
	"• `/bobbin help`: this list\n" +
	"• `/bobbin mcp list`: the MCP servers of this workspace, their state and tools\n" +
	"• `/bobbin mcp tools <name>`: a server's tools with what they may do\n" +
	"• `/bobbin mcp add`: register an HTTPS MCP server in a form (secrets stay hidden) _(admins)_\n" +
	"• `/bobbin mcp add <name> <https-url> [--per-user] [Header: value …]`: the same in one line; a server that signs in with OAuth gets a Connect button, and with `--per-user` each person connects their own account _(admins)_\n" +
	"• `/bobbin mcp add slack [<https-url>]`: Slack's own MCP server (search, channels, threads, canvases), each person connecting their own Slack account _(admins)_\n" +
	"• `/bobbin mcp connect <name>`: connect your account to an OAuth server (for a workspace-wide one: admins)\n" +
	"• `/bobbin mcp disconnect <name>`: remove your connection (admins: the workspace's); the server stays registered\n" +
	"• `/bobbin mcp remove <name>`: unregister a server _(admins)_\n" +
	"• `/bobbin mcp approve <name>`: re-enable tools whose definition changed _(admins)_\n" +
	"• `/bobbin mcp scope <name> <#channel|@person|@group|guests|dm:off …>`: who may use a registered server's tools, and where; `clear` lifts it _(admins)_\n" +
	policyHelp +
	"• `/bobbin audit`: the latest approvals, tool calls and changes _(admins)_\n" +
	feedbackHelp +
	profileHelp +
	"To talk to me, mention me in a channel or send me a direct message. Before I run a tool, I ask in the thread. " +
	"My App Home tab shows this workspace's MCP servers and your connections."

// parseCommand parses the text of /bobbin. It never does I/O; an error is a
// usageError meant for the person.
func parseCommand(text string) (command, error) {
	toks, err := tokenize(text)
	if err != nil {
		return command{}, err
	}
	if len(toks) == 0 {
		return command{Op: opHelp}, nil
	}
	verb := strings.ToLower(toks[0])
	switch verb {
	case "help", "-h", "--help", "?":
		return command{Op: opHelp}, nil
	case "audit":
		if len(toks) > 1 {
			return command{}, usageError("`/bobbin audit` takes no arguments.")
		}
		return command{Op: opAudit}, nil
	case "feedback":
		if len(toks) > 1 {
			return command{}, usageError("`/bobbin feedback` takes no arguments.")
		}
		return command{Op: opFeedback}, nil
	case "mcp":
	default:
		return command{}, usageError(fmt.Sprintf("I don't know the command %q.", mrkdwn.Clip(toks[0], 40)))
	}
	if len(toks) < 2 {
		return command{}, usageError("Say what to do with MCP servers: `list`, `tools <name>`, `add`, `remove <name>`, `approve <name>`, `scope <name> …`, `connect <name>` or `disconnect <name>`.")
	}
	sub, args := strings.ToLower(toks[1]), toks[2:]
	named := func(op string) (command, error) {
		if len(args) != 1 {
			return command{}, usageError(fmt.Sprintf("Usage: `/bobbin %s <name>`.", op))
		}
		if err := checkServerName(args[0]); err != nil {
			return command{}, err
		}
		return command{Op: op, Name: args[0]}, nil
	}
	switch sub {
	case "list", "ls":
		if len(args) > 0 {
			return command{}, usageError("`/bobbin mcp list` takes no arguments.")
		}
		return command{Op: opList}, nil
	case "tools":
		return named(opTools)
	case "remove", "rm", "delete":
		return named(opRemove)
	case "approve":
		return named(opApprove)
	case "connect":
		return named(opConnect)
	case "disconnect":
		return named(opDiscon)
	case "add":
		return parseAdd(args)
	case "policy":
		return parsePolicy(args)
	case "scope":
		if len(args) < 2 {
			return command{}, usageError("Usage: `/bobbin mcp scope <name> <#channel|@person|@group|guests|dm:off …>`, or `/bobbin mcp scope <name> clear`.")
		}
		if err := checkServerName(args[0]); err != nil {
			return command{}, err
		}
		sc, clear, err := parseScope(args[1:])
		if err != nil {
			return command{}, err
		}
		return command{Op: opScope, Name: args[0], Scope: sc, ClearScope: clear}, nil
	}
	return command{}, usageError(fmt.Sprintf("I don't know `mcp %s`: use `list`, `tools`, `add`, `remove`, `approve`, `scope`, `connect` or `disconnect`.", mrkdwn.Clip(toks[1], 40)))
}

// parseAdd parses `mcp add [<name> <url> [--per-user] [Header: value …]]`.
func parseAdd(args []string) (command, error) {
	if len(args) == 0 {
		return command{Op: opAddModal}, nil
	}
	if strings.EqualFold(args[0], servers.PresetSlack) {
		return parseAddSlack(args[1:])
	}
	perUser := false
	if len(args) > 2 {
		rest := args[:2:2]
		for _, a := range args[2:] {
			if strings.EqualFold(a, "--per-user") {
				perUser = true
				continue
			}
			rest = append(rest, a)
		}
		args = rest
	}
	if len(args) < 2 {
		return command{}, usageError("Usage: `/bobbin mcp add <name> <https-url> [--per-user] [Header: value …]`, or `/bobbin mcp add` alone for a form.")
	}
	if err := checkServerName(args[0]); err != nil {
		return command{}, err
	}
	u, err := checkURLShape(args[1])
	if err != nil {
		return command{}, err
	}
	hs, err := parseHeaderTokens(args[2:])
	if err != nil {
		return command{}, err
	}
	return command{Op: opAdd, Name: args[0], URL: u, Headers: hs, PerUser: perUser}, nil
}

// parseAddSlack parses the rest of `mcp add slack [<https-url>]`: Slack's
// MCP server preset (mcp_slack.go).
func parseAddSlack(args []string) (command, error) {
	c := command{Op: opAdd, Name: servers.PresetSlack, Preset: servers.PresetSlack}
	if len(args) > 1 {
		return command{}, usageError("Usage: `/bobbin mcp add slack` for Slack's own MCP server, or `/bobbin mcp add slack <https-url>` for another address of it; it takes no headers or flags (each person connects their own Slack account).")
	}
	if len(args) == 1 {
		u, err := checkURLShape(args[0])
		if err != nil {
			return command{}, err
		}
		c.URL = u
	}
	return c, nil
}

func checkServerName(name string) error {
	if !serverNameRE.MatchString(name) {
		return usageError(fmt.Sprintf("%q is not a server name: use 1 to 32 letters, digits, '-' or '_'.", mrkdwn.Clip(name, 40)))
	}
	return nil
}

// errNotHTTP refuses anything that is not an http(s) URL: commands, file
// paths and stdio servers come only from the operator's configuration.
var errNotHTTP = usageError("Only HTTPS URLs of MCP servers can be registered from Slack (for example `https://mcp.example.com/mcp`). " +
	"Commands, file paths and stdio servers can only be set up by the bot's operator in its configuration file.")

// checkURLShape takes the URL argument (Slack may wrap it as <url> or
// <url|label> and escapes &, < and >) and refuses what is not http(s).
// The full check (MCPAdmin.ValidateURL) comes later.
func checkURLShape(tok string) (string, error) {
	u := tok
	if strings.HasPrefix(u, "<") && strings.HasSuffix(u, ">") {
		u = u[1 : len(u)-1]
		if i := strings.IndexByte(u, '|'); i >= 0 {
			u = u[:i]
		}
	}
	u = slackText(u)
	lower := strings.ToLower(u)
	if !strings.HasPrefix(lower, "https://") && !strings.HasPrefix(lower, "http://") {
		return "", errNotHTTP
	}
	return u, nil
}

// parseHeaderTokens reads `Name: value` pairs. A header starts at a token
// "Name:" (or "Name:value"); the value runs to the next such token once it
// is not empty. Quote a value that must contain such a token.
func parseHeaderTokens(toks []string) ([]header, error) {
	var hs []header
	for _, t := range toks {
		t = slackText(t)
		name, rest, isHeader := strings.Cut(t, ":")
		startsNew := isHeader && headerNameRE.MatchString(name) &&
			(len(hs) == 0 || hs[len(hs)-1].Value != "")
		switch {
		case startsNew:
			hs = append(hs, header{Name: name, Value: rest})
		case len(hs) == 0:
			// Not echoed: it may be a secret typed in the wrong place.
			return nil, usageError("After the URL I expected headers like `Authorization: Bearer …`.")
		default:
			h := &hs[len(hs)-1]
			if h.Value != "" {
				h.Value += " "
			}
			h.Value += t
		}
	}
	return checkHeaders(hs)
}

// parseHeaderLines reads the modal's headers field: one `Name: value` per
// line.
func parseHeaderLines(text string) ([]header, error) {
	var hs []header
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || !headerNameRE.MatchString(strings.TrimSpace(name)) {
			return nil, usageError("Write one header per line, like `Authorization: Bearer …`.")
		}
		hs = append(hs, header{Name: strings.TrimSpace(name), Value: value})
	}
	return checkHeaders(hs)
}

func checkHeaders(hs []header) ([]header, error) {
	if len(hs) > maxHeaders {
		return nil, usageError(fmt.Sprintf("At most %d headers, please.", maxHeaders))
	}
	seen := map[string]bool{}
	for i := range hs {
		h := &hs[i]
		h.Value = strings.TrimSpace(h.Value)
		lower := strings.ToLower(h.Name)
		switch {
		case reservedHeaders[lower] || strings.HasPrefix(lower, "proxy-") || strings.HasPrefix(lower, "sec-"):
			return nil, usageError(fmt.Sprintf("The header %s is set by the bot itself and can't be configured.", h.Name))
		case seen[lower]:
			return nil, usageError(fmt.Sprintf("The header %s is given twice.", h.Name))
		case h.Value == "":
			return nil, usageError(fmt.Sprintf("The header %s has no value.", h.Name))
		case len(h.Value) > maxHeaderValue:
			return nil, usageError(fmt.Sprintf("The value of %s is too long (at most %d bytes).", h.Name, maxHeaderValue))
		case strings.ContainsFunc(h.Value, func(r rune) bool { return unicode.IsControl(r) }):
			return nil, usageError(fmt.Sprintf("The value of %s contains control characters.", h.Name))
		}
		seen[lower] = true
	}
	return hs, nil
}

// tokenize splits on white space, keeping "quoted strings" (straight or
// curly quotes, which Slack clients like to produce) together.
func tokenize(s string) ([]string, error) {
	var toks []string
	var cur strings.Builder
	inTok, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote || (quote == '“' && r == '”') {
				quote = 0
				continue
			}
			cur.WriteRune(r)
		case r == '"' || r == '“':
			quote, inTok = r, true
		case unicode.IsSpace(r):
			if inTok {
				toks = append(toks, cur.String())
				cur.Reset()
				inTok = false
			}
		default:
			cur.WriteRune(r)
			inTok = true
		}
	}
	if quote != 0 {
		return nil, usageError("A quote is not closed.")
	}
	if inTok {
		toks = append(toks, cur.String())
	}
	return toks, nil
}

// ackLimit keeps an ack payload well below the 20 KiB slack-go refuses.
const ackLimit = 12 << 10

// replyChunk is the most text of one ephemeral answer sent later.
const replyChunk = 3500

// Target is where an answer to a slash command (or a shortcut) goes: its
// response_url, else an ephemeral message in its channel.
type Target struct {
	ResponseURL string `json:"response_url,omitempty"`
	Channel     string `json:"channel,omitempty"`
	User        string `json:"user,omitempty"`
	Team        string `json:"team,omitempty"`
}

func ephemeralAck(text string) any {
	return map[string]any{"response_type": "ephemeral", "text": text}
}

// Slash handles /bobbin and returns the ack payload (nil for a plain
// ack); answers that take longer arrive later, as ephemeral messages.
func (a *Admin) Slash(ctx context.Context, sc slack.SlashCommand) any {
	if ack, ok := a.operatorSlash(ctx, sc); ok { // profile.go
		return ack
	}
	cmd, err := parseCommand(sc.Text)
	var ue usageError
	if errors.As(err, &ue) {
		return ephemeralAck(mrkdwn.EscapeText(ue.Error()) + " See `/bobbin help`.")
	}
	if err != nil || cmd.Op == opHelp {
		return ephemeralAck(mrkdwn.EscapeText(helpText))
	}
	to := Target{ResponseURL: sc.ResponseURL, Channel: sc.ChannelID, User: sc.UserID, Team: sc.TeamID}
	team, user := sc.TeamID, sc.UserID
	who := a.o.People.Standing(ctx, team, user, "")
	switch cmd.Op {
	case opList, opTools, opConnect, opDiscon:
		if !who.MayUse {
			return ephemeralAck(noRightsText(who))
		}
	default:
		if !who.Admin {
			a.o.Audit(ctx, team, map[string]string{"event": auditAdminRefused, "by": user, "outcome": cmd.Op, "server": cmd.Name})
			if who.Unchecked {
				return ephemeralAck(noRightsText(who))
			}
			return ephemeralAck("Only workspace admins can use `/bobbin " + cmd.Op + "`. Ask an admin of this workspace to do it.")
		}
	}
	if cmd.Op == opAudit {
		entries, err := a.o.Store.RecentAudit(ctx, team, auditLimit)
		if err != nil {
			a.log.Warn("bot: reading the audit log failed", "team", team, "err", err)
			return ephemeralAck("I couldn't read the audit log just now. Please try again in a moment.")
		}
		return a.answer(ctx, to, formatAudit(entries))
	}
	if cmd.Op == opFeedback {
		return a.answer(ctx, to, a.feedbackReport(ctx, team)) // feedback.go
	}
	if a.o.MCP == nil {
		return ephemeralAck("MCP servers are not enabled on this bot.")
	}
	switch cmd.Op {
	case opList:
		return a.later(ctx, to, "", func(ctx context.Context) string { return a.mcpList(ctx, team, sc.ChannelID, user) })
	case opConnect:
		return a.laterReply(ctx, to, "", func(ctx context.Context) reply { return a.mcpConnect(ctx, to, team, user, cmd.Name) })
	case opDiscon:
		return a.later(ctx, to, "", func(ctx context.Context) string { return a.mcpDisconnect(ctx, team, user, cmd.Name) })
	case opTools:
		return a.later(ctx, to, "", func(ctx context.Context) string { return a.mcpTools(ctx, team, cmd.Name) })
	case opApprove:
		return a.later(ctx, to, "", func(ctx context.Context) string { return a.mcpApprove(ctx, team, user, cmd.Name) })
	case opRemove:
		return ephemeralAck(a.mcpRemove(ctx, team, user, cmd.Name))
	case opScope:
		return a.later(ctx, to, "", func(ctx context.Context) string {
			return a.mcpScope(ctx, team, user, cmd.Name, cmd.Scope, cmd.ClearScope)
		})
	case opPolicy:
		return a.later(ctx, to, "", func(ctx context.Context) string { return a.mcpPolicy(ctx, team, user, cmd.Name, *cmd.Policy) })
	case opAddModal:
		return a.openAddModal(ctx, sc, to)
	case opAdd:
		if cmd.Preset == servers.PresetSlack {
			return a.addSlack(ctx, to, team, user, cmd.URL) // mcp_slack.go
		}
		if err := a.o.MCP.ValidateURL(cmd.URL); err != nil {
			return ephemeralAck(mrkdwn.EscapeText("That URL can't be registered: "+err.Error()+".") + " Use an `https://` URL of an MCP server.")
		}
		hs := headerMap(cmd.Headers)
		return a.laterReply(ctx, to, fmt.Sprintf("Connecting to `%s` to list its tools…", cmd.Name), func(ctx context.Context) reply {
			return a.mcpAdd(ctx, to, team, user, cmd.Name, cmd.URL, hs, cmd.PerUser)
		})
	}
	return ephemeralAck(mrkdwn.EscapeText(helpText))
}

func noRightsText(who Standing) string {
	if who.Unchecked {
		return "I couldn't check your account just now. Please try again in a moment."
	}
	return "Sorry, this command is not available to you (" + who.Why + ")."
}

func headerMap(hs []header) map[string]string {
	if len(hs) == 0 {
		return nil
	}
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		m[h.Name] = h.Value
	}
	return m
}

// answer acks with text when it fits, else sends it later in parts.
func (a *Admin) answer(ctx context.Context, to Target, text string) any {
	if len(text) <= ackLimit && len(text) <= 3900 {
		return ephemeralAck(text)
	}
	return a.later(ctx, to, "", func(context.Context) string { return text })
}

// later runs job after the ack (Slack wants the ack within 3 s; a probe
// takes longer) and sends its answer to the person (laterReply, text
// only). Run waits for it on shutdown.
func (a *Admin) later(ctx context.Context, to Target, ack string, job func(ctx context.Context) string) any {
	return a.laterReply(ctx, to, ack, func(ctx context.Context) reply { return reply{text: job(ctx)} })
}

// Tell sends text to the person after the ack, in parts (the root's Ask
// Bobbin shortcut answers this way). Run's job runner waits for it on
// shutdown.
func (a *Admin) Tell(ctx context.Context, to Target, text string) {
	a.later(ctx, to, "", func(context.Context) string { return text })
}

// respond sends text to the person in parts of at most replyChunk bytes:
// through the response_url (five uses at most), else as ephemeral messages.
func (a *Admin) respond(ctx context.Context, to Target, text string) {
	parts := chunkLines(text, replyChunk)
	if len(parts) > 5 {
		parts = append(parts[:4], mrkdwn.Truncate(parts[4], replyChunk-40)+"\n_(more not shown)_")
	}
	hc := a.o.HTTPClient
	for _, p := range parts {
		if to.ResponseURL != "" {
			// p is the bot's own mrkdwn (its callers escape what they quote).
			err := slackapi.Respond(ctx, hc, to.ResponseURL, slackapi.Msg{Text: mrkdwn.Text(p)}, false)
			if err == nil {
				continue
			}
			a.log.Debug("bot: response_url answer failed; posting an ephemeral", "err", err)
		}
		if to.Channel == "" || to.User == "" {
			continue
		}
		if err := a.o.API.Ephemeral(ctx, to.Team, to.Channel, to.User, slackapi.Msg{Text: mrkdwn.Text(p)}); err != nil {
			a.log.Warn("bot: slash command answer not delivered", "err", err)
		}
	}
}

// chunkLines cuts text into parts of at most n bytes at line ends.
func chunkLines(text string, n int) []string {
	var parts []string
	for len(text) > n {
		cut := strings.LastIndexByte(text[:n], '\n')
		if cut <= 0 {
			cut = len(mrkdwn.TruncateAt(text, n))
			if cut == 0 {
				cut = n
			}
		} else {
			cut++
		}
		parts = append(parts, strings.TrimRight(text[:cut], "\n"))
		text = text[cut:]
	}
	if strings.TrimSpace(text) != "" || len(parts) == 0 {
		parts = append(parts, text)
	}
	return parts
}

// slackText undoes Slack's escaping of &, < and > in command text.
var slackUnescaper = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")

func slackText(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	return slackUnescaper.Replace(s)
}
