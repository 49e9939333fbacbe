package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/providertest"
)

// fakeBudget allows a number of calls and records what was spent.
type fakeBudget struct {
	mu     sync.Mutex
	allow  int // calls allowed before refusing
	asked  int
	spent  []provider.Usage
	models []string
	err    error // a non-budget error from Allow
}

func (b *fakeBudget) Allow(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked++
	if b.err != nil {
		return b.err
	}
	if b.asked > b.allow {
		return &OverBudgetError{Notice: "The workspace's daily token budget is used up; it resets at 00:00 UTC."}
	}
	return nil
}

func (b *fakeBudget) Spent(ctx context.Context, model string, u provider.Usage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spent = append(b.spent, u)
	b.models = append(b.models, model)
}

func TestBudgetRefusesBeforeTheFirstCall(t *testing.T) {
	p := providertest.New(providertest.Text("never"))
	b := &fakeBudget{allow: 0}
	res, err := New(p, Options{Model: "m"}).Run(context.Background(), Turn{History: []provider.Message{user("hi")}, Budget: b})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != OverBudget || p.Calls() != 0 {
		t.Errorf("outcome %v after %d model calls, want over_budget and none", res.Outcome, p.Calls())
	}
	if res.Notice == "" || res.Notice != "The workspace's daily token budget is used up; it resets at 00:00 UTC." {
		t.Errorf("notice %q", res.Notice)
	}
}

func TestBudgetStopsMidTurnAndKeepsWhatWasSpent(t *testing.T) {
	u := provider.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 40, Known: true}
	p := providertest.New(
		providertest.ToolCalls(providertest.Call("c1", "echo", `{"q":"x"}`)).WithUsage(u),
		providertest.Text("never"))
	tool := echoTool("echo")
	b := &fakeBudget{allow: 1}
	res, err := New(p, Options{Model: "base"}).Run(context.Background(), Turn{
		History: []provider.Message{user("hi")}, Budget: b, Model: "profile-model", MaxTokens: 50,
		Tools: []Tool{hinted{tool, Hints{Allowed: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != OverBudget || p.Calls() != 1 || tool.calls.Load() != 1 {
		t.Errorf("outcome %v, %d model calls, %d tool calls; want over_budget after the step's tool ran", res.Outcome, p.Calls(), tool.calls.Load())
	}
	if len(b.spent) != 1 || b.spent[0] != u || b.models[0] != "profile-model" {
		t.Errorf("spent %+v on %v, want the one call's usage on profile-model", b.spent, b.models)
	}
	if req := p.Requests()[0]; req.Model != "profile-model" || req.MaxTokens != 50 {
		t.Errorf("request model %q max_tokens %d, want the turn's", req.Model, req.MaxTokens)
	}
	// The transcript ends with the tool results: resumable.
	if last := res.Messages[len(res.Messages)-1]; last.Role != provider.RoleTool {
		t.Errorf("last message %+v", last)
	}
}

func TestBudgetOutageGoesAhead(t *testing.T) {
	p := providertest.New(providertest.Text("hello"))
	res, err := New(p, Options{}).Run(context.Background(), Turn{History: []provider.Message{user("hi")}, Budget: &fakeBudget{err: errors.New("redis down")}})
	if err != nil || res.Outcome != EndTurn {
		t.Errorf("outcome %v, %v; a metering outage must not stop the bot", res.Outcome, err)
	}
}

func TestMaxTokensCap(t *testing.T) {
	p := providertest.New(providertest.Text("a"), providertest.Text("b"))
	ag := New(p, Options{MaxTokens: 100})
	_, _ = ag.Run(context.Background(), Turn{History: []provider.Message{user("hi")}, MaxTokens: 500})
	_, _ = ag.Run(context.Background(), Turn{History: []provider.Message{user("hi")}, MaxTokens: 40})
	if got := p.Requests(); got[0].MaxTokens != 100 || got[1].MaxTokens != 40 {
		t.Errorf("max_tokens %d, %d; want the lower of turn and options", got[0].MaxTokens, got[1].MaxTokens)
	}
}

func TestTurnProvider(t *testing.T) {
	base := providertest.New()
	other := providertest.New(providertest.Text("from other"))
	res, err := New(base, Options{}).Run(context.Background(), Turn{History: []provider.Message{user("hi")}, Provider: other})
	if err != nil || res.Text != "from other" || base.Calls() != 0 {
		t.Errorf("text %q, err %v, base calls %d", res.Text, err, base.Calls())
	}
}

func TestSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	u := provider.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 40, Known: true}
	p := providertest.New(
		providertest.ToolCalls(providertest.Call("c1", "echo", `{"q":"secret"}`)).WithUsage(u),
		providertest.Text("done").WithUsage(u))
	tool := echoTool("echo")
	ctx, root := tp.Tracer("test").Start(context.Background(), "invoke_agent")
	_, err := New(p, Options{Model: "m1", Tracer: tp.Tracer("bobbin"), ProviderName: "openai"}).Run(ctx, Turn{
		History: []provider.Message{user("hi")}, Tools: []Tool{hinted{tool, Hints{Server: "docs"}}},
		Approver: always(AllowOnce)})
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	var names []string
	for _, s := range spans {
		byName[s.Name] = s
		names = append(names, s.Name)
	}
	for _, n := range []string{"chat m1", "execute_tool echo", "approval_wait echo", "invoke_agent"} {
		if _, ok := byName[n]; !ok {
			t.Fatalf("no span %q in %v", n, names)
		}
	}
	rootID := byName["invoke_agent"].SpanContext.SpanID()
	for _, n := range []string{"chat m1", "execute_tool echo", "approval_wait echo"} {
		if got := byName[n].Parent.SpanID(); got != rootID {
			t.Errorf("span %q parent %v, want the turn span", n, got)
		}
	}
	attrs := func(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, a := range s.Attributes {
			m[a.Key] = a.Value
		}
		return m
	}
	chat := attrs(byName["chat m1"])
	if chat["gen_ai.request.model"].AsString() != "m1" || chat["gen_ai.usage.input_tokens"].AsInt64() != 100 ||
		chat["gen_ai.usage.output_tokens"].AsInt64() != 10 || chat["gen_ai.provider.name"].AsString() != "openai" ||
		chat["gen_ai.operation.name"].AsString() != "chat" {
		t.Errorf("chat attributes %v", chat)
	}
	tl := attrs(byName["execute_tool echo"])
	if tl["gen_ai.tool.name"].AsString() != "echo" || tl["mcp.server.name"].AsString() != "docs" {
		t.Errorf("tool attributes %v", tl)
	}
	for _, s := range spans {
		for _, a := range s.Attributes {
			if v := a.Value.String(); len(v) > 0 && (strings.Contains(v, "secret") || strings.Contains(v, "hi")) && a.Key != "gen_ai.operation.name" {
				t.Errorf("span %q carries content in %s = %q without capture on", s.Name, a.Key, v)
			}
		}
	}
}
