package agent

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
	pt "github.com/bobbinbot/bobbin/provider/providertest"
	"github.com/google/go-cmp/cmp"
)

// filler returns n alternating user/assistant messages of size bytes each.
func filler(n, size int) []provider.Message {
	var h []provider.Message
	for i := range n {
		role := provider.RoleUser
		if i%2 == 1 {
			role = provider.RoleAssistant
		}
		text := fmt.Sprintf("message %d: ", i)
		h = append(h, provider.Message{Role: role, Content: text + strings.Repeat("w ", (size-len(text))/2)})
	}
	return h
}

func TestSplitPoint(t *testing.T) {
	a := provider.Message{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "1"}, {ID: "2"}}}
	tr := provider.Message{Role: provider.RoleTool}
	u := user("u")
	tests := []struct {
		name string
		h    []provider.Message
		keep int
		want int
	}{
		{"short history", []provider.Message{u, u}, 6, 0},
		{"plain", []provider.Message{u, u, u, u}, 2, 2},
		{"split lands on a result", []provider.Message{u, u, a, tr, tr, u}, 2, 2},
		{"split lands on the first result", []provider.Message{u, u, a, tr, tr, u}, 3, 2},
		{"split on the call itself", []provider.Message{u, u, a, tr, tr, u}, 4, 2},
		{"everything is one step", []provider.Message{a, tr, tr}, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := splitPoint(tc.h, tc.keep); got != tc.want {
				t.Errorf("splitPoint(keep %d) = %d, want %d", tc.keep, got, tc.want)
			}
		})
	}
}

func summaryStep(text string, seen *provider.Request) pt.Step {
	return pt.Step{Func: func(req provider.Request) ([]provider.Event, error) {
		*seen = req
		s := pt.Text(text).WithUsage(provider.Usage{InputTokens: 500, OutputTokens: 50, Known: true})
		return s.Events, nil
	}}
}

func TestCompactionAtThreshold(t *testing.T) {
	// 17 messages; the cut at 6 from the end falls on a tool result and
	// must move back to the assistant message that made the calls.
	h := filler(10, 200)
	h = append(h,
		provider.Message{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{pt.Call("a", "t", `{}`), pt.Call("b", "t", `{}`)}},
		provider.ToolResult{CallID: "a", Name: "t", Content: "A"}.Message(),
		provider.ToolResult{CallID: "b", Name: "t", Content: "B"}.Message(),
		provider.Message{Role: provider.RoleAssistant, Content: "done with tools"},
		user("and now?"), provider.Message{Role: provider.RoleAssistant, Content: "what?"}, user("summarize please"))
	tests := []struct {
		name    string
		window  int
		compact bool
	}{
		{"below threshold", 100000, false},
		{"above threshold", 800, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sreq provider.Request
			steps := []pt.Step{pt.Text("answer")}
			if tc.compact {
				steps = append([]pt.Step{summaryStep("They talked about w.", &sreq)}, steps...)
			}
			e := newEnv(t, Options{ContextWindow: tc.window}, h, steps...)
			res, err := e.agent.Run(t.Context(), e.turn(h, echoTool("t")))
			if err != nil {
				t.Fatal(err)
			}
			if res.Compacted != tc.compact || len(e.obs.of(EventCompacted)) != btoi(tc.compact) {
				t.Fatalf("compacted %v, events %v; want %v", res.Compacted, e.obs.of(EventCompacted), tc.compact)
			}
			reqs := e.p.Requests()
			if !tc.compact {
				if len(reqs) != 1 || len(reqs[0].Messages) != 1+len(h) {
					t.Errorf("uncompacted request has %d messages", len(reqs[0].Messages))
				}
				return
			}
			// The summary request: no tools, the summarizer prompt, the older
			// messages as text.
			if len(sreq.Tools) != 0 || sreq.Messages[0].Content != summaryPrompt || !strings.Contains(sreq.Messages[1].Content, "message 9:") {
				t.Errorf("summary request %+v", sreq)
			}
			if strings.Contains(sreq.Messages[1].Content, "summarize please") {
				t.Errorf("kept messages were sent for summary too")
			}
			main := reqs[1].Messages
			sum := main[1]
			if sum.Role != provider.RoleSystem || !sum.Summary || !strings.Contains(sum.Content, "They talked about w.") {
				t.Errorf("summary message %+v", sum)
			}
			kept := main[2:]
			if diff := cmp.Diff(h[10:], kept); diff != "" {
				t.Errorf("kept messages (-want +got):\n%s", diff)
			}
			checkConsistent(t, main)
			cp := e.store.cps[0]
			if !cp.Replace || len(cp.Append) != 1+len(kept) || !cp.Anchor.IsZero() {
				t.Errorf("compaction checkpoint: replace %v, %d messages, anchor %+v", cp.Replace, len(cp.Append), cp.Anchor)
			}
			if diff := cmp.Diff(e.store.history, res.Messages); diff != "" {
				t.Errorf("stored transcript differs (-stored +result):\n%s", diff)
			}
			if res.Usage.InputTokens != 500 {
				t.Errorf("summary usage not counted: %+v", res.Usage)
			}
			if res.Steps != 1 {
				t.Errorf("steps %d; summaries do not count", res.Steps)
			}
		})
	}
}

func TestRenderTranscript(t *testing.T) {
	h := append([]provider.Message{{Role: provider.RoleSystem, Content: summaryHeader + "EARLIER", Summary: true}}, filler(10, 100)...)
	h = append(h,
		provider.Message{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{pt.Call("1", "lookup", `{"id":7}`)}},
		provider.ToolResult{CallID: "1", Name: "lookup", Content: strings.Repeat("r", 5000), IsError: true}.Message())
	full := renderTranscript(h, 1<<20)
	for _, want := range []string{"[summary of what came before]\nEARLIER", "message 0:", `(called tool lookup with {"id":7})`, "[tool lookup error]", "more bytes]"} {
		if !strings.Contains(full, want) {
			t.Errorf("transcript lacks %q", want)
		}
	}
	cut := renderTranscript(h, 3000)
	if !strings.Contains(cut, "EARLIER") || strings.Contains(cut, "message 0:") || !strings.Contains(cut, "older messages omitted") || !strings.Contains(cut, "[tool lookup error]") {
		t.Errorf("cut transcript should keep the summary and the newest messages:\n%s", cut)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestCompactionNeverTwiceOnSummaryOnly(t *testing.T) {
	// A summary plus the recent messages is all there is: nothing to do
	// even when still over the threshold.
	h := append([]provider.Message{{Role: provider.RoleSystem, Content: summaryHeader + "old", Summary: true}}, filler(6, 400)...)
	e := newEnv(t, Options{ContextWindow: 200}, h, pt.Text("ok"))
	res, err := e.agent.Run(t.Context(), e.turn(h))
	if err != nil || res.Compacted || e.p.Calls() != 1 {
		t.Errorf("err %v compacted %v calls %d", err, res.Compacted, e.p.Calls())
	}
}

func TestCompactionFailureContinues(t *testing.T) {
	h := filler(12, 200)
	e := newEnv(t, Options{ContextWindow: 800}, h, pt.Fail(errors.New("summarizer down")), pt.Text("answer"))
	res, err := e.agent.Run(t.Context(), e.turn(h))
	if err != nil || res.Compacted || res.Text != "answer" {
		t.Errorf("err %v compacted %v text %q; want the turn to go on uncompacted", err, res.Compacted, res.Text)
	}
}

func TestContextLengthRetry(t *testing.T) {
	cl := &provider.APIError{Provider: "fake", Status: 400, Message: "prompt is too long", ContextLength: true}
	var sreq provider.Request
	tests := []struct {
		name    string
		history []provider.Message
		steps   []pt.Step
		wantErr bool
		calls   int
	}{
		{"compact and retry", filler(12, 100), []pt.Step{pt.Fail(cl), summaryStep("sum", &sreq), pt.Text("fits now")}, false, 3},
		{"retry only once", filler(12, 100), []pt.Step{pt.Fail(cl), summaryStep("sum", &sreq), pt.Fail(cl), pt.Text("unused")}, true, 3},
		{"nothing to compact", filler(3, 100), []pt.Step{pt.Fail(cl), pt.Text("unused")}, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{}, tc.history, tc.steps...)
			res, err := e.agent.Run(t.Context(), e.turn(tc.history))
			if (err != nil) != tc.wantErr || e.p.Calls() != tc.calls {
				t.Fatalf("err %v, %d calls; want error %v and %d calls", err, e.p.Calls(), tc.wantErr, tc.calls)
			}
			if tc.wantErr {
				if !errors.Is(err, provider.ErrContextLength) || res.Outcome != Failed {
					t.Errorf("err %v outcome %v", err, res.Outcome)
				}
				return
			}
			if res.Text != "fits now" || !res.Compacted || !e.p.Requests()[2].Messages[1].Summary {
				t.Errorf("text %q compacted %v", res.Text, res.Compacted)
			}
		})
	}
}
