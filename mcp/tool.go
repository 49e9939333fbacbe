package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Reasons a tool is disabled.
const (
	ReasonChanged = "definition changed"
	ReasonNew     = "new tool"
)

// exposedName builds <server>__<tool> restricted to [a-zA-Z0-9_-]{1,64} and
// unique among taken (which it updates).
func exposedName(server, tool string, taken map[string]bool) string {
	clean := func(s string) string {
		b := []byte(s)
		for i, c := range b {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				b[i] = '_'
			}
		}
		// Multi-byte runes became several underscores; that is fine.
		return string(b)
	}
	base := clean(server) + "__" + clean(tool)
	if len(base) > 64 {
		base = base[:64]
	}
	if base == "" {
		base = "tool"
	}
	name := base
	for i := 2; taken[name]; i++ {
		suffix := "_" + strconv.Itoa(i)
		name = base[:min(len(base), 64-len(suffix))] + suffix
	}
	taken[name] = true
	return name
}

func inputSchema(t *mcp.Tool) json.RawMessage {
	if t.InputSchema != nil {
		if b, err := json.Marshal(t.InputSchema); err == nil && len(b) > 0 && b[0] == '{' {
			return b
		}
	}
	return json.RawMessage(`{"type":"object"}`)
}

// hintsFor maps annotations (untrusted unless cfg.Trusted) and the operator's
// allow/deny lists to agent.Hints. Absent hints take the spec defaults
// (destructive and open-world true).
func hintsFor(cfg ServerConfig, t *mcp.Tool) agent.Hints {
	h := agent.Hints{Server: cfg.Name, Tool: t.Name, Title: t.Title, Destructive: true, OpenWorld: true}
	if a := t.Annotations; a != nil {
		if a.Title != "" && h.Title == "" {
			h.Title = a.Title
		}
		h.ReadOnly = a.ReadOnlyHint
		h.Idempotent = a.IdempotentHint
		if a.DestructiveHint != nil {
			h.Destructive = *a.DestructiveHint
		}
		if a.OpenWorldHint != nil {
			h.OpenWorld = *a.OpenWorldHint
		}
	}
	if h.ReadOnly {
		h.Destructive = false
	}
	h.Trusted = cfg.Trusted
	h.Allowed = slices.Contains(cfg.Allow, t.Name)
	h.Denied = slices.Contains(cfg.Deny, t.Name)
	return h
}

// remoteTool adapts one MCP tool to agent.HintedTool.
type remoteTool struct {
	mt     *mount
	remote string
	spec   provider.ToolSpec
	hints  agent.Hints
	// access is who the tool was offered to, and where (ToolsFor).
	access *Access
}

var (
	_ agent.HintedTool = (*remoteTool)(nil)
	_ agent.PartsTool  = (*remoteTool)(nil)
)

func (t *remoteTool) Spec() provider.ToolSpec { return t.spec }

func (t *remoteTool) Hints() agent.Hints {
	h := t.hints
	h.Disabled = t.mt.isDisabled(t.remote)
	return h
}

// Call runs the tool with a timeout; cancelling ctx cancels the call on the
// server (notifications/cancelled, or a closed stream on modern HTTP).
// Images in the result are described in the text.
func (t *remoteTool) Call(ctx context.Context, input json.RawMessage) (string, error) {
	out, _, err := t.call(ctx, input, false)
	return out, err
}

// CallParts is Call with the result's images (ImageContent) returned as
// image parts, for the agent to show the model where its provider allows.
func (t *remoteTool) CallParts(ctx context.Context, input json.RawMessage) (string, []provider.Part, error) {
	return t.call(ctx, input, true)
}

func (t *remoteTool) call(ctx context.Context, input json.RawMessage, images bool) (string, []provider.Part, error) {
	if t.hints.Denied {
		return "", nil, fmt.Errorf("tool %s is denied by the operator's configuration", t.spec.Name)
	}
	if t.access != nil {
		if v := t.mt.m.scopeAt(ctx, t.mt, *t.access); !v.OK {
			return "", nil, fmt.Errorf("tool %s is not available here: %s", t.spec.Name, describeVerdict(v))
		}
	}
	if t.mt.isDisabled(t.remote) {
		return "", nil, fmt.Errorf("tool %s is disabled: its definition changed since it was approved; a workspace admin must run `/bobbin mcp approve %s`", t.spec.Name, t.mt.cfg.Name)
	}
	// A definition approved while this turn ran is not the one the model
	// (and a thread grant, bound to the pin) saw: the next turn offers it.
	if t.mt.redefinedSince(t.remote, t.hints.Pin) {
		return "", nil, fmt.Errorf("tool %s changed since this turn began (an admin approved a new definition); it can be used from the next message on", t.spec.Name)
	}
	args := json.RawMessage(`{}`)
	if s := strings.TrimSpace(string(input)); s != "" && s != "null" {
		if !json.Valid(input) || s[0] != '{' {
			return "", nil, errors.New("tool arguments must be a JSON object")
		}
		args = input
	}
	// The call's clock stops while a person answers (Connect, elicitation).
	ctx, cancel := withCallClock(ctx, t.mt.callTimeout())
	defer cancel()
	res, err := t.mt.call(ctx, &mcp.CallToolParams{Name: t.remote, Arguments: args})
	if err != nil {
		if timedOut(ctx) {
			return "", nil, fmt.Errorf("%s: timed out after %s", t.spec.Name, t.mt.callTimeout())
		}
		return "", nil, fmt.Errorf("%s: %w", t.spec.Name, err)
	}
	var notes map[int]string
	var tableNotes []string
	if s := agent.FileSharerFrom(ctx); s != nil && !res.IsError {
		notes = t.shareFiles(ctx, s, res)
		if ts, ok := s.(agent.TableSharer); ok {
			for _, tb := range resultTables(t.spec.Name, res) {
				if n := ts.ShareTable(ctx, tb); n != "" {
					tableNotes = append(tableNotes, n)
				}
			}
		}
	}
	out, imgs := resultContent(res, images, notes)
	if len(tableNotes) > 0 {
		// First, so the output cap never cuts them.
		out = strings.Join(tableNotes, "\n") + "\n" + out
	}
	out = capOutput(out, t.mt.m.outputCap())
	if res.IsError {
		if out == "" {
			out = "the tool reported an error"
		}
		return "", nil, errors.New(out)
	}
	return out, imgs, nil
}

// resultText renders a CallToolResult for the model: text blocks joined,
// structuredContent as JSON when there is no text, other blocks as
// placeholders.
func resultText(res *mcp.CallToolResult) string {
	s, _ := resultContent(res, false, nil)
	return s
}

// resultContent is resultText, but with images true the result's images
// are returned as image parts instead of placeholders, and blocks shared
// as files (shareFiles) are their notes.
func resultContent(res *mcp.CallToolResult, images bool, notes map[int]string) (string, []provider.Part) {
	if res.NeedsInput() {
		return "[the server asked for more input, which Bobbin does not support yet]", nil
	}
	var parts []string
	var imgs []provider.Part
	hasText := false
	for i, c := range res.Content {
		if note, ok := notes[i]; ok {
			parts = append(parts, note)
			if _, img := c.(*mcp.ImageContent); !img || !images {
				continue
			}
		}
		switch x := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, x.Text)
			hasText = true
		case *mcp.ImageContent:
			if images && len(x.Data) > 0 {
				imgs = append(imgs, provider.Part{Type: provider.PartImage, Data: x.Data,
					File: &provider.FileRef{MimeType: x.MIMEType, Size: int64(len(x.Data))}})
				continue
			}
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes]", orUnknown(x.MIMEType), len(x.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes]", orUnknown(x.MIMEType), len(x.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s %s]", x.Name, x.URI))
		case *mcp.EmbeddedResource:
			if r := x.Resource; r != nil {
				n := len(r.Text) + len(r.Blob)
				parts = append(parts, fmt.Sprintf("[resource: %s (%s), %d bytes]", r.URI, orUnknown(r.MIMEType), n))
			} else {
				parts = append(parts, "[resource]")
			}
		default:
			parts = append(parts, fmt.Sprintf("[%T content]", c))
		}
	}
	if !hasText && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append([]string{string(b)}, parts...)
		}
	}
	return strings.Join(parts, "\n"), imgs
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

// capOutput strips invisible and tag characters (hidden instructions to the
// model) and cuts s on a rune boundary with a visible marker, so that the
// result, marker included, is at most limit bytes: the agent caps results
// again at its own limit (the same by default), and a result over it would
// lose this marker's true count to one counting only the marker.
func capOutput(s string, limit int) string {
	s = strings.Map(func(r rune) rune {
		if tagRune(r) || invisibleRune(r) {
			return -1
		}
		return r
	}, s)
	if len(s) <= limit {
		return s
	}
	const marker = "\n…[truncated %d bytes]"
	// The count is at most len(s), so this reserves enough for the marker.
	cut := max(limit-len(fmt.Sprintf(marker, len(s))), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(marker, len(s)-cut)
}

// maxDescription caps what one tool's description costs in every prompt.
const maxDescription = 2048

func describe(server, desc string) string {
	desc = strings.TrimSpace(desc)
	if len(desc) > maxDescription {
		cut := maxDescription
		for cut > 0 && !utf8.RuneStart(desc[cut]) {
			cut--
		}
		desc = desc[:cut] + "…"
	}
	if desc == "" {
		return "[" + server + "]"
	}
	return "[" + server + "] " + desc
}

func (m *mount) callTimeout() time.Duration {
	if m.cfg.Timeout > 0 {
		return m.cfg.Timeout
	}
	return m.m.opts.CallTimeout
}
