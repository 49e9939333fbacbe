package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
	pt "github.com/bobbinbot/bobbin/provider/providertest"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// TestEncodingTokensNonEmpty checks the premise of Counter.Bound on the
// tables the Counter loads: no token of o200k_base or cl100k_base is the
// empty string, so a piece of n bytes never takes more than n tokens.
func TestEncodingTokensNonEmpty(t *testing.T) {
	for _, enc := range []string{EncodingO200K, EncodingCL100K} {
		ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(path.Join("encodings", enc+".tiktoken"))
		if err != nil {
			t.Fatalf("%s: %v", enc, err)
		}
		if len(ranks) < 100_000 {
			t.Fatalf("%s: %d tokens; not the table the tokenizer uses", enc, len(ranks))
		}
		for tok, rank := range ranks {
			if tok == "" {
				t.Errorf("%s: token %d is empty", enc, rank)
			}
		}
	}
}

// boundSeeds are texts the fuzzer starts from: special tokens (encoded as
// ordinary text), invalid UTF-8, long runs cut into segments, scripts with
// few bytes a token, and whitespace runs.
var boundSeeds = []string{
	"", "a", "hello world", "<|endoftext|>", "<|endofprompt|><|fim_prefix|><|fim_middle|><|fim_suffix|>",
	"\xff", "\xe2\x82", "a\xffb\xc3", "\xef\xbf\xbd", strings.Repeat("\xff", 300),
	strings.Repeat("x", 1000), strings.Repeat("aGVsbG8gd29ybGQ", 40), strings.Repeat("é", 300) + "\xc3",
	"中文的文本，日本語のテキスト", "emoji 👍🏽👨‍👩‍👧", strings.Repeat(" ", 200) + "\n\n\r\n\t", "1234567890123",
	`{"q":"x","n":[1,2,3]}`, "don't won't it's I'M", "\u0301\u0301\u0301a\u0301",
}

// FuzzTokenBound: the bound is never below the exact count, for texts,
// whole messages and tool specs, with both encodings the Counter uses
// and with the byte estimate.
func FuzzTokenBound(f *testing.F) {
	for _, s := range boundSeeds {
		f.Add(s)
	}
	o200k, err := NewCounter("gpt-4o")
	if err != nil {
		f.Fatal(err)
	}
	cl100k, err := NewCounter("gpt-4")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4<<10 {
			t.Skip("long texts are Count's benchmark's business")
		}
		if got, want := tokenBound(s), len(string([]rune(s))); got != want {
			t.Fatalf("tokenBound(%q) = %d, but the tokenizer reads %d bytes", s, got, want)
		}
		m := provider.Message{
			Role: provider.RoleAssistant, Content: s, ToolCallID: s,
			Reasoning: []provider.Reasoning{{Text: s, Signature: s}},
			ToolCalls: []provider.ToolCall{pt.Call(s, s, s)},
			Parts: []provider.Part{provider.TextFilePart(provider.FileRef{Name: s}, []byte(s)),
				provider.NotePart(provider.FileRef{Name: s}, s), {Type: provider.PartImage}},
		}
		specs := []provider.ToolSpec{{Name: s, Description: s, InputSchema: []byte(s)}}
		for _, c := range []*Counter{o200k, cl100k, nil} {
			// Unsegmented encoding is quadratic in a piece's length (Count
			// cuts long runs), so only short texts get it.
			if enc := c.enc(); enc != nil && len(s) <= 2<<10 {
				if n := len(enc.EncodeOrdinary(s)); n > c.Bound(s) {
					t.Fatalf("%s: %q is %d tokens, bound %d", c.Encoding(), s, n, c.Bound(s))
				}
			}
			if n, b := c.Count(s), c.Bound(s); n > b {
				t.Fatalf("%s: Count(%q) = %d, bound %d", c.Encoding(), s, n, b)
			}
			if n, b := c.CountMessage(m), c.boundMessage(m); n > b {
				t.Fatalf("%s: CountMessage = %d, bound %d (text %q)", c.Encoding(), n, b, s)
			}
			if n, b := c.CountTools(specs), boundTools(specs); n > b {
				t.Fatalf("%s: CountTools = %d, bound %d (text %q)", c.Encoding(), n, b, s)
			}
		}
	})
}

// budgetScript feeds a budget what a run would: a history, then replies,
// tool results and usage reports.
func budgetScript(b *budget) {
	for i := range 6 {
		reqLen := b.len()
		b.add(provider.Message{Role: provider.RoleAssistant, Content: fmt.Sprintf("reply %d %s", i, strings.Repeat("thing ", 10*i)),
			ToolCalls: []provider.ToolCall{pt.Call(fmt.Sprint(i), "t", `{"q":"x"}`)}})
		b.observe(reqLen, provider.Usage{InputTokens: 300 + 170*i, OutputTokens: 20, Known: true})
		b.add(provider.ToolResult{CallID: fmt.Sprint(i), Name: "t", Content: strings.Repeat("result text ", 20*i)}.Message())
	}
}

// TestBudgetLazyAgreesWithExact: a budget that counts only when its bound
// passes the limit decides as one that counts everything exactly, and
// once it counts exactly it has learnt the same ratio from the same
// reports.
func TestBudgetLazyAgreesWithExact(t *testing.T) {
	c := testCounter(t)
	tools := []provider.ToolSpec{echoTool("t").Spec()}
	h := filler(5, 120)
	build := func() *budget {
		b := newBudget(c, "claude-sonnet-4-5", 0, Anchor{}, "You are helpful.", tools, h)
		budgetScript(b)
		return b
	}
	eager := newBudget(c, "claude-sonnet-4-5", 0, Anchor{}, "You are helpful.", tools, h)
	eager.countExactly()
	budgetScript(eager)
	want := eager.estimate()
	if lazy := build(); lazy.exact || len(lazy.pending) != 6 || lazy.upper() < want {
		t.Fatalf("lazy budget: exact %v, %d pending, upper %d below the estimate %d", lazy.exact, len(lazy.pending), lazy.upper(), want)
	}
	for _, limit := range []int{0, want / 2, want - 1, want, want + 1, 2 * want, 100 * want} {
		lazy := build()
		if got := lazy.over(limit); got != (want > limit) {
			t.Errorf("limit %d: over = %v, exact estimate %d", limit, got, want)
		}
		lazy.countExactly()
		if lazy.ratio != eager.ratio || lazy.anchor != eager.anchor || lazy.estimate() != want {
			t.Errorf("limit %d: lazy ratio %v anchor %+v estimate %d; exact %v %+v %d",
				limit, lazy.ratio, lazy.anchor, lazy.estimate(), eager.ratio, eager.anchor, want)
		}
	}
	// A reset (compaction) learns the pending reports before the history
	// they refer to goes.
	lazy := build()
	lazy.reset(h[:2])
	if !lazy.exact || lazy.ratio != eager.ratio || len(lazy.pending) != 0 {
		t.Errorf("after reset: exact %v ratio %v (want %v), %d pending", lazy.exact, lazy.ratio, eager.ratio, len(lazy.pending))
	}
}

// TestTokenizerNotBuiltUnderBudget: a turn whose transcript is far under
// the budget is decided on bounds, and the tokenizer is never built; the
// anchor moves, the ratio waits. A turn that needs exact counts builds it
// and learns from every report of the turn.
func TestTokenizerNotBuiltUnderBudget(t *testing.T) {
	steps := func(toolOutput string) []pt.Step {
		return []pt.Step{
			pt.ToolCalls(pt.Call("c1", "t", `{"q":"x"}`)).WithUsage(provider.Usage{InputTokens: 900, OutputTokens: 10, Known: true}),
			pt.Text("done").WithUsage(provider.Usage{InputTokens: 950 + len(toolOutput)/4, OutputTokens: 5, Known: true}),
		}
	}
	run := func(t *testing.T, opts Options, toolOutput string) (Result, *sharedEncoder) {
		src := &sharedEncoder{name: EncodingO200K}
		opts.Model, opts.Counter = "gpt-4o", newCounter(EncodingO200K, src)
		h := append(filler(6, 300), user("go on"))
		e := newEnv(t, opts, h, steps(toolOutput)...)
		tool := echoTool("t")
		tool.fn = func(ctx context.Context, _ json.RawMessage) (string, error) { return toolOutput, nil }
		turn := e.turn(h, tool)
		turn.Calibration = 1.3
		turn.Approver = always(AllowOnce)
		res, err := e.agent.Run(t.Context(), turn)
		if err != nil {
			t.Fatal(err)
		}
		if res.Compacted {
			t.Fatal("compacted")
		}
		if res.Anchor.Messages != len(res.Messages) || res.Anchor.InputTokens != 950+len(toolOutput)/4 {
			t.Errorf("anchor %+v for %d messages", res.Anchor, len(res.Messages))
		}
		if got := results(res.Messages)["c1"].Content; got != toolOutput {
			t.Fatalf("tool result %.40q, want the tool's output", got)
		}
		return res, src
	}
	t.Run("under", func(t *testing.T) {
		res, src := run(t, Options{}, "short result")
		if src.built.Load() {
			t.Error("the tokenizer was built for a transcript far under the budget")
		}
		if res.Calibration != 1.3 {
			t.Errorf("ratio %v; a turn counted on bounds leaves it as it was (1.3)", res.Calibration)
		}
	})
	t.Run("near", func(t *testing.T) {
		// 24 KB of tool output: 2.5 × its bytes passes 0.75 × 64000, its
		// tokens do not.
		res, src := run(t, Options{ContextWindow: 64000}, strings.Repeat("some tool output ", 1500))
		if !src.built.Load() {
			t.Error("the tokenizer was not built though the bound passed the limit")
		}
		if res.Calibration == 1.3 {
			t.Error("the ratio learnt nothing from the turn's reports")
		}
	})
}
