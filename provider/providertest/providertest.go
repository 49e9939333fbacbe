// Package providertest is a scripted fake provider.Provider for other
// packages' tests: each Stream call plays the next scripted Step and records
// a deep copy of the Request it got.
//
// It is imported only from tests. It may import provider and must not import
// any other package of this module, slack-go, go-redis or the MCP SDK.
package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"

	"github.com/bobbinbot/bobbin/provider"
)

// ErrNoStep is yielded when Stream is called after the script ran out.
var ErrNoStep = errors.New("providertest: no scripted step left")

// Step is one scripted response.
type Step struct {
	// Events are yielded in order.
	Events []provider.Event
	// Func, when set, computes the events (and an optional error) from the
	// request instead of Events.
	Func func(req provider.Request) ([]provider.Event, error)
	// Err, when set, is yielded after the events.
	Err error
	// Gate, when set, blocks the stream after GateAfter events until the
	// gate is released or ctx ends (then ctx's error is yielded).
	Gate      *Gate
	GateAfter int
}

// Gate blocks a stream mid-way, for cancellation tests.
type Gate struct {
	reached     chan struct{}
	release     chan struct{}
	reachOnce   sync.Once
	releaseOnce sync.Once
}

// NewGate returns a gate that holds streams until Release.
func NewGate() *Gate {
	return &Gate{reached: make(chan struct{}), release: make(chan struct{})}
}

// Reached is closed once a stream is waiting at the gate.
func (g *Gate) Reached() <-chan struct{} { return g.reached }

// Release lets waiting streams continue.
func (g *Gate) Release() { g.releaseOnce.Do(func() { close(g.release) }) }

// Provider is a scripted fake provider.Provider. It is safe for concurrent
// use; steps are consumed in call order.
type Provider struct {
	mu    sync.Mutex
	steps []Step
	next  int
	reqs  []provider.Request
}

// New returns a Provider that plays steps in order.
func New(steps ...Step) *Provider {
	return &Provider{steps: steps}
}

// Push appends steps to the script.
func (p *Provider) Push(steps ...Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.steps = append(p.steps, steps...)
}

// Requests returns deep copies of the requests received so far, in order.
func (p *Provider) Requests() []provider.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]provider.Request, len(p.reqs))
	for i, r := range p.reqs {
		out[i] = CloneRequest(r)
	}
	return out
}

// Calls returns how many times Stream was called.
func (p *Provider) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reqs)
}

// Remaining returns how many scripted steps were not played.
func (p *Provider) Remaining() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.steps) - p.next
}

// Stream plays the next step.
func (p *Provider) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Event, error] {
	return func(yield func(provider.Event, error) bool) {
		p.mu.Lock()
		p.reqs = append(p.reqs, CloneRequest(req))
		if p.next >= len(p.steps) {
			p.mu.Unlock()
			yield(provider.Event{}, ErrNoStep)
			return
		}
		st := p.steps[p.next]
		p.next++
		p.mu.Unlock()

		if err := ctx.Err(); err != nil {
			yield(provider.Event{}, err)
			return
		}
		events, err := st.Events, st.Err
		if st.Func != nil {
			var ferr error
			events, ferr = st.Func(CloneRequest(req))
			if ferr != nil {
				err = ferr
			}
		}
		for i, ev := range events {
			if st.Gate != nil && i == st.GateAfter {
				if !wait(ctx, st.Gate) {
					yield(provider.Event{}, ctx.Err())
					return
				}
			}
			if !yield(cloneEvent(ev), nil) {
				return
			}
		}
		if st.Gate != nil && st.GateAfter >= len(events) {
			if !wait(ctx, st.Gate) {
				yield(provider.Event{}, ctx.Err())
				return
			}
		}
		if err != nil {
			yield(provider.Event{}, err)
		}
	}
}

func wait(ctx context.Context, g *Gate) bool {
	g.reachOnce.Do(func() { close(g.reached) })
	select {
	case <-g.release:
		return true
	case <-ctx.Done():
		return false
	}
}

// Text is a step answering text in a few deltas, ending the turn.
func Text(text string) Step {
	msg := provider.Message{Role: provider.RoleAssistant, Content: text}
	var evs []provider.Event
	for _, d := range chunks(text, 8) {
		evs = append(evs, provider.Event{Type: provider.EventTextDelta, Text: d})
	}
	evs = append(evs, Done(msg, provider.StopEndTurn, provider.Usage{}))
	return Step{Events: evs}
}

// ToolCalls is a step calling tools (after optional text set with
// WithText), stopping for tool use.
func ToolCalls(calls ...provider.ToolCall) Step {
	msg := provider.Message{Role: provider.RoleAssistant, ToolCalls: slices.Clone(calls)}
	var evs []provider.Event
	for _, c := range calls {
		evs = append(evs, provider.Event{Type: provider.EventToolCall, ToolCall: c})
	}
	evs = append(evs, Done(msg, provider.StopToolUse, provider.Usage{}))
	return Step{Events: evs}
}

// Fail is a step that fails before any event.
func Fail(err error) Step { return Step{Err: err} }

// Call builds a tool call; args is JSON text.
func Call(id, name, args string) provider.ToolCall {
	return provider.ToolCall{ID: id, Name: name, Arguments: args}
}

// Done builds the final event of a stream.
func Done(msg provider.Message, stop provider.StopReason, u provider.Usage) provider.Event {
	m := cloneMessage(msg)
	return provider.Event{Type: provider.EventDone, Message: &m, StopReason: stop, RawStopReason: string(stop), Usage: u}
}

// WithText prefixes s's answer with text deltas (and the Done message's
// content).
func (s Step) WithText(text string) Step {
	var evs []provider.Event
	for _, d := range chunks(text, 8) {
		evs = append(evs, provider.Event{Type: provider.EventTextDelta, Text: d})
	}
	s.Events = append(evs, s.Events...)
	s.Events = mapDone(s.Events, func(ev *provider.Event) { ev.Message.Content = text + ev.Message.Content })
	return s
}

// WithReasoning prefixes s with a reasoning delta and records it on the Done
// message.
func (s Step) WithReasoning(text string) Step {
	s.Events = append([]provider.Event{{Type: provider.EventReasoningDelta, Text: text}}, s.Events...)
	s.Events = mapDone(s.Events, func(ev *provider.Event) {
		ev.Message.Reasoning = append([]provider.Reasoning{{Text: text, Signature: "sig"}}, ev.Message.Reasoning...)
	})
	return s
}

// WithUsage sets the usage reported by s's Done event.
func (s Step) WithUsage(u provider.Usage) Step {
	s.Events = mapDone(s.Events, func(ev *provider.Event) { ev.Usage = u })
	return s
}

// WithStop sets the stop reason of s's Done event.
func (s Step) WithStop(stop provider.StopReason) Step {
	s.Events = mapDone(s.Events, func(ev *provider.Event) { ev.StopReason = stop; ev.RawStopReason = string(stop) })
	return s
}

// WithoutDone drops s's Done event (the stream then ends early, as a
// truncated stream would without its error).
func (s Step) WithoutDone() Step {
	s.Events = slices.DeleteFunc(slices.Clone(s.Events), func(ev provider.Event) bool { return ev.Type == provider.EventDone })
	return s
}

// WithGate blocks s after n events until g is released or ctx ends.
func (s Step) WithGate(g *Gate, n int) Step {
	s.Gate, s.GateAfter = g, n
	return s
}

// WithErr makes s yield err after its events (use WithoutDone for an error
// mid-stream).
func (s Step) WithErr(err error) Step {
	s.Err = err
	return s
}

func mapDone(evs []provider.Event, f func(*provider.Event)) []provider.Event {
	out := slices.Clone(evs)
	for i := range out {
		if out[i].Type == provider.EventDone {
			m := provider.Message{Role: provider.RoleAssistant}
			if out[i].Message != nil {
				m = cloneMessage(*out[i].Message)
			}
			out[i].Message = &m
			f(&out[i])
		}
	}
	return out
}

func chunks(s string, n int) []string {
	var out []string
	r := []rune(s)
	for len(r) > n {
		out = append(out, string(r[:n]))
		r = r[n:]
	}
	if len(r) > 0 {
		out = append(out, string(r))
	}
	return out
}

// CloneRequest returns a deep copy of r.
func CloneRequest(r provider.Request) provider.Request {
	out := r
	out.Messages = nil
	for _, m := range r.Messages {
		out.Messages = append(out.Messages, cloneMessage(m))
	}
	out.Tools = nil
	for _, t := range r.Tools {
		t.InputSchema = slices.Clone(t.InputSchema)
		out.Tools = append(out.Tools, t)
	}
	if r.Temperature != nil {
		v := *r.Temperature
		out.Temperature = &v
	}
	return out
}

func cloneMessage(m provider.Message) provider.Message {
	m.Reasoning = slices.Clone(m.Reasoning)
	m.ToolCalls = slices.Clone(m.ToolCalls)
	m.Parts = slices.Clone(m.Parts)
	m.Meta = maps.Clone(m.Meta)
	return m
}

func cloneEvent(ev provider.Event) provider.Event {
	if ev.Message != nil {
		m := cloneMessage(*ev.Message)
		ev.Message = &m
	}
	return ev
}

// PrefixJSON returns the JSON of the first n messages and all tools of r, for
// asserting that a request prefix stays byte-stable across steps.
func PrefixJSON(r provider.Request, n int) string {
	if n > len(r.Messages) {
		n = len(r.Messages)
	}
	b, err := json.Marshal(struct {
		Model    string
		Tools    []provider.ToolSpec
		Messages []provider.Message
	}{r.Model, r.Tools, r.Messages[:n]})
	if err != nil {
		return fmt.Sprintf("providertest: %v", err)
	}
	return string(b)
}
