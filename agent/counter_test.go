package agent

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
	pt "github.com/bobbinbot/bobbin/provider/providertest"
)

func TestEncodingFor(t *testing.T) {
	tests := map[string]string{
		"gpt-4o":                 EncodingO200K,
		"gpt-4o-mini":            EncodingO200K,
		"openai/gpt-4.1":         EncodingO200K,
		"gpt-5":                  EncodingO200K,
		"o3-mini":                EncodingO200K,
		"gpt-4":                  EncodingCL100K,
		"gpt-4-turbo":            EncodingCL100K,
		"gpt-3.5-turbo":          EncodingCL100K,
		"claude-sonnet-4-5":      EncodingO200K,
		"deepseek-chat":          EncodingO200K,
		"":                       EncodingO200K,
		"text-embedding-3-small": EncodingCL100K,
	}
	for model, want := range tests {
		t.Run(model, func(t *testing.T) {
			if got := EncodingFor(model); got != want {
				t.Errorf("EncodingFor(%q) = %s, want %s", model, got, want)
			}
		})
	}
}

func TestSeedCalibration(t *testing.T) {
	tests := map[string]float64{
		"gpt-4o":                     1.0,
		"":                           1.0,
		"deepseek-chat":              1.1,
		"deepseek/deepseek-reasoner": 1.1,
		"claude-3-5-sonnet-20241022": 1.15,
		"claude-sonnet-4-5":          1.15,
		"claude-opus-4-20250514":     1.15,
		"claude-opus-4-6":            1.15,
		"claude-opus-4-7":            1.4,
		"anthropic/claude-opus-4.7":  1.4,
		"claude-sonnet-5":            1.4,
	}
	for model, want := range tests {
		t.Run(model, func(t *testing.T) {
			if got := SeedCalibration(model); got != want {
				t.Errorf("SeedCalibration(%q) = %v, want %v", model, got, want)
			}
		})
	}
}

func TestCounter(t *testing.T) {
	c := testCounter(t)
	if c.Encoding() != EncodingO200K {
		t.Errorf("encoding %s", c.Encoding())
	}
	if n := c.Count("hello world"); n != 2 {
		t.Errorf("Count(hello world) = %d, want 2", n)
	}
	// Long runs are counted in segments, close to the exact count.
	run := strings.Repeat("aGVsbG8gd29ybGQ", 40)
	exact := len(c.enc().EncodeOrdinary(run))
	if got := c.Count(run); math.Abs(float64(got-exact)) > 0.05*float64(exact) {
		t.Errorf("segmented count %d, exact %d", got, exact)
	}
	m := provider.Message{Role: provider.RoleAssistant, Content: "hello world",
		ToolCalls: []provider.ToolCall{pt.Call("1", "search", `{"q":"x"}`)}}
	n1, n2 := c.CountMessage(m), c.CountMessage(m)
	if n1 != n2 || n1 < 2+msgOverhead+callOverhead {
		t.Errorf("CountMessage = %d then %d", n1, n2)
	}
	m.ToolCalls[0].Arguments = `{"q":"a much longer query than before"}`
	if n3 := c.CountMessage(m); n3 <= n1 {
		t.Errorf("changed message counted %d, before %d: the cache key ignores arguments", n3, n1)
	}
	specs := []provider.ToolSpec{{Name: "search", Description: "Search the web", InputSchema: []byte(`{"type":"object"}`)}}
	t1, t2 := c.CountTools(specs), c.CountTools(specs)
	specs[0].Description += " for anything at all, in any language"
	if t1 != t2 || c.CountTools(specs) <= t1 {
		t.Errorf("CountTools %d, %d, then %d after a longer description", t1, t2, c.CountTools(specs))
	}
	var nilCounter *Counter
	if nilCounter.Count("12345678") != 2 || nilCounter.CountMessage(user("1234")) != 1+msgOverhead {
		t.Errorf("nil counter does not estimate from bytes")
	}
}

func TestCounterCacheBounded(t *testing.T) {
	c := newCounter("", nil)
	for i := range counterCacheSize + 100 {
		c.CountMessage(user(fmt.Sprint(i)))
	}
	if len(c.index) != counterCacheSize || c.lru.Len() != counterCacheSize {
		t.Errorf("cache holds %d/%d entries, bound %d", len(c.index), c.lru.Len(), counterCacheSize)
	}
}

// localCount is what a provider whose tokenizer matched ours would report
// for req.
func localCount(c *Counter, req provider.Request) int {
	n := c.CountTools(req.Tools)
	for _, m := range req.Messages {
		n += c.CountMessage(m)
	}
	return n
}

// TestCalibrationConverges: sessions that count exactly learn the
// provider's ratio from its reports. Here a long system prompt puts the
// upper bound past the compaction threshold while the exact estimate stays
// well under it, and no anchor is carried, so each estimate is the ratio
// times everything and shows the ratio's error.
func TestCalibrationConverges(t *testing.T) {
	c := testCounter(t)
	const truth = 1.6 // the provider's tokens per local token
	tool := echoTool("t")
	system := strings.Repeat("Answer briefly and cite your sources. ", 1000)
	var history []provider.Message
	cal := 0.0
	var anchor Anchor
	var lastEstimateErr float64
	for turn := range 25 {
		history = append(history, user(fmt.Sprintf("question %d about %s", turn, strings.Repeat("things ", turn%7+3))))
		var estimate int
		step := pt.Step{Func: func(req provider.Request) ([]provider.Event, error) {
			p := int(truth * float64(localCount(c, req)))
			if turn > 0 {
				lastEstimateErr = math.Abs(float64(estimate-p)) / float64(p)
			}
			return pt.Text(fmt.Sprintf("answer %d", turn)).WithUsage(provider.Usage{InputTokens: p, OutputTokens: 3, Known: true}).Events, nil
		}}
		e := newEnv(t, Options{Model: "claude-sonnet-4-5", Counter: c, ContextWindow: 40000}, history, step)
		turnIn := e.turn(history, tool)
		turnIn.System = system
		turnIn.Calibration = cal
		// What the agent would estimate for this request.
		r := newRun(e.agent, turnIn)
		if limit := 30000; r.budget.upper() <= limit || r.budget.estimate() > limit {
			t.Fatalf("turn %d: upper bound %d, estimate %d: the session must count exactly without compacting", turn, r.budget.upper(), r.budget.estimate())
		}
		estimate = r.budget.estimate()
		res, err := e.agent.Run(t.Context(), turnIn)
		if err != nil {
			t.Fatal(err)
		}
		if turn == 0 && (res.Calibration >= 1.6 || res.Calibration == SeedCalibration("claude-sonnet-4-5")) {
			t.Errorf("first ratio %v: jumped to the truth, or learnt nothing", res.Calibration)
		}
		cal, anchor, history = res.Calibration, res.Anchor, res.Messages
		last := e.store.cps[len(e.store.cps)-1]
		if last.Calibration != cal || last.Anchor != anchor {
			t.Errorf("checkpoint carries %v/%+v, result %v/%+v", last.Calibration, last.Anchor, cal, anchor)
		}
	}
	if math.Abs(cal-truth) > 0.02 {
		t.Errorf("ratio after 25 reports = %.3f, want ≈ %.1f", cal, truth)
	}
	if anchor.Messages != len(history) || anchor.Model != "claude-sonnet-4-5" {
		t.Errorf("anchor %+v for %d messages", anchor, len(history))
	}
	if lastEstimateErr > 0.02 {
		t.Errorf("last estimate off by %.1f%%", 100*lastEstimateErr)
	}
}

func TestBudgetAnchor(t *testing.T) {
	c := newCounter("", nil)
	h := filler(4, 100)
	b := newBudget(c, "m", 0, Anchor{}, "sys", nil, h)
	noAnchor := b.estimate()
	if noAnchor <= 0 || b.ratio != 1.0 {
		t.Fatalf("estimate %d ratio %v", noAnchor, b.ratio)
	}
	b.add(provider.Message{Role: provider.RoleAssistant, Content: "reply"})
	b.observe(4, provider.Usage{InputTokens: 1000, OutputTokens: 10, Known: true})
	if b.anchor.Messages != 5 || b.anchor.InputTokens != 1000 {
		t.Errorf("anchor %+v", b.anchor)
	}
	if got := b.estimate(); got != 1010 {
		t.Errorf("estimate right after the report = %d, want input+output 1010", got)
	}
	b.add(user(strings.Repeat("x", 400)))
	if got := b.estimate(); got <= 1010+100 {
		t.Errorf("estimate after a 400-byte message = %d", got)
	}
	// Unknown usage leaves everything as it was.
	before := *b
	b.observe(5, provider.Usage{})
	if b.anchor != before.anchor || b.ratio != before.ratio {
		t.Errorf("unknown usage moved the budget")
	}
	// An anchor of another model, or past the history, is dropped.
	for _, a := range []Anchor{{Model: "other", Messages: 2, InputTokens: 5}, {Model: "m", Messages: 99, InputTokens: 5}} {
		if b := newBudget(c, "m", 2, a, "", nil, h); !b.anchor.IsZero() {
			t.Errorf("anchor %+v kept", a)
		}
	}
	// Ratios are clamped.
	for _, r := range []float64{0.1, 9} {
		if b := newBudget(c, "m", r, Anchor{}, "", nil, h); b.ratio < minRatio || b.ratio > maxRatio {
			t.Errorf("ratio %v not clamped: %v", r, b.ratio)
		}
	}
}

func TestSanitize(t *testing.T) {
	tests := map[string]string{
		"plain\ttext\nline":           "plain\ttext\nline",
		"zero\u200bwidth\u2060join":   "zerowidthjoin",
		"bidi\u202eevil\u2066x\u2069": "bidievilx",
		"tag\U000E0041s":              "tags",
		"bell\x07 esc\x1b cr\r\n":     "bell esc cr\n",
		"bad\xffutf8":                 "bad\ufffdutf8",
		"emoji 👍 ünïcödé 中文":          "emoji 👍 ünïcödé 中文",
	}
	for in, want := range tests {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSanitizeCap(f *testing.F) {
	for _, s := range []string{"", "abc", "a\u200bb", "日本語テキスト", "\xff\xfe", strings.Repeat("é", 300)} {
		f.Add(s, 10)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = max(1, limit%2000)
		r := &run{a: &Agent{opts: Options{OutputCap: limit, TurnOutputCap: 1 << 20}}}
		out := r.capResult(provider.ToolResult{Content: s}).Content
		kept := out
		if i := strings.LastIndex(out, "\n…[truncated "); i >= 0 {
			kept = out[:i]
		}
		if !strings.HasPrefix(sanitize(s), kept) || len(kept) > limit || strings.ContainsRune(out, '\u200b') {
			t.Fatalf("capResult(%q, %d) = %q", s, limit, out)
		}
		if !utf8Valid(out) {
			t.Fatalf("invalid UTF-8 from %q: %q", s, out)
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\x00") == s }

// TestTokenizerBuiltOnFirstCount: making a Counter builds no encoder (a
// replica that has not run a turn does not hold its tables); the first
// count builds it and is exact.
func TestTokenizerBuiltOnFirstCount(t *testing.T) {
	src := &sharedEncoder{name: EncodingO200K}
	c := newCounter(EncodingO200K, src)
	if src.built.Load() {
		t.Fatal("the encoder was built when the Counter was made")
	}
	if _, err := NewCounter("gpt-4o"); err != nil {
		t.Fatal(err)
	}
	got := c.Count("hello world")
	if !src.built.Load() {
		t.Fatal("the first count did not build the encoder")
	}
	if got != 2 {
		t.Errorf("Count(hello world) = %d, want 2", got)
	}
}
