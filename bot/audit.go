package bot

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/bot/ask"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// controlStore is what the audit log needs of the session store (part of
// Store; approvals are bot/ask's, the listing bot/admin's).
type controlStore interface {
	Audit(ctx context.Context, team string, fields map[string]string) error
}

// auditToolCall is the audit event of a tool call (those of prompts are
// bot/ask's, those of administration bot/admin's).
const auditToolCall = "tool_call"

// audit writes one audit record: a structured log line and an entry in the
// workspace's bounded audit stream in Redis. Fields must never hold
// secrets or tool arguments (only their digest). It does not fail the
// caller: a lost audit entry is logged.
func (b *Bot) audit(ctx context.Context, team string, fields map[string]string) {
	fields["team"] = team
	attrs := make([]any, 0, len(fields))
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		attrs = append(attrs, slog.String(k, fields[k]))
	}
	b.log.Info("bot: audit", attrs...)
	cs := b.store
	if team == "" {
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if err := cs.Audit(actx, team, fields); err != nil {
		b.log.Warn("bot: audit entry not stored", "team", team, "event", fields["event"], "err", err)
	}
}

// auditTools wraps the turn's tools so that every call that runs is
// audited with its outcome and duration.
func (b *Bot) auditTools(k session.ThreadKey, requester string, tools []agent.Tool) []agent.Tool {
	out := make([]agent.Tool, len(tools))
	for i, t := range tools {
		at := auditedTool{Tool: t, b: b, k: k, requester: requester}
		if ht, ok := t.(agent.HintedTool); ok {
			out[i] = auditedHintedTool{auditedTool: at, h: ht}
		} else {
			out[i] = at
		}
	}
	return out
}

type auditedTool struct {
	agent.Tool
	b         *Bot
	k         session.ThreadKey
	requester string
}

func (t auditedTool) Call(ctx context.Context, input json.RawMessage) (string, error) {
	ctx = t.toolContext(ctx)
	start := time.Now()
	out, err := t.Tool.Call(ctx, input)
	t.audited(ctx, input, start, err)
	return out, err
}

// CallParts forwards agent.PartsTool, so images a tool returns (MCP image
// content) reach the model; a tool without parts answers with none.
func (t auditedTool) CallParts(ctx context.Context, input json.RawMessage) (string, []provider.Part, error) {
	pt, ok := t.Tool.(agent.PartsTool)
	if !ok {
		out, err := t.Call(ctx, input)
		return out, nil, err
	}
	ctx = t.toolContext(ctx)
	start := time.Now()
	out, parts, err := pt.CallParts(ctx, input)
	t.audited(ctx, input, start, err)
	return out, parts, err
}

// toolContext tells the tool who asked (access.WithCaller): MCP OAuth
// per-user connections and questions from servers need the requester. Files
// the tool returns are shared in the thread (toolfiles.go).
func (t auditedTool) toolContext(ctx context.Context) context.Context {
	if s, ok := t.b.toolFiles(t.k, t.Tool); ok {
		ctx = agent.WithFileSharer(ctx, s)
	}
	return access.WithCaller(ctx, access.Caller{Team: t.k.Team, User: t.requester, Channel: t.k.Channel, Thread: t.k.ThreadTS})
}

// audited records one call that ran.
func (t auditedTool) audited(ctx context.Context, input json.RawMessage, start time.Time, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	f := map[string]string{
		"event": auditToolCall, "channel": t.k.Channel, "thread": t.k.ThreadTS, "user": t.requester,
		"tool": t.Spec().Name, "args_digest": ask.ArgsDigest(input), "outcome": outcome,
		"duration_ms": strconv.FormatInt(time.Since(start).Milliseconds(), 10),
	}
	if ht, ok := t.Tool.(agent.HintedTool); ok {
		h := ht.Hints()
		f["server"] = h.Server
		if h.Policy != "" {
			f["policy"] = h.Policy // "auto": it ran without a prompt
		}
	}
	t.b.audit(ctx, t.k.Team, f)
}

type auditedHintedTool struct {
	auditedTool
	h agent.HintedTool
}

func (t auditedHintedTool) Hints() agent.Hints { return t.h.Hints() }
