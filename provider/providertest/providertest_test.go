package providertest

import (
	"context"
	"errors"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/google/go-cmp/cmp"
)

func collect(t *testing.T, p *Provider, ctx context.Context, req provider.Request) ([]provider.Event, error) {
	t.Helper()
	var evs []provider.Event
	for ev, err := range p.Stream(ctx, req) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func TestScriptAndRecording(t *testing.T) {
	boom := errors.New("boom")
	p := New(
		Text("hello world!").WithUsage(provider.Usage{InputTokens: 10, Known: true}),
		ToolCalls(Call("1", "a", `{}`)).WithText("calling"),
		Fail(boom),
		Step{Func: func(req provider.Request) ([]provider.Event, error) {
			return Text(req.Messages[0].Content).Events, nil
		}},
	)
	req := provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: "echo"}},
		Tools: []provider.ToolSpec{{Name: "a", InputSchema: []byte(`{"type":"object"}`)}}}

	evs, err := collect(t, p, t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for _, ev := range evs[:len(evs)-1] {
		text += ev.Text
	}
	done := evs[len(evs)-1]
	if text != "hello world!" || done.Type != provider.EventDone || done.Message.Content != "hello world!" || done.Usage.InputTokens != 10 || done.StopReason != provider.StopEndTurn {
		t.Errorf("text step: %q, done %+v", text, done)
	}

	evs, _ = collect(t, p, t.Context(), req)
	last := evs[len(evs)-1]
	if last.StopReason != provider.StopToolUse || last.Message.Content != "calling" || len(last.Message.ToolCalls) != 1 || evs[0].Type != provider.EventTextDelta {
		t.Errorf("tool step: %+v", evs)
	}

	if _, err := collect(t, p, t.Context(), req); !errors.Is(err, boom) {
		t.Errorf("fail step: %v", err)
	}
	evs, _ = collect(t, p, t.Context(), req)
	if evs[len(evs)-1].Message.Content != "echo" {
		t.Errorf("func step: %+v", evs)
	}
	if _, err := collect(t, p, t.Context(), req); !errors.Is(err, ErrNoStep) {
		t.Errorf("exhausted script: %v", err)
	}

	// Requests are deep copies: mutating the caller's request later does
	// not change what was recorded.
	req.Messages[0].Content = "changed"
	req.Tools[0].InputSchema[0] = 'X'
	reqs := p.Requests()
	if len(reqs) != 5 || p.Calls() != 5 || p.Remaining() != 0 {
		t.Fatalf("%d requests", len(reqs))
	}
	want := provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: "echo"}},
		Tools: []provider.ToolSpec{{Name: "a", InputSchema: []byte(`{"type":"object"}`)}}}
	if diff := cmp.Diff(want, reqs[0]); diff != "" {
		t.Errorf("recorded request (-want +got):\n%s", diff)
	}
	if PrefixJSON(reqs[0], 1) != PrefixJSON(reqs[1], 1) {
		t.Errorf("PrefixJSON differs for identical requests")
	}
}

func TestGate(t *testing.T) {
	g := NewGate()
	p := New(Text("abcdefghijklmnopqrstuvwxyz").WithGate(g, 1), Text("x").WithGate(NewGate(), 0))
	done := make(chan []provider.Event)
	go func() {
		evs, _ := collect(t, p, context.Background(), provider.Request{})
		done <- evs
	}()
	<-g.Reached()
	g.Release()
	if evs := <-done; len(evs) != 5 {
		t.Errorf("released stream yielded %d events, want 5", len(evs))
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := collect(t, p, ctx, provider.Request{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled gate: %v", err)
	}
}

func TestWithoutDoneAndErr(t *testing.T) {
	boom := errors.New("mid-stream")
	p := New(Text("partial answer").WithoutDone().WithErr(boom))
	evs, err := collect(t, p, t.Context(), provider.Request{})
	if !errors.Is(err, boom) || len(evs) != 2 || evs[1].Type != provider.EventTextDelta {
		t.Errorf("events %+v err %v", evs, err)
	}
}
