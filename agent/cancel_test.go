package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
	pt "github.com/bobbinbot/bobbin/provider/providertest"
)

var errStop = errors.New("stop button")

func TestCancelMidStream(t *testing.T) {
	gate := pt.NewGate()
	h := []provider.Message{user("x")}
	e := newEnv(t, Options{}, h, pt.Text("Hello, this is a long answer").WithGate(gate, 2))
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() {
		<-gate.Reached()
		cancel(errStop)
	}()
	res, err := e.agent.Run(ctx, e.turn(h))
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errStop) {
		t.Errorf("err %v; want it to match context.Canceled and the cause", err)
	}
	if res.Outcome != Cancelled {
		t.Errorf("outcome %v", res.Outcome)
	}
	last := e.store.history[len(e.store.history)-1]
	if !last.Interrupted || last.Role != provider.RoleAssistant || last.Content != "Hello, this is a" {
		t.Errorf("last stored message %+v; want the partial answer marked interrupted", last)
	}
	if res.Text != "Hello, this is a" {
		t.Errorf("text %q", res.Text)
	}
	if len(e.store.history) != len(res.Messages) {
		t.Errorf("stored %d messages, result %d", len(e.store.history), len(res.Messages))
	}
}

func TestCancelBeforeAnyText(t *testing.T) {
	gate := pt.NewGate()
	h := []provider.Message{user("x")}
	e := newEnv(t, Options{}, h, pt.Text("never").WithGate(gate, 0))
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-gate.Reached()
		cancel()
	}()
	res, err := e.agent.Run(ctx, e.turn(h))
	if !errors.Is(err, context.Canceled) || res.Outcome != Cancelled {
		t.Fatalf("err %v outcome %v", err, res.Outcome)
	}
	last := e.store.history[len(e.store.history)-1]
	if !last.Interrupted || last.Content != interruptedText {
		t.Errorf("last %+v; want the interrupted marker", last)
	}
}

func TestCancelMidTool(t *testing.T) {
	running := make(chan struct{})
	blocking := &fakeTool{name: "blocking", schema: `{"type":"object"}`, fn: func(ctx context.Context, _ json.RawMessage) (string, error) {
		close(running)
		<-ctx.Done()
		return "", ctx.Err()
	}}
	quick := echoTool("quick")
	h := []provider.Message{user("x")}
	e := newEnv(t, Options{}, h,
		pt.ToolCalls(pt.Call("q", "quick", `{}`), pt.Call("b", "blocking", `{}`)),
		pt.Text("not reached"))
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-running
		cancel()
	}()
	res, err := e.agent.Run(ctx, e.turn(h, hinted{quick, allowAll}, hinted{blocking, allowAll}))
	if !errors.Is(err, context.Canceled) || res.Outcome != Cancelled {
		t.Fatalf("err %v outcome %v", err, res.Outcome)
	}
	checkConsistent(t, e.store.history)
	r := results(e.store.history)
	if m := r["b"]; !m.IsError || !strings.Contains(m.Content, "interrupted") {
		t.Errorf("blocking result %+v; want interrupted", m)
	}
	if m := r["q"]; m.IsError && !strings.Contains(m.Content, "interrupted") {
		t.Errorf("quick result %+v", m)
	}
	if e.p.Calls() != 1 {
		t.Errorf("model called %d times after cancellation", e.p.Calls())
	}
}

// awaitingApproval is a turn whose model asks for two calls of a tool
// that needs approval; the approver blocks until its context ends and
// closes asked when it is asked.
func awaitingApproval(t *testing.T) (asked chan struct{}, ap *approverFunc, tool *fakeTool, h []provider.Message, e *turnEnv) {
	asked = make(chan struct{})
	ap = &approverFunc{fn: func(ctx context.Context, _ ApprovalRequest) (Decision, error) {
		close(asked)
		<-ctx.Done()
		return Deny, ctx.Err()
	}}
	tool = echoTool("t")
	h = []provider.Message{user("x")}
	e = newEnv(t, Options{}, h, pt.ToolCalls(pt.Call("1", "t", `{}`), pt.Call("2", "t", `{"q":"b"}`)))
	return asked, ap, tool, h, e
}

func TestCancelWhileAwaitingApproval(t *testing.T) {
	asked, ap, tool, h, e := awaitingApproval(t)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-asked
		cancel()
	}()
	turn := e.turn(h, tool)
	turn.Approver = ap
	res, err := e.agent.Run(ctx, turn)
	if !errors.Is(err, context.Canceled) || res.Outcome != Cancelled || tool.calls.Load() != 0 {
		t.Fatalf("err %v outcome %v ran %d", err, res.Outcome, tool.calls.Load())
	}
	checkConsistent(t, e.store.history)
	if len(ap.names()) != 1 {
		t.Errorf("asked %d times after cancellation", len(ap.names()))
	}
}

func TestResume(t *testing.T) {
	tool := echoTool("t")
	// A turn cut short after checkpointing the assistant message and one
	// of its two results.
	h := []provider.Message{
		user("x"),
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{pt.Call("1", "t", `{"q":"a"}`), pt.Call("2", "t", `{"q":"b"}`)}},
		provider.ToolResult{CallID: "1", Name: "t", Content: "first"}.Message(),
	}
	e := newEnv(t, Options{}, h, pt.Text("all done"))
	ap := always(AllowOnce)
	turn := e.turn(h, tool)
	turn.Approver = ap
	res, err := e.agent.Run(t.Context(), turn)
	if err != nil {
		t.Fatal(err)
	}
	if tool.calls.Load() != 1 || len(ap.names()) != 1 {
		t.Errorf("ran %d, asked %d; want only the unanswered call, re-asked", tool.calls.Load(), len(ap.names()))
	}
	req := e.p.Requests()[0]
	checkConsistent(t, req.Messages)
	if got := results(req.Messages)["2"].Content; got != `ok:{"q":"b"}` {
		t.Errorf("resumed result %q", got)
	}
	if res.Outcome != EndTurn || res.Steps != 1 || res.Text != "all done" {
		t.Errorf("got %v %d %q", res.Outcome, res.Steps, res.Text)
	}
	if len(e.store.cps) != 2 || len(e.store.cps[0].Append) != 1 {
		t.Errorf("checkpoints %+v; want the resumed result then the answer", e.store.cps)
	}

	// A history ending in a plain message calls the model directly.
	h2 := append(res.Messages, user("again"))
	e2 := newEnv(t, Options{}, h2, pt.Text("ok"))
	if _, err := e2.agent.Run(t.Context(), e2.turn(h2, tool)); err != nil || tool.calls.Load() != 1 {
		t.Errorf("err %v, ran %d", err, tool.calls.Load())
	}
}

// TestHandOverWhileAwaitingApproval: a turn handed over (a replica shutting
// down) while a call waits for approval leaves that call, and the step's
// other undecided calls, without a result; the next holder resumes from
// the transcript, asks again (or finds the person's answer) and runs them.
func TestHandOverWhileAwaitingApproval(t *testing.T) {
	asked, ap, tool, h, e := awaitingApproval(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() {
		<-asked
		cancel(fmt.Errorf("replica stopping: %w", ErrHandOver))
	}()
	turn := e.turn(h, tool)
	turn.Approver = ap
	res, err := e.agent.Run(ctx, turn)
	if !errors.Is(err, ErrHandOver) || res.Outcome != Cancelled || tool.calls.Load() != 0 {
		t.Fatalf("err %v outcome %v ran %d", err, res.Outcome, tool.calls.Load())
	}
	if got := pendingCalls(e.store.history); len(got) != 2 {
		t.Fatalf("calls left for the next holder: %v; want both (history %+v)", got, e.store.history)
	}

	// The next holder: the person allowed the call meanwhile.
	e2 := newEnv(t, Options{}, e.store.history, pt.Text("saved"))
	next := always(AllowOnce)
	turn2 := e2.turn(e.store.history, tool)
	turn2.Approver = next
	res2, err := e2.agent.Run(t.Context(), turn2)
	if err != nil || res2.Text != "saved" {
		t.Fatalf("resumed: %v %q", err, res2.Text)
	}
	if tool.calls.Load() != 2 || len(next.names()) != 2 {
		t.Errorf("resumed turn ran %d, asked %d; want both calls decided and run", tool.calls.Load(), len(next.names()))
	}
	checkConsistent(t, e2.p.Requests()[0].Messages)
}
