package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bobbinbot/bobbin/provider"
)

// finalCheckpointTimeout bounds the checkpoint written after ctx ended.
const finalCheckpointTimeout = 10 * time.Second

// loopGuardRepeats is how many identical calls end a turn.
const loopGuardRepeats = 3

// interruptedText stands in for an answer cut off before any text: an
// assistant message must not be empty for some endpoints.
const interruptedText = "[interrupted]"

// run is the state of one turn.
type run struct {
	a   *Agent
	t   Turn
	obs Observer
	mu  sync.Mutex // serializes Observe calls from tool goroutines

	tools    map[string]Tool
	specs    map[string]provider.ToolSpec
	hints    map[string]Hints
	toolList []provider.ToolSpec // sorted by name
	grants   map[string]bool

	history    []provider.Message
	budget     *budget
	seen       map[string]int // loop guard: tool + canonical arguments
	outputUsed int            // tool output bytes fed to the model this turn
	res        Result

	// turnOnly are this turn's results marked TurnOnly, as the model
	// gets them, by index in history (which holds their placeholders;
	// turnonly.go).
	turnOnly map[int]provider.Message

	mediaMu      sync.Mutex       // guards memo (loads run in parallel)
	memo         map[string]media // this turn's media, by mediaKey
	mediaRefused bool             // the endpoint refused media this turn
}

func newRun(a *Agent, t Turn) *run {
	r := &run{
		a: a, t: t, obs: t.Observer,
		tools:  map[string]Tool{},
		specs:  map[string]provider.ToolSpec{},
		hints:  map[string]Hints{},
		grants: map[string]bool{},
		seen:   map[string]int{},
		memo:   map[string]media{},
	}
	if r.obs == nil {
		r.obs = discard{}
	}
	for _, tool := range t.Tools {
		spec := tool.Spec()
		if _, dup := r.tools[spec.Name]; dup {
			a.log.Warn("agent: duplicate tool name; keeping the first", "tool", spec.Name)
			continue
		}
		r.tools[spec.Name] = tool
		r.specs[spec.Name] = spec
		if ht, ok := tool.(HintedTool); ok {
			r.hints[spec.Name] = ht.Hints()
		}
		r.toolList = append(r.toolList, spec)
	}
	slices.SortFunc(r.toolList, func(x, y provider.ToolSpec) int { return strings.Compare(x.Name, y.Name) })
	for _, g := range t.Grants {
		r.grants[g] = true
	}
	r.history = slices.Clone(t.History)
	r.budget = newBudget(a.counter, cmp.Or(t.Model, a.opts.Model), t.Calibration, t.Anchor, t.System, r.toolList, r.history)
	return r
}

func (r *run) observe(ev Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obs.Observe(ev)
}

func (r *run) run(ctx context.Context) (Result, error) {
	err := r.loop(ctx)
	if err != nil && r.res.Outcome != Cancelled {
		r.res.Outcome = Failed
	}
	r.res.Messages = r.history
	r.res.Grants = r.grantList()
	r.res.Anchor = r.keptAnchor() // first: it may learn pending reports
	r.res.Calibration = r.budget.ratio
	r.observe(Event{Kind: EventDone, Usage: r.res.Usage, Step: r.res.Steps, Err: err})
	return r.res, err
}

func (r *run) grantList() []string {
	return slices.Sorted(maps.Keys(r.grants))
}

func (r *run) loop(ctx context.Context) error {
	if calls := pendingCalls(r.history); len(calls) > 0 {
		if done, err := r.toolStep(ctx, calls); done || err != nil {
			return err
		}
	}
	for {
		if r.res.Steps >= r.a.opts.StepLimit {
			r.notice(StepLimit, fmt.Sprintf("I stopped after %d model calls in this turn (the step limit). Ask me to continue if there is more to do.", r.res.Steps))
			return nil
		}
		if r.allow(ctx) {
			return nil
		}
		if r.overBudget() {
			if err := r.compact(ctx); err != nil {
				if ctx.Err() != nil {
					return r.cancelled(ctx, nil)
				}
				if !errors.Is(err, errNothingToCompact) {
					var cpErr checkpointError
					if errors.As(err, &cpErr) {
						return err
					}
					r.a.log.Warn("agent: compaction failed; continuing uncompacted", "err", err)
				}
			}
		}

		s, err := r.step(ctx)
		if err != nil && ctx.Err() == nil && errors.Is(err, provider.ErrMediaUnsupported) && s.empty() && !r.mediaRefused {
			// The endpoint takes no images or PDFs: retry once with notes
			// in their place, and send none for the rest of the turn.
			r.mediaRefused = true
			r.a.warnMediaRefused(err)
			s, err = r.step(ctx)
		}
		if err != nil && ctx.Err() == nil && errors.Is(err, provider.ErrContextLength) && s.empty() {
			// The estimate was off: compact and retry once.
			r.a.log.Info("agent: context length exceeded; compacting and retrying")
			if cerr := r.compact(ctx); cerr != nil {
				if ctx.Err() != nil {
					return r.cancelled(ctx, nil)
				}
				var cpErr checkpointError
				if errors.As(cerr, &cpErr) {
					return cerr
				}
				return fmt.Errorf("agent: model call: %w (compaction: %v)", err, cerr)
			}
			s, err = r.step(ctx)
		}
		if err != nil {
			if ctx.Err() != nil {
				return r.cancelled(ctx, s.partial())
			}
			if m := s.partial(); m != nil && m.Content != interruptedText {
				// Keep what was shown, marked cut short.
				if cerr := r.commit(ctx, Checkpoint{Append: []provider.Message{*m}}); cerr != nil {
					return errors.Join(fmt.Errorf("agent: model call: %w", err), cerr)
				}
			}
			return fmt.Errorf("agent: model call: %w", err)
		}

		r.spent(ctx, s.usage)
		msg := s.msg
		reqLen := len(r.history)
		r.res.Usage.Add(s.usage)
		if msg.Content != "" {
			r.res.Text = msg.Content
		}
		r.budget.add(msg)
		r.history = append(r.history, msg)
		r.budget.observe(reqLen, s.usage)
		if err := r.checkpoint(ctx, Checkpoint{Append: []provider.Message{msg}, Usage: s.usage}); err != nil {
			return err
		}

		switch {
		case s.stop == provider.StopMaxTokens:
			// Tool arguments may be cut: never run them (providers.md §8).
			if err := r.answerUnrun(ctx, msg.ToolCalls, "Error: not run: the response hit the output token limit, so the arguments may be incomplete."); err != nil {
				return err
			}
			r.notice(MaxTokens, "The answer was cut off at the output token limit.")
			return nil
		case s.stop == provider.StopOther:
			if err := r.answerUnrun(ctx, msg.ToolCalls, "Error: not run: the response stopped early ("+s.raw+")."); err != nil {
				return err
			}
			r.notice(Stopped, fmt.Sprintf("The model stopped without finishing (%s).", cmp.Or(s.raw, "unknown reason")))
			return nil
		case len(msg.ToolCalls) == 0:
			r.res.Outcome = EndTurn
			return nil
		}
		if done, err := r.toolStep(ctx, msg.ToolCalls); done || err != nil {
			return err
		}
	}
}

// toolStep applies the loop guard, runs calls and checkpoints their results.
// done reports that the turn ended.
func (r *run) toolStep(ctx context.Context, calls []provider.ToolCall) (done bool, err error) {
	keys := make([]string, len(calls))
	for i, c := range calls {
		keys[i] = guardKey(c)
		r.seen[keys[i]]++
	}
	for i, c := range calls {
		if r.seen[keys[i]] >= loopGuardRepeats {
			if err := r.answerUnrun(ctx, calls, "Error: not run: this exact call was already made twice in this turn."); err != nil {
				return true, err
			}
			r.notice(LoopGuard, fmt.Sprintf("I stopped because I kept calling %s with the same arguments.", c.Name))
			return true, nil
		}
	}
	results, full := r.runTools(ctx, calls)
	r.budget.add(r.addTurnOnly(results, full)...)
	r.history = append(r.history, results...)
	if err := r.checkpoint(ctx, Checkpoint{Append: results}); err != nil {
		return true, err
	}
	if ctx.Err() != nil {
		return true, r.cancelled(ctx, nil)
	}
	return false, nil
}

// answerUnrun gives every call a result without running it, so the
// transcript stays valid for providers that require one per call.
func (r *run) answerUnrun(ctx context.Context, calls []provider.ToolCall, content string) error {
	if len(calls) == 0 {
		return nil
	}
	results := make([]provider.Message, len(calls))
	for i, c := range calls {
		results[i] = provider.ToolResult{CallID: c.ID, Name: c.Name, Content: content, IsError: true}.Message()
		r.observe(Event{Kind: EventToolFinished, Call: c, Hints: r.hints[c.Name], Decision: Deny, IsError: true, Text: "not run"})
	}
	r.budget.add(results...)
	r.history = append(r.history, results...)
	return r.checkpoint(ctx, Checkpoint{Append: results})
}

func (r *run) notice(o Outcome, text string) {
	r.res.Outcome = o
	r.res.Notice = text
	r.observe(Event{Kind: EventNotice, Text: text, Step: r.res.Steps})
}

// cancelled records an interrupted answer (if any) and returns the error
// Run reports for a cancelled turn.
func (r *run) cancelled(ctx context.Context, partial *provider.Message) error {
	r.res.Outcome = Cancelled
	cause := context.Cause(ctx)
	err := fmt.Errorf("agent: turn cancelled: %w", cause)
	if cause != ctx.Err() {
		// Keep both the caller's cause and context.Canceled matchable.
		err = fmt.Errorf("agent: turn cancelled: %w (%w)", ctx.Err(), cause)
	}
	if partial != nil {
		r.res.Text = partial.Content
		if cerr := r.commit(ctx, Checkpoint{Append: []provider.Message{*partial}}); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
	return err
}

// commit appends messages to the history and checkpoints them.
func (r *run) commit(ctx context.Context, cp Checkpoint) error {
	r.budget.add(cp.Append...)
	r.history = append(r.history, cp.Append...)
	return r.checkpoint(ctx, cp)
}

// checkpointError marks an error returned by Turn.Checkpoint.
type checkpointError struct{ err error }

func (e checkpointError) Error() string { return "agent: checkpoint: " + e.err.Error() }
func (e checkpointError) Unwrap() error { return e.err }

// checkpoint hands a step to the caller. After ctx ended it uses a short
// fresh context so the final state of an interrupted turn is still saved.
func (r *run) checkpoint(ctx context.Context, cp Checkpoint) error {
	if r.t.Checkpoint == nil {
		return nil
	}
	cp.Grants = r.grantList()
	cp.Anchor = r.keptAnchor() // first: it may learn pending reports
	cp.Calibration = r.budget.ratio
	cp.Append = slices.Clone(cp.Append)
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), finalCheckpointTimeout)
		defer cancel()
	}
	if err := r.t.Checkpoint(ctx, cp); err != nil {
		return checkpointError{err}
	}
	return nil
}

// streamed is one model response, complete or cut short.
type streamed struct {
	msg   provider.Message
	stop  provider.StopReason
	raw   string
	usage provider.Usage
	text  strings.Builder
}

func (s *streamed) empty() bool { return s.text.Len() == 0 }

// partial returns the assistant message to record for an answer cut short,
// or nil when nothing was said. Partial tool calls and reasoning are
// dropped: they never ran and a cut signature is invalid.
func (s *streamed) partial() *provider.Message {
	if s == nil {
		return nil
	}
	m := provider.Message{Role: provider.RoleAssistant, Content: s.text.String(), Interrupted: true}
	if m.Content == "" {
		m.Content = interruptedText
	}
	return &m
}

// request builds the next model request from the run's history. Its
// prefix (model, sorted tools, system prompt, earlier history, the same
// image bytes) is byte-identical to the previous request's, so prompt
// caches hit. The turn's TurnOnly results replace their placeholders,
// and images and PDFs get their bytes here (see withMedia).
func (r *run) request(ctx context.Context, history []provider.Message) provider.Request {
	msgs := make([]provider.Message, 0, len(history)+1)
	if r.t.System != "" {
		msgs = append(msgs, provider.Message{Role: provider.RoleSystem, Content: r.t.System})
	}
	off := len(msgs)
	msgs = append(msgs, history...)
	for i, m := range r.turnOnly {
		if i < len(history) {
			msgs[off+i] = m
		}
	}
	msgs = r.withMedia(ctx, msgs)
	return provider.Request{Model: r.model(), Messages: msgs, Tools: r.toolList, MaxTokens: r.maxTokens()}
}

// step makes one model call and streams it to the observer, in its span.
func (r *run) step(ctx context.Context) (*streamed, error) {
	r.res.Steps++
	r.observe(Event{Kind: EventStep, Step: r.res.Steps})
	req := r.request(ctx, r.history)
	sctx, span := r.startChat(ctx, req, true)
	s, err := r.stream(sctx, req)
	r.endChat(span, s, err)
	return s, err
}

// stream reads one model response.
func (r *run) stream(ctx context.Context, req provider.Request) (*streamed, error) {
	s := &streamed{}
	var calls []provider.ToolCall
	var done, thinking bool
	for ev, err := range r.provider().Stream(ctx, req) {
		if err != nil {
			return s, err
		}
		switch ev.Type {
		case provider.EventTextDelta:
			s.text.WriteString(ev.Text)
			r.observe(Event{Kind: EventText, Text: ev.Text, Step: r.res.Steps})
		case provider.EventReasoningDelta:
			if !thinking {
				thinking = true
				r.observe(Event{Kind: EventReasoning, Text: "thinking", Step: r.res.Steps})
			}
		case provider.EventToolCall:
			calls = append(calls, ev.ToolCall)
		case provider.EventDone:
			done = true
			if ev.Message != nil {
				s.msg = *ev.Message
				s.msg.Reasoning = slices.Clone(s.msg.Reasoning)
				s.msg.ToolCalls = slices.Clone(s.msg.ToolCalls)
			}
			s.stop, s.raw, s.usage = ev.StopReason, ev.RawStopReason, ev.Usage
		}
	}
	if !done {
		if ctx.Err() != nil {
			return s, ctx.Err()
		}
		return s, provider.ErrTruncated
	}
	s.msg.Role = provider.RoleAssistant
	if s.msg.Content == "" {
		s.msg.Content = s.text.String()
	}
	if len(s.msg.ToolCalls) == 0 {
		s.msg.ToolCalls = calls
	}
	for i := range s.msg.ToolCalls {
		if s.msg.ToolCalls[i].ID == "" {
			// Some local servers omit ids; results must name their call.
			s.msg.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", r.res.Steps, i)
		}
	}
	if s.stop == "" {
		s.stop = provider.StopEndTurn
		if len(s.msg.ToolCalls) > 0 {
			s.stop = provider.StopToolUse
		}
	}
	return s, nil
}

// pendingCalls returns the calls of a trailing assistant message that have
// no result yet (a turn cut short after its checkpoint).
func pendingCalls(h []provider.Message) []provider.ToolCall {
	i := len(h) - 1
	for i >= 0 && h[i].Role == provider.RoleTool {
		i--
	}
	if i < 0 || h[i].Role != provider.RoleAssistant || len(h[i].ToolCalls) == 0 {
		return nil
	}
	answered := map[string]bool{}
	for _, m := range h[i+1:] {
		answered[m.ToolCallID] = true
	}
	var out []provider.ToolCall
	for _, c := range h[i].ToolCalls {
		if !answered[c.ID] {
			out = append(out, c)
		}
	}
	return out
}

// guardKey identifies a call by tool and canonical arguments (key order and
// whitespace do not matter).
func guardKey(c provider.ToolCall) string {
	args := c.Arguments
	var v any
	if json.Unmarshal([]byte(args), &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			args = string(b)
		}
	}
	return c.Name + "\x00" + args
}
