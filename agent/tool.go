package agent

import (
	"context"
	"encoding/json"

	"github.com/bobbinbot/bobbin/provider"
)

// Tool is something the model may call. Implementations live elsewhere (the
// mcp package adapts MCP tools); a returned error is a result the model sees,
// not the end of the turn.
type Tool interface {
	Spec() provider.ToolSpec
	Call(ctx context.Context, input json.RawMessage) (string, error)
}

// PartsTool is a Tool whose results may carry images besides text (an MCP
// tool returning image content). The agent calls CallParts instead of Call
// when a tool has it; image parts need only Type provider.PartImage and
// Data (the agent sniffs, checks and prepares them). The model sees them as
// images where the provider takes images in tool results (Anthropic), else
// as a note. Their bytes live for the turn only: transcripts keep a note.
// A wrapper around a Tool (auditing, say) must implement CallParts too, or
// the images are lost.
type PartsTool interface {
	Tool
	CallParts(ctx context.Context, input json.RawMessage) (string, []provider.Part, error)
}

// Hints describe a tool for the permission policy and the approval prompt.
// They come from an untrusted server unless Trusted is set.
type Hints struct {
	// Server is the name of the server that provides the tool ("" if none).
	Server string
	// Tool is the tool's own name on that server.
	Tool string
	// Title is a human-readable name, if the server gave one.
	Title       string
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
	OpenWorld   bool
	// Trusted is true when the operator marked the server trusted; only then
	// may ReadOnly auto-allow a call.
	Trusted bool
	// Allowed is true when configuration allows the tool without asking.
	Allowed bool
	// Denied is true when configuration forbids the tool.
	Denied bool
	// Disabled is true when the tool's definition changed and waits for an
	// admin's re-approval; a disabled tool is never called.
	Disabled bool
	// Policy is the tool policy's mode where the turn runs ("auto", "ask",
	// "admin"; "" when no policy applies, and the rules above decide).
	// With a policy, Allowed says whether the call runs without asking,
	// and ReadOnly with Trusted no longer does.
	Policy string
	// OnceOnly: every call is asked for, no thread-wide permission is
	// offered and earlier ones do not apply (a destructive tool).
	OnceOnly bool
	// AdminOnly: only a workspace admin's approval counts.
	AdminOnly bool
	// Private: in a channel, the result goes to the asker only.
	Private bool
	// Pin identifies the tool's definition as pinned (mcp: the hash of what
	// the model and the policy see of it); "" for a tool without one. A
	// thread-wide permission is bound to it (GrantKey), so a changed
	// definition is asked about again in every thread.
	Pin string
}

// GrantKey is what a thread-wide permission for the tool name with hints
// h is kept as: the name, bound to the definition it was given for
// (name@pin) when the tool has a pin. Turn.Grants, Turn.GrantValid and
// the grants of Result and Checkpoint use these keys.
func GrantKey(name string, h Hints) string {
	if h.Pin == "" {
		return name
	}
	return name + "@" + h.Pin
}

// HintedTool is a Tool that also describes itself for the permission policy.
type HintedTool interface {
	Tool
	Hints() Hints
}

// Decision is a person's answer to an approval prompt.
type Decision int

const (
	// Deny refuses the call; the model is told the person declined.
	Deny Decision = iota
	// AllowOnce runs this call only.
	AllowOnce
	// AllowForSession runs this call and every later call of the same tool in
	// this session (thread) without asking.
	AllowForSession
)

func (d Decision) String() string {
	switch d {
	case AllowOnce:
		return "allow_once"
	case AllowForSession:
		return "allow_session"
	}
	return "deny"
}

// ApprovalRequest is what an Approver is asked.
type ApprovalRequest struct {
	// Call is the tool call, arguments already validated against the schema.
	Call provider.ToolCall
	// Spec and Hints describe the tool.
	Spec  provider.ToolSpec
	Hints Hints
}

// Approver asks a person whether a tool call may run. It blocks until the
// person decides or ctx ends; an error (including a timeout) counts as Deny.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Decision, error)
}
