package servers

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/access"
)

// Status is one server of /bobbin mcp list and the App Home.
type Status struct {
	Name string
	// Source is "config" or "registered".
	Source string
	// URL is the endpoint of HTTP servers, without userinfo or query
	// (RedactURL); "" for stdio.
	URL string
	// Transport is "stdio", "streamable" or "sse".
	Transport string
	// Era is the negotiated protocol version, "" before the first connect.
	Era     string
	State   string
	Error   string
	Tools   int
	Trusted bool
	// Disabled lists tools disabled until an admin approves the server.
	Disabled []string
	// Flagged lists tools the poisoning scanner flagged.
	Flagged  []string
	Restarts int
	// Auth is "workspace" or "user" (mcp.AuthWorkspace, mcp.AuthUser) for OAuth servers, "" otherwise;
	// OAuth is then the connection of the workspace or of the person
	// asking (StatusFor).
	Auth  string
	OAuth *OAuth
	// Scope is who may use the server's tools, and where; Here, from
	// StatusAt only, is whether they are offered to the Access asked about.
	Scope access.Scope
	Here  *access.Verdict
	// Policy is the server's tool policy (the bot fills it for its
	// lists; the Manager's Status leaves it nil).
	Policy *PolicyReport
}

// OAuth says whether an OAuth server needs anything from a person.
type OAuth struct {
	// Mode is "workspace" or "user" (mcp.AuthWorkspace, mcp.AuthUser).
	Mode string
	// Connected is the state of the workspace's connection (workspace
	// mode) or of the asking person's (user mode).
	Connected bool
	// Reason is "not connected", "reconnect needed", … when not connected.
	Reason string
	// ConnectedBy is who made the connection; Scopes what was granted.
	ConnectedBy string
	Scopes      []string
	ConnectedAt time.Time
}

// ToolInfo describes one tool of a server for /bobbin mcp tools and for the
// admin's approval of a registration.
type ToolInfo struct {
	// Name is the tool's name on its server; Exposed is the name the model
	// sees (<server>__<tool>), empty from Probe.
	Name        string
	Exposed     string
	Title       string
	Description string
	InputSchema json.RawMessage
	Hints       agent.Hints
	// Disabled is set when the definition differs from the pinned one (or the
	// tool is new on an already-approved server); DisabledReason says which.
	Disabled       bool
	DisabledReason string
	// Flags are the poisoning scanner's findings (mcp.Flag* constants).
	Flags []string
	// Hash is the pinned-definition hash of the current definition.
	Hash string
}

// NotReady is a server whose tools a turn was offered without: it is
// still starting, or failing.
type NotReady struct {
	Server string
	// State is "starting" or "failed" (mcp.StateStarting, mcp.StateFailed).
	State string
}

// Mode is what happens when the model calls a tool (the tool policy).
type Mode string

// Tool policy modes, from the loosest to the strictest.
const (
	// ModeAuto runs the tool without a prompt (still shown and audited).
	ModeAuto Mode = "auto"
	// ModeAutoInDM is ModeAuto in direct messages and ModeAsk elsewhere.
	ModeAutoInDM Mode = "auto-in-dm"
	// ModeAsk asks the person who asked (or an admin) first.
	ModeAsk Mode = "ask"
	// ModeAdmin asks, and only a workspace admin's approval counts.
	ModeAdmin Mode = "admin"
	// ModeDeny never offers the tool to the model.
	ModeDeny Mode = "deny"
)

// Modes lists every mode, loosest first.
var Modes = []Mode{ModeAuto, ModeAutoInDM, ModeAsk, ModeAdmin, ModeDeny}

// Rule is one rule of a tool policy: the mode and privacy of the
// tools of one server whose names match Tool.
type Rule struct {
	// Tool is a glob on the tool's name on its server (* any run of
	// characters, ? one character); "" or "*" is every tool.
	Tool string
	// Mode is "" when the rule sets only the privacy.
	Mode Mode
	// Private sends the tool's results in channels to the asker only;
	// nil when the rule sets only the mode.
	Private *bool
	// Reset is set on a tool's own rule when its definition changed
	// after the rule was set: the tool is back to ask (at most) until an
	// admin sets its policy again.
	Reset bool
}

// IsZero reports whether the rule sets nothing (storing it removes it).
func (r Rule) IsZero() bool { return r.Mode == "" && r.Private == nil && !r.Reset }

// Words is the rule's mode and privacy as ParsePolicyWords reads them.
func (r Rule) Words() string {
	var w []string
	if r.Mode != "" {
		w = append(w, string(r.Mode))
	}
	if r.Private != nil {
		if *r.Private {
			w = append(w, "private")
		} else {
			w = append(w, "public")
		}
	}
	return strings.Join(w, " ")
}

// Policy sources, for people reading /bobbin mcp list.
const (
	PolicyFromDefault     = "default"
	PolicyFromAnnotations = "annotations"
	PolicyFromConfig      = "config"
	PolicyFromAdmin       = "admin"
	PolicyFromChanged     = "definition changed"
)

// Policy is the resolved policy of one tool.
type Policy struct {
	// Mode is the tool's mode (auto-in-dm not yet applied to a place).
	Mode Mode
	// Private: in channels, results go to the asker only.
	Private bool
	// OnceOnly: a trusted server says the tool is destructive, so every
	// call is asked for and no thread-wide permission is offered.
	OnceOnly bool
	// Source says where Mode came from (PolicyFrom*).
	Source string
}

// At is the mode in a place: auto-in-dm is auto in DMs and ask elsewhere.
func (p Policy) At(dm bool) Mode {
	if p.Mode == ModeAutoInDM {
		if dm {
			return ModeAuto
		}
		return ModeAsk
	}
	return p.Mode
}

// ToolPolicy is one tool's resolved policy for /bobbin mcp list and the
// App Home.
type ToolPolicy struct {
	Tool string
	Policy
}

// PolicyReport is a server's policy: its rules, and what they resolve to
// for every tool listed so far.
type PolicyReport struct {
	Server string
	// Config and Admin are the operator's rules and the admins'.
	Config, Admin []Rule
	Tools         []ToolPolicy
}

// Registration is a server an admin registered from Slack (HTTP servers
// only), as the bot hands it to the MCP manager to store
// (mcp.Manager.Register) and as the manager reads it back.
type Registration struct {
	Name string
	URL  string
	// Headers are sent with every request; their values are secrets
	// (encrypted at rest, never logged or shown).
	Headers map[string]string
	// Tools are the tool names the admin saw when registering.
	Tools []string
	// Auth is "" (static headers only), "workspace" or "user" (OAuth;
	// mcp.AuthWorkspace, mcp.AuthUser).
	Auth string
	// CreatedBy is the admin who registered it: a user server's tools are
	// listed through their connection.
	CreatedBy string
	// Scope is who may use the server's tools, and where (/bobbin mcp
	// scope); the zero value restricts nothing.
	Scope access.Scope
	// Preset names a preset of the MCP manager whose OAuth client
	// (client id, secret, scopes) the server signs in with ("" none;
	// PresetSlack): the record keeps the name, never the credentials,
	// which come from the process's configuration when it is mounted.
	Preset string
}

// PresetSlack is the preset of Slack's own MCP server (/bobbin mcp add
// slack): per-person OAuth with the app's client id and secret.
const PresetSlack = "slack"

// Errors the MCP manager returns and the bot branches on.
var (
	// ErrUnknownServer: no server of that name in the workspace.
	ErrUnknownServer = errors.New("mcp: no such server in this workspace")
	// ErrNeedsOAuth: a server being registered answers 401 with OAuth
	// metadata: register it with OAuth (workspace or per-user) and
	// Connect.
	ErrNeedsOAuth = errors.New("mcp: the server requires OAuth: register it with OAuth and connect")
	// ErrOAuthUnavailable: OAuth is not configured (no PUBLIC_URL).
	ErrOAuthUnavailable = errors.New("mcp: this server needs OAuth, and OAuth needs PUBLIC_URL (the bot's externally reachable base URL) to be set")
	// ErrNotConnected: no usable connection for the workspace or person
	// (nothing to use or to remove).
	ErrNotConnected = errors.New("mcp: not connected")
	// ErrBadRecord: a registration's stored record does not decode (it
	// must be removed and added again).
	ErrBadRecord = errors.New("the registration's record does not decode")
)
