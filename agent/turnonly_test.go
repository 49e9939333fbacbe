package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/bobbinbot/bobbin/provider"
	pt "github.com/bobbinbot/bobbin/provider/providertest"
	"github.com/google/go-cmp/cmp"
)

// secretTool answers "SECRET-<q>" padded to size bytes and marks it
// TurnOnly (as slack_search does); with fail it answers an error.
func secretTool(name string, size int, fail bool) *fakeTool {
	t := echoTool(name)
	t.fn = func(ctx context.Context, input json.RawMessage) (string, error) {
		var a struct{ Q string }
		_ = json.Unmarshal(input, &a)
		if !TurnOnly(ctx, fmt.Sprintf("[not kept: results for %q]", a.Q)) {
			return "", errors.New("not in a turn")
		}
		out := "SECRET-" + a.Q + " " + strings.Repeat("x", max(0, size-len(a.Q)-8))
		if fail {
			return out, errors.New("partly failed")
		}
		return out, nil
	}
	return t
}

// noSecret fails if any message of msgs holds "SECRET-".
func noSecret(t *testing.T, what string, msgs []provider.Message) {
	t.Helper()
	for i, m := range msgs {
		if strings.Contains(m.Content, "SECRET-") {
			t.Errorf("%s: message %d (%s %s) holds a turn-only result: %.80q", what, i, m.Role, m.ToolCallID, m.Content)
		}
	}
}

// TestTurnOnly: a result marked TurnOnly reaches the model in this step's
// and the following steps' requests, but every checkpoint, Result and the
// next turn get the placeholder; other results are kept as usual; the
// persisted anchor no longer counts the result.
func TestTurnOnly(t *testing.T) {
	if TurnOnly(context.Background(), "x") {
		t.Error("TurnOnly outside a tool call reported a mark")
	}
	search, echo := secretTool("search", 2000, false), echoTool("echo")
	h := []provider.Message{user("what did we decide?")}
	used := provider.Usage{InputTokens: 1000, OutputTokens: 10, Known: true}
	e := newEnv(t, Options{}, h,
		pt.ToolCalls(pt.Call("c1", "search", `{"q":"billing"}`), pt.Call("c2", "echo", `{"q":"plain"}`)),
		pt.ToolCalls(pt.Call("c3", "echo", `{"q":"again"}`)).WithUsage(used),
		pt.Text("We chose Postgres."),
	)
	res, err := e.agent.Run(t.Context(), e.turn(h, hinted{search, allowAll}, hinted{echo, allowAll}))
	if err != nil || res.Text != "We chose Postgres." {
		t.Fatalf("run: %v %q", err, res.Text)
	}
	reqs := e.p.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, req := range reqs[1:] {
		got := results(req.Messages)
		if !strings.HasPrefix(got["c1"].Content, "SECRET-billing") || got["c2"].Content != `ok:{"q":"plain"}` {
			t.Errorf("request %d: results %q / %q, want the search's in full and echo's", i+2, got["c1"].Content, got["c2"].Content)
		}
	}
	if prev, cur := pt.PrefixJSON(reqs[1], len(reqs[1].Messages)), pt.PrefixJSON(reqs[2], len(reqs[1].Messages)); prev != cur {
		t.Errorf("the turn's requests do not extend each other byte for byte:\nprev %s\ncur  %s", prev, cur)
	}
	for i, cp := range e.store.cps {
		noSecret(t, fmt.Sprintf("checkpoint %d", i), cp.Append)
	}
	noSecret(t, "Result.Messages", res.Messages)
	if diff := cmp.Diff(e.store.history, res.Messages); diff != "" {
		t.Errorf("stored transcript differs from result (-stored +result):\n%s", diff)
	}
	kept := results(e.store.history)
	if kept["c1"].Content != `[not kept: results for "billing"]` || kept["c1"].ToolName != "search" || kept["c1"].IsError ||
		kept["c2"].Content != `ok:{"q":"plain"}` || kept["c3"].Content != `ok:{"q":"again"}` {
		t.Errorf("kept results %+v", kept)
	}
	checkConsistent(t, e.store.history)
	seen := false
	for _, ev := range e.obs.of(EventToolFinished) {
		seen = seen || ev.Call.ID == "c1" && strings.HasPrefix(ev.Result, "SECRET-billing")
	}
	if !seen {
		t.Error("the observer did not get the search's result for the turn")
	}
	// The model counted 2000 bytes the transcript no longer holds.
	if last := e.store.cps[len(e.store.cps)-1].Anchor; last.InputTokens >= used.InputTokens || last.InputTokens <= 0 || last != res.Anchor {
		t.Errorf("persisted anchor %+v (result %+v): want the input of %d less the result's excess", last, res.Anchor, used.InputTokens)
	}

	// The next turn of the thread sees the placeholder.
	h2 := append(res.Messages, user("and who decided?"))
	e2 := newEnv(t, Options{}, h2, pt.Text("Bob."))
	if _, err := e2.agent.Run(t.Context(), e2.turn(h2, hinted{search, allowAll}, hinted{echo, allowAll})); err != nil {
		t.Fatal(err)
	}
	req := e2.p.Requests()[0]
	noSecret(t, "next turn's request", req.Messages)
	if got := results(req.Messages)["c1"].Content; got != `[not kept: results for "billing"]` {
		t.Errorf("next turn's search result %q, want the placeholder", got)
	}
}

// TestTurnOnlyError: an error result of a marked call is not kept either.
func TestTurnOnlyError(t *testing.T) {
	h := []provider.Message{user("q")}
	e := newEnv(t, Options{}, h, pt.ToolCalls(pt.Call("c1", "search", `{"q":"x"}`)), pt.Text("sorry"))
	if _, err := e.agent.Run(t.Context(), e.turn(h, hinted{secretTool("search", 100, true), allowAll})); err != nil {
		t.Fatal(err)
	}
	if got := results(e.p.Requests()[1].Messages)["c1"]; !got.IsError || !strings.Contains(got.Content, "SECRET-x") {
		t.Errorf("the model got %+v, want the error with the tool's output", got)
	}
	noSecret(t, "stored", e.store.history)
	if got := results(e.store.history)["c1"]; !got.IsError || got.Content != `[not kept: results for "x"]` {
		t.Errorf("kept %+v, want the placeholder marked as an error", got)
	}
}

// TestTurnOnlyHandOver: a turn handed over (a replica stopping) while a
// later call waits for approval has checkpointed the placeholder; the next
// holder resumes with it and never sees the result.
func TestTurnOnlyHandOver(t *testing.T) {
	asked := make(chan struct{})
	ap := &approverFunc{fn: func(ctx context.Context, _ ApprovalRequest) (Decision, error) {
		close(asked)
		<-ctx.Done()
		return Deny, ctx.Err()
	}}
	search, act := secretTool("search", 300, false), echoTool("act")
	h := []provider.Message{user("find and act")}
	e := newEnv(t, Options{}, h,
		pt.ToolCalls(pt.Call("c1", "search", `{"q":"plan"}`)),
		pt.ToolCalls(pt.Call("c2", "act", `{"q":"go"}`)))
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() {
		<-asked
		// Mid-turn, waiting for the person: the store has the placeholder.
		noSecret(t, "stored while awaiting approval", e.store.snapshot())
		cancel(fmt.Errorf("replica stopping: %w", ErrHandOver))
	}()
	turn := e.turn(h, hinted{search, allowAll}, act)
	turn.Approver = ap
	res, err := e.agent.Run(ctx, turn)
	if !errors.Is(err, ErrHandOver) {
		t.Fatalf("err %v outcome %v", err, res.Outcome)
	}
	if got := results(e.p.Requests()[1].Messages)["c1"].Content; !strings.HasPrefix(got, "SECRET-plan") {
		t.Errorf("the step after the search got %q, want the result", got)
	}
	noSecret(t, "stored after the hand-over", e.store.history)
	noSecret(t, "Result", res.Messages)

	e2 := newEnv(t, Options{}, e.store.history, pt.Text("done"))
	turn2 := e2.turn(e.store.history, hinted{search, allowAll}, act)
	turn2.Approver = always(AllowOnce)
	if _, err := e2.agent.Run(t.Context(), turn2); err != nil {
		t.Fatal(err)
	}
	noSecret(t, "resumed request", e2.p.Requests()[0].Messages)
	noSecret(t, "stored after resuming", e2.store.history)
}

// TestTurnOnlyCompaction: compaction mid-turn gives the summarizer the
// placeholders (the summary is kept), keeps sending a result that stays in
// the recent part, and checkpoints the compacted history without it.
func TestTurnOnlyCompaction(t *testing.T) {
	// A small result, then a large one that passes the threshold.
	search, lookup := secretTool("search", 200, false), secretTool("lookup", 4000, false)
	h := append(filler(4, 100), user("search twice"))
	var sreq provider.Request
	e := newEnv(t, Options{ContextWindow: 1200, KeepRecent: 2}, h,
		pt.ToolCalls(pt.Call("c1", "search", `{"q":"first"}`)),
		pt.ToolCalls(pt.Call("c2", "lookup", `{"q":"second"}`)),
		summaryStep("They searched twice.", &sreq),
		pt.Text("done"),
	)
	res, err := e.agent.Run(t.Context(), e.turn(h, hinted{search, allowAll}, hinted{lookup, allowAll}))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Compacted || e.p.Calls() != 4 {
		t.Fatalf("compacted %v after %d calls; want one compaction before the last step (retune the sizes)", res.Compacted, e.p.Calls())
	}
	sum := sreq.Messages[1].Content
	if strings.Contains(sum, "SECRET-") || !strings.Contains(sum, `[not kept: results for "first"]`) {
		t.Errorf("the summarizer got %.300q, want the first search's placeholder only", sum)
	}
	last := e.p.Requests()[3].Messages
	got := results(last)
	if _, ok := got["c1"]; ok {
		t.Errorf("the first search survived compaction: %+v", got["c1"])
	}
	if !strings.HasPrefix(got["c2"].Content, "SECRET-second") {
		t.Errorf("after compaction the model got %.80q, want the recent search in full", got["c2"].Content)
	}
	for i, cp := range e.store.cps {
		noSecret(t, fmt.Sprintf("checkpoint %d (replace %v)", i, cp.Replace), cp.Append)
	}
	if got := results(e.store.history)["c2"].Content; got != `[not kept: results for "second"]` {
		t.Errorf("stored after compaction: %q, want the placeholder", got)
	}
}

// TestTurnOnlySpans: spans that capture content carry the placeholder.
func TestTurnOnlySpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	p := pt.New(pt.ToolCalls(pt.Call("c1", "search", `{"q":"x"}`)), pt.Text("done"))
	_, err := New(p, Options{Model: "m1", Tracer: tp.Tracer("bobbin"), CaptureContent: true, Counter: newCounter("", nil)}).Run(t.Context(), Turn{
		History: []provider.Message{user("hi")}, Tools: []Tool{hinted{secretTool("search", 100, false), allowAll}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(results(p.Requests()[1].Messages)["c1"].Content, "SECRET-x") {
		t.Fatal("the model did not get the result")
	}
	seen := false
	for _, s := range exp.GetSpans() {
		for _, a := range s.Attributes {
			v := a.Value.String()
			if strings.Contains(v, "SECRET-") {
				t.Errorf("span %q carries the result in %s", s.Name, a.Key)
			}
			seen = seen || a.Key == attribute.Key("gen_ai.tool.call.result") && strings.Contains(v, "not kept")
		}
	}
	if !seen {
		t.Error("no span carries the placeholder as the tool's result")
	}
}
