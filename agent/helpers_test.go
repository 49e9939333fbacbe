package agent

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/providertest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeTool is a Tool whose behaviour is a function.
type fakeTool struct {
	name   string
	schema string
	fn     func(ctx context.Context, input json.RawMessage) (string, error)
	calls  atomic.Int32
}

func (f *fakeTool) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: f.name, Description: "test tool " + f.name, InputSchema: json.RawMessage(f.schema)}
}

func (f *fakeTool) Call(ctx context.Context, input json.RawMessage) (string, error) {
	f.calls.Add(1)
	if f.fn == nil {
		return "ok:" + string(input), nil
	}
	return f.fn(ctx, input)
}

// hinted wraps a fakeTool with hints.
type hinted struct {
	*fakeTool
	h Hints
}

func (h hinted) Hints() Hints { return h.h }

func echoTool(name string) *fakeTool {
	return &fakeTool{name: name, schema: `{"type":"object","properties":{"q":{"type":"string"}}}`}
}

// recorder is an Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Observe(ev Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) kinds() []EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []EventKind
	for _, ev := range r.events {
		out = append(out, ev.Kind)
	}
	return out
}

func (r *recorder) of(k EventKind) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, ev := range r.events {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

// store applies checkpoints as the session store would.
type store struct {
	mu      sync.Mutex
	history []provider.Message
	cps     []Checkpoint
	fail    error // returned from the first checkpoint once set
}

func newStore(h []provider.Message) *store { return &store{history: slices.Clone(h)} }

func (s *store) checkpoint(ctx context.Context, cp Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if s.fail != nil {
		return s.fail
	}
	s.cps = append(s.cps, cp)
	if cp.Replace {
		s.history = slices.Clone(cp.Append)
	} else {
		s.history = append(s.history, cp.Append...)
	}
	return nil
}

// snapshot is the stored transcript now (safe while a turn runs).
func (s *store) snapshot() []provider.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.history)
}

// approverFunc adapts a function to Approver and counts calls.
type approverFunc struct {
	fn    func(ctx context.Context, req ApprovalRequest) (Decision, error)
	mu    sync.Mutex
	asked []string
}

func (a *approverFunc) Approve(ctx context.Context, req ApprovalRequest) (Decision, error) {
	a.mu.Lock()
	a.asked = append(a.asked, req.Call.Name)
	a.mu.Unlock()
	return a.fn(ctx, req)
}

func (a *approverFunc) names() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.asked)
}

func always(d Decision) *approverFunc {
	return &approverFunc{fn: func(context.Context, ApprovalRequest) (Decision, error) { return d, nil }}
}

func user(text string) provider.Message {
	return provider.Message{Role: provider.RoleUser, Content: text}
}

// testCounter is shared by tests: building the tokenizer is expensive.
func testCounter(t testing.TB) *Counter {
	t.Helper()
	c, err := NewCounter("gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// turnEnv bundles a turn's fakes.
type turnEnv struct {
	p     *providertest.Provider
	obs   *recorder
	store *store
	agent *Agent
}

func newEnv(t testing.TB, opts Options, history []provider.Message, steps ...providertest.Step) *turnEnv {
	t.Helper()
	if opts.Counter == nil {
		// The byte estimate keeps loop tests fast under -race; the
		// tokenizer has its own tests.
		opts.Counter = newCounter("", nil)
	}
	if opts.Model == "" {
		opts.Model = "gpt-4o"
	}
	p := providertest.New(steps...)
	return &turnEnv{p: p, obs: &recorder{}, store: newStore(history), agent: New(p, opts)}
}

func (e *turnEnv) turn(history []provider.Message, tools ...Tool) Turn {
	return Turn{
		System:     "You are a test assistant.",
		History:    history,
		Tools:      tools,
		Observer:   e.obs,
		Checkpoint: e.store.checkpoint,
	}
}

// results returns the tool messages of h by call id.
func results(h []provider.Message) map[string]provider.Message {
	out := map[string]provider.Message{}
	for _, m := range h {
		if m.Role == provider.RoleTool {
			out[m.ToolCallID] = m
		}
	}
	return out
}

// checkConsistent fails if some tool call in h has no result or a result
// has no call.
func checkConsistent(t *testing.T, h []provider.Message) {
	t.Helper()
	calls := map[string]bool{}
	for i, m := range h {
		for _, c := range m.ToolCalls {
			calls[c.ID] = true
			found := false
			for _, n := range h[i+1:] {
				if n.Role != provider.RoleTool {
					break
				}
				if n.ToolCallID == c.ID {
					found = true
				}
			}
			if !found {
				t.Errorf("tool call %s (%s) has no result right after its message", c.ID, c.Name)
			}
		}
		if m.Role == provider.RoleTool && !calls[m.ToolCallID] {
			t.Errorf("tool result %s answers no call", m.ToolCallID)
		}
	}
}
