package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bobbinbot/bobbin/provider"
)

// toolGrace is how long a tool that ignores its cancelled context is waited
// for before its result is synthesized; its goroutine is then left to finish
// on its own (it exits when Call returns).
const toolGrace = 2 * time.Second

// plan is one tool call on its way through the permission policy and the
// runner.
type plan struct {
	call   provider.ToolCall
	tool   Tool
	spec   provider.ToolSpec
	hints  Hints
	args   json.RawMessage
	run    bool     // the policy allowed it
	dec    Decision // how it was allowed or denied
	reason string   // short reason for observers
	res    provider.ToolResult
	done   bool // finished on its own (not cut by cancellation)
	// started: the tool was called (it may have acted even if cut short).
	started bool
	dur     time.Duration
	// keep is what transcripts keep in place of a TurnOnly result ("":
	// the result itself).
	keep string
}

// keptRes is the result as it may be kept (spans).
func (p *plan) keptRes() provider.ToolResult {
	res := p.res
	if p.keep != "" {
		res.Content, res.Parts = p.keep, nil
	}
	return res
}

func (p *plan) fail(reason, content string) {
	p.run = false
	p.dec = Deny
	p.reason = reason
	p.res = provider.ToolResult{CallID: p.call.ID, Name: p.call.Name, Content: content, IsError: true}
	p.done = true
}

// decide applies the permission policy to one call, asking the Approver if
// needed. It reports false when ctx ended while asking.
func (r *run) decide(ctx context.Context, p *plan) bool {
	name := p.call.Name
	tool, ok := r.tools[name]
	if !ok {
		p.fail("unknown tool", fmt.Sprintf("Error: there is no tool named %q. Use only the tools offered.", name))
		return true
	}
	p.tool, p.spec, p.hints = tool, r.specs[name], r.hints[name]
	if cs, compiled := r.a.schemas.get(p.spec.InputSchema); cs.err != nil && compiled {
		r.a.log.Warn("agent: tool input schema unusable; checking only that arguments are an object", "tool", name, "err", cs.err)
	}
	args, err := r.a.schemas.validateArgs(p.spec.InputSchema, p.call.Arguments)
	if err != nil {
		p.fail("invalid arguments", fmt.Sprintf("Error: invalid arguments for tool %q: %v. Fix the arguments and call it again.", name, err))
		return true
	}
	p.args = args
	h := p.hints
	switch {
	case h.Disabled:
		p.fail("disabled", fmt.Sprintf("Error: tool %q is disabled until an administrator re-approves its changed definition. Continue without it.", name))
		return true
	case h.Denied:
		p.fail("denied by configuration", fmt.Sprintf("Error: tool %q is not allowed by this workspace's configuration. Continue without it.", name))
		return true
	case h.Allowed && h.Policy != "":
		p.run, p.dec, p.reason = true, AllowOnce, "allowed by the tool policy"
		return true
	case h.Allowed:
		p.run, p.dec, p.reason = true, AllowOnce, "allowed by configuration"
		return true
	case h.ReadOnly && h.Trusted && h.Policy == "":
		p.run, p.dec, p.reason = true, AllowOnce, "read-only tool of a trusted server"
		return true
	case r.grants[GrantKey(name, h)] && !h.OnceOnly && r.grantValid(ctx, GrantKey(name, h)):
		p.run, p.dec, p.reason = true, AllowForSession, "allowed for this thread"
		return true
	}
	if r.t.Approver == nil {
		p.fail("no approver", fmt.Sprintf("The tool call %q needs a person's approval and nobody can be asked here, so it did not run. Continue without it.", name))
		return true
	}
	r.observe(Event{Kind: EventApprovalNeeded, Call: p.call, Hints: h})
	actx, cancel := context.WithTimeout(ctx, r.a.opts.ApprovalTimeout)
	actx, span := r.startApproval(actx, p)
	dec, err := r.t.Approver.Approve(actx, ApprovalRequest{Call: p.call, Spec: p.spec, Hints: h})
	endApproval(span, dec, err)
	timedOut := errors.Is(actx.Err(), context.DeadlineExceeded)
	cancel()
	if ctx.Err() != nil {
		return false
	}
	switch {
	case err != nil && timedOut:
		p.fail("approval timed out", fmt.Sprintf("The tool call %q was not approved in time, so it did not run. Continue without it or ask the person.", name))
	case err != nil:
		r.a.log.Warn("agent: approval failed; denying", "tool", name, "err", err)
		p.fail("approval failed", fmt.Sprintf("The tool call %q could not be approved (%v), so it did not run. Continue without it.", name, err))
	case dec == AllowForSession && h.OnceOnly:
		p.run, p.dec, p.reason = true, AllowOnce, "approved once"
	case dec == AllowForSession:
		r.grants[GrantKey(name, h)] = true
		p.run, p.dec, p.reason = true, AllowForSession, "approved for this thread"
	case dec == AllowOnce:
		p.run, p.dec, p.reason = true, AllowOnce, "approved once"
	default:
		p.fail("declined", fmt.Sprintf("The person declined the tool call %q, so it did not run. Do not retry it; continue without it or ask them what to do instead.", name))
	}
	return true
}

// grantValid checks a grant (its GrantKey) with Turn.GrantValid; a
// revoked grant is dropped so the person is asked again. Decisions are
// made one at a time, so r.grants needs no lock here.
func (r *run) grantValid(ctx context.Context, key string) bool {
	if r.t.GrantValid == nil || r.t.GrantValid(ctx, key) {
		return true
	}
	delete(r.grants, key)
	return false
}

// runTools decides and runs one step's calls and returns their results in
// call order, as they are kept: a TurnOnly result is its placeholder
// there, and full holds it as the model gets it, by index in results. If
// ctx ends, calls that did not finish are answered "interrupted", so
// every call always gets a result.
func (r *run) runTools(ctx context.Context, calls []provider.ToolCall) (results []provider.Message, full map[int]provider.Message) {
	plans := make([]*plan, len(calls))
	for i, c := range calls {
		plans[i] = &plan{call: c}
	}
	// Ask one at a time: a person sees one prompt at a time, and an
	// "allow for this thread" answer covers the same tool's later calls.
	for _, p := range plans {
		if ctx.Err() != nil || !r.decide(ctx, p) {
			break
		}
	}

	sem := make(chan struct{}, r.a.opts.Parallelism)
	var wg sync.WaitGroup
	for _, p := range plans {
		if !p.run || ctx.Err() != nil {
			continue
		}
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			p.started = true
			r.call(ctx, p)
		})
	}
	wg.Wait()

	// Handed over (ErrHandOver): a call that was never started gets no
	// result, so the next holder of the turn decides and runs it (the
	// person's approval, if they gave it meanwhile, is found there).
	handOver := ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrHandOver)
	out := make([]provider.Message, 0, len(plans))
	for _, p := range plans {
		if handOver && !p.done && !p.started {
			continue
		}
		if !p.done {
			p.res = provider.ToolResult{CallID: p.call.ID, Name: p.call.Name, IsError: true,
				Content: "Error: interrupted: the person stopped the turn before this tool call finished."}
			r.observe(Event{Kind: EventToolFinished, Call: p.call, Hints: p.hints, Decision: p.dec, IsError: true, Duration: p.dur, Text: "interrupted"})
		} else if !p.run {
			r.observe(Event{Kind: EventToolFinished, Call: p.call, Hints: p.hints, Decision: p.dec, IsError: true, Text: p.reason})
		}
		m := r.capResult(p.res).Message()
		if p.keep != "" {
			if full == nil {
				full = map[int]provider.Message{}
			}
			full[len(out)] = m
			m = keptResult(m, p.keep)
		}
		out = append(out, m)
	}
	return out, full
}

type callOutcome struct {
	out   string
	parts []provider.Part
	err   error
	panic any
	stack []byte
}

// call runs one allowed call with its timeout, recovering a panic.
func (r *run) call(ctx context.Context, p *plan) {
	r.observe(Event{Kind: EventToolStarted, Call: p.call, Hints: p.hints, Decision: p.dec, Text: p.reason})
	ctx, span := r.startTool(ctx, p)
	defer func() { r.endTool(span, p.keptRes()) }()
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, r.a.opts.ToolTimeout)
	defer cancel()
	cctx, mark := withTurnOnlyMark(cctx)
	ch := make(chan callOutcome, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				ch <- callOutcome{panic: v, stack: debug.Stack()}
			}
		}()
		if pt, ok := p.tool.(PartsTool); ok {
			out, parts, err := pt.CallParts(cctx, p.args)
			ch <- callOutcome{out: out, parts: parts, err: err}
			return
		}
		out, err := p.tool.Call(cctx, p.args)
		ch <- callOutcome{out: out, err: err}
	}()
	var o callOutcome
	select {
	case o = <-ch:
	case <-cctx.Done():
		t := time.NewTimer(toolGrace)
		select {
		case o = <-ch:
		case <-t.C:
			o = callOutcome{err: cctx.Err()}
			r.a.log.Warn("agent: tool ignored its context; abandoning it", "tool", p.call.Name)
		}
		t.Stop()
	}
	p.dur = time.Since(start)
	res := provider.ToolResult{CallID: p.call.ID, Name: p.call.Name}
	p.done = true
	switch {
	case ctx.Err() != nil && (o.err != nil || o.panic != nil):
		// Cut short by the turn's cancellation: runTools answers it.
		p.done = false
		return
	case o.panic != nil:
		r.a.log.Error("agent: tool panicked", "tool", p.call.Name, "panic", fmt.Sprint(o.panic), "stack", string(o.stack))
		res.IsError, res.Content = true, fmt.Sprintf("Error: the tool %q crashed (panic: %v).", p.call.Name, o.panic)
	case o.err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded):
		res.IsError, res.Content = true, fmt.Sprintf("Error: the tool %q timed out after %s.", p.call.Name, r.a.opts.ToolTimeout)
	case o.err != nil:
		res.IsError, res.Content = true, "Error: "+o.err.Error()
		if o.out != "" {
			res.Content += "\n" + o.out
		}
		p.keep = mark.placeholderOf()
	default:
		res.Content = o.out
		if len(o.parts) > 0 {
			res.Parts = r.toolParts(ctx, p.call.Name, o.parts)
		}
		p.keep = mark.placeholderOf()
	}
	p.res = res
	reason := p.reason
	if errors.Is(cctx.Err(), context.DeadlineExceeded) && o.err != nil {
		reason = "timed out"
	}
	r.observe(Event{Kind: EventToolFinished, Call: p.call, Hints: p.hints, Decision: p.dec, IsError: res.IsError, Duration: p.dur, Text: reason, Result: res.Content})
}

// capResult strips invisible and control characters from a result and cuts
// it to the per-result cap and what is left of the per-turn cap, with a
// visible marker (reliability-security.md §6).
func (r *run) capResult(res provider.ToolResult) provider.ToolResult {
	s := sanitize(res.Content)
	limit := r.a.opts.OutputCap
	left := r.a.opts.TurnOutputCap - r.outputUsed
	const floor = 256 // always show the start of a result
	if left < limit {
		limit = max(left, floor)
	}
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = fmt.Sprintf("%s\n…[truncated %d bytes]", s[:cut], len(s)-cut)
	}
	r.outputUsed += len(s)
	res.Content = s
	return res
}

// sanitize removes control characters (except tab and newline), invisible
// and bidi-control code points and Unicode tags, which can hide
// instructions from the person while the model reads them, and replaces
// invalid UTF-8.
func sanitize(s string) string {
	clean := true
	for _, c := range s {
		if dropRune(c) || c == utf8.RuneError {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, c := range s {
		if !dropRune(c) {
			b.WriteRune(c)
		}
	}
	return b.String()
}

func dropRune(c rune) bool {
	switch {
	case c == '\n' || c == '\t':
		return false
	case c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0):
		return true
	case c >= 0x200b && c <= 0x200f, c == 0x2060, c >= 0x202a && c <= 0x202e, c >= 0x2066 && c <= 0x2069, c == 0xfeff:
		return true
	case c >= 0xe0000 && c <= 0xe007f:
		return true
	}
	return false
}
