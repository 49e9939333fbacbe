package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/provider"
	pt "github.com/bobbinbot/bobbin/provider/providertest"
	"github.com/google/go-cmp/cmp"
)

var allowAll = Hints{Allowed: true}

func TestSingleStepText(t *testing.T) {
	h := []provider.Message{user("hi")}
	u := provider.Usage{InputTokens: 100, OutputTokens: 5, CacheReadTokens: 80, Known: true}
	e := newEnv(t, Options{}, h, pt.Text("Hello there, friend.").WithUsage(u))
	res, err := e.agent.Run(t.Context(), e.turn(h))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != EndTurn || res.Text != "Hello there, friend." || res.Steps != 1 {
		t.Errorf("got outcome %v text %q steps %d; want end_turn, the answer, 1", res.Outcome, res.Text, res.Steps)
	}
	if res.Usage != u || res.Usage.CacheReadShare() != 0.8 {
		t.Errorf("usage %+v share %v; want %+v and 0.8", res.Usage, res.Usage.CacheReadShare(), u)
	}
	if diff := cmp.Diff(e.store.history, res.Messages); diff != "" {
		t.Errorf("stored transcript differs from result (-stored +result):\n%s", diff)
	}
	want := []EventKind{EventStep, EventText, EventText, EventText, EventDone}
	if diff := cmp.Diff(want, e.obs.kinds()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	done := e.obs.of(EventDone)[0]
	if done.Usage != u || done.Err != nil {
		t.Errorf("done event %+v", done)
	}
	req := e.p.Requests()[0]
	if req.Messages[0].Role != provider.RoleSystem || req.Messages[0].Content != "You are a test assistant." || req.Model != "gpt-4o" {
		t.Errorf("request %+v does not start with the system prompt", req)
	}
}

func TestMultiStepToolFlow(t *testing.T) {
	tool := echoTool("search")
	tool2 := echoTool("fetch")
	h := []provider.Message{user("find it")}
	e := newEnv(t, Options{}, h,
		pt.ToolCalls(pt.Call("c1", "search", `{"q":"a"}`)).WithText("Let me look."),
		pt.ToolCalls(pt.Call("c2", "fetch", `{"q":"b"}`)),
		pt.Text("Found it."),
	)
	turn := e.turn(h, hinted{tool, allowAll}, hinted{tool2, allowAll})
	res, err := e.agent.Run(t.Context(), turn)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != EndTurn || res.Text != "Found it." || res.Steps != 3 {
		t.Fatalf("got %v %q %d", res.Outcome, res.Text, res.Steps)
	}
	roles := []provider.Role{}
	for _, m := range res.Messages {
		roles = append(roles, m.Role)
	}
	wantRoles := []provider.Role{"user", "assistant", "tool", "assistant", "tool", "assistant"}
	if diff := cmp.Diff(wantRoles, roles); diff != "" {
		t.Errorf("roles (-want +got):\n%s", diff)
	}
	if got := res.Messages[2].Content; got != `ok:{"q":"a"}` {
		t.Errorf("search result %q", got)
	}
	if res.Messages[1].Content != "Let me look." {
		t.Errorf("assistant text %q", res.Messages[1].Content)
	}
	checkConsistent(t, res.Messages)
	if diff := cmp.Diff(e.store.history, res.Messages); diff != "" {
		t.Errorf("stored transcript differs (-stored +result):\n%s", diff)
	}
	// One checkpoint per completed step: 3 assistant messages, 2 result sets.
	if len(e.store.cps) != 5 {
		t.Errorf("%d checkpoints, want 5", len(e.store.cps))
	}
	reqs := e.p.Requests()
	if len(reqs) != 3 || len(reqs[2].Messages) != 1+5 {
		t.Fatalf("requests: %d, last has %d messages", len(reqs), len(reqs[len(reqs)-1].Messages))
	}
	// Tools are sorted by name.
	if reqs[0].Tools[0].Name != "fetch" || reqs[0].Tools[1].Name != "search" {
		t.Errorf("tools not sorted: %v", reqs[0].Tools)
	}
	started, finished := e.obs.of(EventToolStarted), e.obs.of(EventToolFinished)
	if len(started) != 2 || len(finished) != 2 || finished[0].Decision != AllowOnce || finished[0].IsError {
		t.Errorf("tool events: started %+v finished %+v", started, finished)
	}
	if len(finished) > 0 && finished[0].Result != `ok:{"q":"a"}` {
		t.Errorf("finished event's result %q, want the tool's result", finished[0].Result)
	}
}

// TestPrefixStable checks the cache-friendly property: every request starts
// with the previous request, byte for byte, across steps and turns.
func TestPrefixStable(t *testing.T) {
	tools := []Tool{hinted{echoTool("zeta"), allowAll}, hinted{echoTool("alpha"), allowAll}, hinted{echoTool("mid"), allowAll}}
	h := []provider.Message{user("go")}
	e := newEnv(t, Options{}, h,
		pt.ToolCalls(pt.Call("c1", "zeta", `{"q":"1"}`), pt.Call("c2", "alpha", `{"q":"2"}`)).WithReasoning("hmm"),
		pt.ToolCalls(pt.Call("c3", "mid", `{}`)),
		pt.Text("done"),
		pt.ToolCalls(pt.Call("c4", "alpha", `{"q":"3"}`)),
		pt.Text("done again"),
	)
	res, err := e.agent.Run(t.Context(), e.turn(h, tools...))
	if err != nil {
		t.Fatal(err)
	}
	// Second turn of the same thread: tools given in another order.
	h2 := append(res.Messages, user("more"))
	turn := e.turn(h2, tools[2], tools[0], tools[1])
	if _, err := e.agent.Run(t.Context(), turn); err != nil {
		t.Fatal(err)
	}
	reqs := e.p.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i := 1; i < len(reqs); i++ {
		n := len(reqs[i-1].Messages)
		prev, cur := pt.PrefixJSON(reqs[i-1], n), pt.PrefixJSON(reqs[i], n)
		if prev != cur {
			t.Errorf("request %d does not extend request %d byte for byte:\nprev %s\ncur  %s", i, i-1, prev, cur)
		}
	}
}

func TestParallelMixedOutcomes(t *testing.T) {
	// Two tools that each wait until both are running: they can only
	// finish if they run at the same time.
	started := make(chan struct{}, 2)
	both := func(ctx context.Context, _ json.RawMessage) (string, error) {
		started <- struct{}{}
		for len(started) < 2 {
			select {
			case <-ctx.Done():
				return "", errors.New("not run in parallel")
			case <-time.After(time.Millisecond):
			}
		}
		return "together", nil
	}
	a := &fakeTool{name: "a", schema: `{"type":"object"}`, fn: both}
	b := &fakeTool{name: "b", schema: `{"type":"object"}`, fn: both}
	failing := &fakeTool{name: "failing", schema: `{"type":"object"}`, fn: func(context.Context, json.RawMessage) (string, error) {
		return "partial output", errors.New("disk full")
	}}
	strict := &fakeTool{name: "strict", schema: `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`}
	h := []provider.Message{user("do it all")}
	e := newEnv(t, Options{ToolTimeout: 10 * time.Second}, h,
		pt.ToolCalls(
			pt.Call("1", "a", `{}`),
			pt.Call("2", "b", `{}`),
			pt.Call("3", "failing", `{}`),
			pt.Call("4", "invented", `{}`),
			pt.Call("5", "strict", `{"n":"seven"}`),
			pt.Call("6", "strict", `{not json`),
			pt.Call("7", "strict", `{"n":7}`),
		),
		pt.Text("summary"),
	)
	ap := always(AllowOnce)
	turn := e.turn(h, hinted{a, allowAll}, hinted{b, allowAll}, hinted{failing, allowAll}, strict)
	turn.Approver = ap
	res, err := e.agent.Run(t.Context(), turn)
	if err != nil {
		t.Fatal(err)
	}
	r := results(res.Messages)
	checks := []struct {
		id, contains string
		isErr        bool
	}{
		{"1", "together", false},
		{"2", "together", false},
		{"3", "disk full", true},
		{"4", `no tool named "invented"`, true},
		{"5", "/n", true},
		{"6", "not valid JSON", true},
		{"7", `ok:{"n":7}`, false},
	}
	for _, c := range checks {
		m := r[c.id]
		if !strings.Contains(m.Content, c.contains) || m.IsError != c.isErr {
			t.Errorf("call %s: result %q (error %v); want it to contain %q with error %v", c.id, m.Content, m.IsError, c.contains, c.isErr)
		}
	}
	if !strings.Contains(r["3"].Content, "partial output") {
		t.Errorf("error result drops the tool's output: %q", r["3"].Content)
	}
	// Only the valid strict call reaches the person.
	if diff := cmp.Diff([]string{"strict"}, ap.names()); diff != "" {
		t.Errorf("approver asked (-want +got):\n%s", diff)
	}
	if strict.calls.Load() != 1 {
		t.Errorf("strict ran %d times, want 1", strict.calls.Load())
	}
	// Results are in call order.
	var order []string
	for _, m := range res.Messages {
		if m.Role == provider.RoleTool {
			order = append(order, m.ToolCallID)
		}
	}
	if diff := cmp.Diff([]string{"1", "2", "3", "4", "5", "6", "7"}, order); diff != "" {
		t.Errorf("result order (-want +got):\n%s", diff)
	}
	checkConsistent(t, res.Messages)
	if res.Outcome != EndTurn {
		t.Errorf("outcome %v", res.Outcome)
	}
}

func TestParallelismBound(t *testing.T) {
	var running, peak int32
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	slow := &fakeTool{name: "slow", schema: `{"type":"object"}`, fn: func(ctx context.Context, _ json.RawMessage) (string, error) {
		<-mu
		running++
		peak = max(peak, running)
		mu <- struct{}{}
		time.Sleep(5 * time.Millisecond)
		<-mu
		running--
		mu <- struct{}{}
		return "", nil
	}}
	var calls []provider.ToolCall
	for i := range 8 {
		calls = append(calls, pt.Call(fmt.Sprint(i), "slow", fmt.Sprintf(`{"i":%d}`, i)))
	}
	h := []provider.Message{user("x")}
	e := newEnv(t, Options{Parallelism: 3}, h, pt.ToolCalls(calls...), pt.Text("ok"))
	if _, err := e.agent.Run(t.Context(), e.turn(h, hinted{slow, allowAll})); err != nil {
		t.Fatal(err)
	}
	if peak > 3 || slow.calls.Load() != 8 {
		t.Errorf("peak concurrency %d (limit 3), %d calls (want 8)", peak, slow.calls.Load())
	}
}

func TestPermissions(t *testing.T) {
	tests := []struct {
		name      string
		hints     *Hints
		grants    []string
		revoked   bool // GrantValid answers false
		approver  *approverFunc
		opts      Options
		wantAsked int
		wantRuns  int32
		wantIn    string // substring of the first result
		wantDec   Decision
		wantGrant bool
	}{
		{name: "deny", approver: always(Deny), wantAsked: 2, wantRuns: 0, wantIn: "declined", wantDec: Deny},
		{name: "allow once asks every time", approver: always(AllowOnce), wantAsked: 2, wantRuns: 2, wantIn: "ok:", wantDec: AllowOnce},
		{name: "allow for session asks once", approver: always(AllowForSession), wantAsked: 1, wantRuns: 2, wantIn: "ok:", wantDec: AllowForSession, wantGrant: true},
		{name: "grant from earlier turn", grants: []string{"tool"}, approver: always(Deny), wantAsked: 0, wantRuns: 2, wantIn: "ok:", wantDec: AllowForSession, wantGrant: true},
		{name: "grant revoked since asks again", grants: []string{"tool"}, revoked: true, approver: always(Deny), wantAsked: 2, wantRuns: 0, wantIn: "declined", wantDec: Deny},
		{name: "approver error", approver: &approverFunc{fn: func(context.Context, ApprovalRequest) (Decision, error) {
			return AllowOnce, errors.New("slack down")
		}}, wantAsked: 2, wantRuns: 0, wantIn: "slack down", wantDec: Deny},
		{name: "approval timeout", opts: Options{ApprovalTimeout: 20 * time.Millisecond}, approver: &approverFunc{fn: func(ctx context.Context, _ ApprovalRequest) (Decision, error) {
			<-ctx.Done()
			return AllowOnce, ctx.Err()
		}}, wantAsked: 2, wantRuns: 0, wantIn: "not approved in time", wantDec: Deny},
		{name: "no approver", wantRuns: 0, wantIn: "nobody can be asked", wantDec: Deny},
		{name: "allowed by config", hints: &Hints{Allowed: true}, approver: always(Deny), wantRuns: 2, wantIn: "ok:", wantDec: AllowOnce},
		{name: "read-only trusted", hints: &Hints{ReadOnly: true, Trusted: true}, approver: always(Deny), wantRuns: 2, wantIn: "ok:", wantDec: AllowOnce},
		{name: "read-only untrusted asks", hints: &Hints{ReadOnly: true}, approver: always(Deny), wantAsked: 2, wantIn: "declined", wantDec: Deny},
		{name: "denied by config beats grant", hints: &Hints{Denied: true}, grants: []string{"tool"}, approver: always(AllowOnce), wantIn: "not allowed", wantDec: Deny, wantGrant: true},
		{name: "disabled", hints: &Hints{Disabled: true, Allowed: true}, approver: always(AllowOnce), wantIn: "disabled", wantDec: Deny},
		// A grant is bound to the definition it was given for (a pinned
		// tool's Hints.Pin): once the definition changed, it asks again.
		{name: "grant of the same definition", hints: &Hints{Pin: "v2"}, grants: []string{"tool@v2"}, approver: always(Deny), wantRuns: 2, wantIn: "ok:", wantDec: AllowForSession, wantGrant: true},
		{name: "grant of an earlier definition asks", hints: &Hints{Pin: "v2"}, grants: []string{"tool@v1"}, approver: always(Deny), wantAsked: 2, wantIn: "declined", wantDec: Deny},
		{name: "unbound grant of a pinned tool asks", hints: &Hints{Pin: "v2"}, grants: []string{"tool"}, approver: always(Deny), wantAsked: 2, wantIn: "declined", wantDec: Deny},
		{name: "allow for session binds the definition", hints: &Hints{Pin: "v2"}, approver: always(AllowForSession), wantAsked: 1, wantRuns: 2, wantIn: "ok:", wantDec: AllowForSession, wantGrant: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ft := echoTool("tool")
			var tool Tool = ft
			if tc.hints != nil {
				tool = hinted{ft, *tc.hints}
			}
			h := []provider.Message{user("x")}
			e := newEnv(t, tc.opts, h,
				pt.ToolCalls(pt.Call("c1", "tool", `{"q":"1"}`)),
				pt.ToolCalls(pt.Call("c2", "tool", `{"q":"2"}`)),
				pt.Text("done"))
			turn := e.turn(h, tool)
			turn.Grants = tc.grants
			wantKey := "tool"
			if tc.hints != nil {
				wantKey = GrantKey("tool", *tc.hints)
			}
			turn.GrantValid = func(_ context.Context, key string) bool {
				if key != wantKey {
					t.Errorf("GrantValid(%q); want %q", key, wantKey)
				}
				return !tc.revoked
			}
			if tc.approver != nil {
				turn.Approver = tc.approver
			}
			res, err := e.agent.Run(t.Context(), turn)
			if err != nil {
				t.Fatal(err)
			}
			asked := 0
			if tc.approver != nil {
				asked = len(tc.approver.names())
			}
			if asked != tc.wantAsked || ft.calls.Load() != tc.wantRuns {
				t.Errorf("asked %d times, ran %d times; want %d and %d", asked, ft.calls.Load(), tc.wantAsked, tc.wantRuns)
			}
			r := results(res.Messages)["c1"]
			if !strings.Contains(r.Content, tc.wantIn) {
				t.Errorf("first result %q; want it to contain %q", r.Content, tc.wantIn)
			}
			if r.IsError == (tc.wantRuns > 0) {
				t.Errorf("first result IsError=%v with %d runs", r.IsError, tc.wantRuns)
			}
			fin := e.obs.of(EventToolFinished)
			if len(fin) != 2 || fin[0].Decision != tc.wantDec {
				t.Errorf("finished events %+v; want 2 with decision %v", fin, tc.wantDec)
			}
			gotGrant := slices.Contains(res.Grants, wantKey)
			if gotGrant != tc.wantGrant {
				t.Errorf("grants %v, want granted=%v", res.Grants, tc.wantGrant)
			}
			last := e.store.cps[len(e.store.cps)-1]
			if diff := cmp.Diff(res.Grants, last.Grants); diff != "" {
				t.Errorf("checkpointed grants differ from result (-result +checkpoint):\n%s", diff)
			}
			if len(e.obs.of(EventApprovalNeeded)) != tc.wantAsked {
				t.Errorf("%d approval-needed events, want %d", len(e.obs.of(EventApprovalNeeded)), tc.wantAsked)
			}
		})
	}
}

func TestToolPanicTimeoutAndCaps(t *testing.T) {
	panicky := &fakeTool{name: "panicky", schema: `{"type":"object"}`, fn: func(context.Context, json.RawMessage) (string, error) {
		panic("boom")
	}}
	sleepy := &fakeTool{name: "sleepy", schema: `{"type":"object"}`, fn: func(ctx context.Context, _ json.RawMessage) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}}
	big := &fakeTool{name: "big", schema: `{"type":"object"}`, fn: func(context.Context, json.RawMessage) (string, error) {
		return "a\u200bb\x1b[31m" + strings.Repeat("x", 4000), nil
	}}
	h := []provider.Message{user("x")}
	e := newEnv(t, Options{ToolTimeout: 30 * time.Millisecond, OutputCap: 1000}, h,
		pt.ToolCalls(pt.Call("p", "panicky", `{}`), pt.Call("s", "sleepy", `{}`), pt.Call("b", "big", `{}`)),
		pt.Text("carried on"))
	res, err := e.agent.Run(t.Context(), e.turn(h, hinted{panicky, allowAll}, hinted{sleepy, allowAll}, hinted{big, allowAll}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != EndTurn || res.Text != "carried on" {
		t.Errorf("a tool failure ended the turn: %v %q", res.Outcome, res.Text)
	}
	r := results(res.Messages)
	if m := r["p"]; !m.IsError || !strings.Contains(m.Content, "panic: boom") {
		t.Errorf("panic result %+v", m)
	}
	if m := r["s"]; !m.IsError || !strings.Contains(m.Content, "timed out after 30ms") {
		t.Errorf("timeout result %+v", m)
	}
	b := r["b"].Content
	if len(b) > 1000+64 || !strings.HasSuffix(b, fmt.Sprintf("…[truncated %d bytes]", 4000+6-1000)) {
		t.Errorf("capped result has %d bytes, ends %q", len(b), b[max(0, len(b)-40):])
	}
	if !strings.HasPrefix(b, "ab[31mxxx") {
		t.Errorf("invisible and control characters not stripped: %q", b[:12])
	}
	var timedOut bool
	for _, ev := range e.obs.of(EventToolFinished) {
		if ev.Call.Name == "sleepy" && ev.Text == "timed out" && ev.IsError {
			timedOut = true
		}
	}
	if !timedOut {
		t.Errorf("no finished event says the tool timed out: %+v", e.obs.of(EventToolFinished))
	}
}

func TestTurnOutputCap(t *testing.T) {
	big := &fakeTool{name: "big", schema: `{"type":"object"}`, fn: func(_ context.Context, in json.RawMessage) (string, error) {
		return strings.Repeat("y", 3000), nil
	}}
	var calls []provider.ToolCall
	for i := range 6 {
		calls = append(calls, pt.Call(fmt.Sprint(i), "big", fmt.Sprintf(`{"i":%d}`, i)))
	}
	h := []provider.Message{user("x")}
	e := newEnv(t, Options{OutputCap: 3200, TurnOutputCap: 10000}, h, pt.ToolCalls(calls...), pt.Text("ok"))
	res, err := e.agent.Run(t.Context(), e.turn(h, hinted{big, allowAll}))
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, m := range res.Messages {
		if m.Role == provider.RoleTool {
			total += len(m.Content)
		}
	}
	if total > 10000+2*256+2*64 {
		t.Errorf("tool output in the turn %d bytes, cap %d", total, 10000)
	}
	if r := results(res.Messages)["0"]; r.Content != strings.Repeat("y", 3000) {
		t.Errorf("first result cut though under both caps: %d bytes", len(r.Content))
	}
	if r := results(res.Messages)["5"]; !strings.Contains(r.Content, "…[truncated") {
		t.Errorf("last result not truncated: %d bytes", len(r.Content))
	}
}

func TestLoopGuard(t *testing.T) {
	tool := echoTool("poll")
	h := []provider.Message{user("x")}
	e := newEnv(t, Options{}, h,
		pt.ToolCalls(pt.Call("1", "poll", `{"q":"same"}`)),
		pt.ToolCalls(pt.Call("2", "poll", `{ "q" : "same" }`)),
		pt.ToolCalls(pt.Call("3", "poll", `{"q":"same"}`)),
		pt.Text("never reached"))
	res, err := e.agent.Run(t.Context(), e.turn(h, hinted{tool, allowAll}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != LoopGuard || tool.calls.Load() != 2 || e.p.Remaining() != 1 {
		t.Errorf("outcome %v, tool ran %d times, %d steps left; want loop_guard, 2, 1", res.Outcome, tool.calls.Load(), e.p.Remaining())
	}
	if !strings.Contains(res.Notice, "poll") || len(e.obs.of(EventNotice)) != 1 {
		t.Errorf("notice %q, events %v", res.Notice, e.obs.of(EventNotice))
	}
	if r := results(res.Messages)["3"]; !r.IsError {
		t.Errorf("third call has no error result: %+v", r)
	}
	checkConsistent(t, res.Messages)
}

func TestStepLimit(t *testing.T) {
	tool := echoTool("t")
	var steps []pt.Step
	for i := range 5 {
		steps = append(steps, pt.ToolCalls(pt.Call(fmt.Sprint(i), "t", fmt.Sprintf(`{"q":"%d"}`, i))))
	}
	h := []provider.Message{user("x")}
	e := newEnv(t, Options{StepLimit: 3}, h, steps...)
	res, err := e.agent.Run(t.Context(), e.turn(h, hinted{tool, allowAll}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != StepLimit || res.Steps != 3 || e.p.Calls() != 3 || res.Notice == "" {
		t.Errorf("outcome %v steps %d calls %d notice %q", res.Outcome, res.Steps, e.p.Calls(), res.Notice)
	}
	checkConsistent(t, res.Messages)
}

func TestMaxTokensRunsNoTools(t *testing.T) {
	tool := echoTool("t")
	h := []provider.Message{user("x")}
	e := newEnv(t, Options{}, h,
		pt.ToolCalls(pt.Call("1", "t", `{"q":"cut`)).WithText("Partial answer").WithStop(provider.StopMaxTokens))
	res, err := e.agent.Run(t.Context(), e.turn(h, hinted{tool, allowAll}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != MaxTokens || tool.calls.Load() != 0 || res.Text != "Partial answer" || res.Notice == "" {
		t.Errorf("outcome %v, ran %d, text %q, notice %q", res.Outcome, tool.calls.Load(), res.Text, res.Notice)
	}
	checkConsistent(t, res.Messages)
}

func TestStoppedOther(t *testing.T) {
	h := []provider.Message{user("x")}
	e := newEnv(t, Options{}, h, pt.Text("I can't").WithStop(provider.StopOther))
	res, err := e.agent.Run(t.Context(), e.turn(h))
	if err != nil || res.Outcome != Stopped || res.Notice == "" {
		t.Errorf("got %v %v %q", err, res.Outcome, res.Notice)
	}
}

func TestProviderError(t *testing.T) {
	boom := &provider.APIError{Provider: "fake", Status: 500, Message: "upstream broke"}
	h := []provider.Message{user("x")}
	e := newEnv(t, Options{}, h, pt.Text("Some words then").WithoutDone().WithErr(boom))
	res, err := e.agent.Run(t.Context(), e.turn(h))
	var ae *provider.APIError
	if !errors.As(err, &ae) || res.Outcome != Failed {
		t.Fatalf("err %v outcome %v; want the API error and failed", err, res.Outcome)
	}
	last := e.store.history[len(e.store.history)-1]
	if !last.Interrupted || last.Content != "Some words then" {
		t.Errorf("partial answer not kept as interrupted: %+v", last)
	}
	if d := e.obs.of(EventDone); len(d) != 1 || d[0].Err == nil {
		t.Errorf("done event %+v", d)
	}

	// A stream that just stops is a truncation error.
	e = newEnv(t, Options{}, h, pt.Text("abc").WithoutDone())
	if _, err := e.agent.Run(t.Context(), e.turn(h)); !errors.Is(err, provider.ErrTruncated) {
		t.Errorf("err %v, want ErrTruncated", err)
	}
}

func TestCheckpointError(t *testing.T) {
	stale := errors.New("stale fencing token")
	tool := echoTool("t")
	h := []provider.Message{user("x")}
	e := newEnv(t, Options{}, h, pt.ToolCalls(pt.Call("1", "t", `{}`)), pt.Text("no"))
	e.store.fail = stale
	res, err := e.agent.Run(t.Context(), e.turn(h, hinted{tool, allowAll}))
	if !errors.Is(err, stale) || res.Outcome != Failed || tool.calls.Load() != 0 || e.p.Calls() != 1 {
		t.Errorf("err %v outcome %v ran %d calls %d; want the checkpoint error and nothing more", err, res.Outcome, tool.calls.Load(), e.p.Calls())
	}
}

func TestReasoningIsStatusOnly(t *testing.T) {
	h := []provider.Message{user("x")}
	step := pt.Text("answer").WithReasoning("secret chain of thought")
	step.Events = append([]provider.Event{{Type: provider.EventReasoningDelta, Text: "more"}}, step.Events...)
	e := newEnv(t, Options{}, h, step)
	res, err := e.agent.Run(t.Context(), e.turn(h))
	if err != nil {
		t.Fatal(err)
	}
	evs := e.obs.of(EventReasoning)
	if len(evs) != 1 || evs[0].Text != "thinking" {
		t.Errorf("reasoning events %+v; want one status", evs)
	}
	last := res.Messages[len(res.Messages)-1]
	if len(last.Reasoning) != 1 || last.Reasoning[0].Signature != "sig" {
		t.Errorf("reasoning blocks not kept for pass-back: %+v", last.Reasoning)
	}
}

func TestNilCallbacks(t *testing.T) {
	tool := echoTool("t")
	p := pt.New(pt.ToolCalls(pt.Call("1", "t", `{}`)), pt.Text("fine"))
	a := New(p, Options{Counter: newCounter("", nil)})
	res, err := a.Run(t.Context(), Turn{History: []provider.Message{user("x")}, Tools: []Tool{tool}})
	if err != nil || res.Text != "fine" || tool.calls.Load() != 0 {
		t.Errorf("err %v text %q ran %d; want a denied call (no approver) and the answer", err, res.Text, tool.calls.Load())
	}
	if req := p.Requests()[0]; req.Messages[0].Role != provider.RoleUser {
		t.Errorf("empty system prompt was sent: %+v", req.Messages[0])
	}
}
