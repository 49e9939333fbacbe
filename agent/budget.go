package agent

import (
	"strconv"
	"strings"

	"github.com/bobbinbot/bobbin/provider"
)

// Anchor is the last usage the provider reported for this session, so the
// next estimate counts only what was added since. The caller persists it
// with the transcript; its zero value means none.
type Anchor struct {
	// Model the usage was reported for; an anchor of another model is
	// ignored.
	Model string `json:"model,omitempty"`
	// Messages is how many History messages the anchor covers: the request's
	// history plus the response message.
	Messages int `json:"messages"`
	// InputTokens and OutputTokens are the reported usage of that call.
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// IsZero reports whether a is no anchor.
func (a Anchor) IsZero() bool { return a == Anchor{} }

// Calibration bounds and the smoothing weight of one report.
const (
	minRatio     = 0.5
	maxRatio     = 2.5
	ratioWeight  = 0.2
	msgOverhead  = 4  // tokens per message (role, separators)
	callOverhead = 10 // tokens per tool call (id, name, framing)
)

// SeedCalibration is the starting ratio of provider tokens to local
// tokenizer tokens for model (providers.md §10; the values are estimates):
// 1.0 for OpenAI and unknown models, 1.15 for Claude up to 4.6, 1.4 for
// Claude 4.7 and later, 1.1 for DeepSeek.
func SeedCalibration(model string) float64 {
	return seedRatio(model)
}

func seedRatio(model string) float64 {
	m := strings.ToLower(model)
	switch {
	case strings.Contains(m, "deepseek"):
		return 1.1
	case strings.Contains(m, "claude"):
		major, minor := modelVersion(m[strings.Index(m, "claude"):])
		if major > 4 || major == 4 && minor >= 7 {
			return 1.4
		}
		return 1.15
	}
	return 1.0
}

// modelVersion finds the first "N" or "N-M" version in a Claude model name
// ("claude-opus-4-7", "claude-3-5-sonnet", "claude-sonnet-4-20250514");
// numbers of three or more digits are dates, not versions.
func modelVersion(m string) (major, minor int) {
	fields := strings.FieldsFunc(m, func(r rune) bool { return r == '-' || r == '.' || r == '_' || r == '@' || r == ':' })
	for i, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil || n >= 100 {
			continue
		}
		major = n
		if i+1 < len(fields) {
			if n2, err := strconv.Atoi(fields[i+1]); err == nil && n2 < 100 {
				minor = n2
			}
		}
		return major, minor
	}
	return 0, 0
}

// budget estimates the next request's input tokens: the last reported usage
// (the anchor) plus the calibrated local count of every message added since,
// or, with no usable anchor, the calibrated local count of everything.
// Message counts are kept as prefix sums so appending is O(1) and the
// history is never re-counted.
//
// Exact local counts need the tokenizer, whose tables are the largest thing
// the process holds (~22 MiB for o200k_base), and only one decision rests on
// them: whether to compact (over). So the budget keeps, beside them, an
// upper bound of every count that needs no tokenizer (Counter.Bound: a
// token per byte) and counts exactly only when the estimate on bounds
// passes the limit. Until then it is lazy: usage reports still move the
// anchor, and the calibration samples they carry wait in pending, to be
// learnt in order, with the same result, when the run first counts
// exactly. A run that never does leaves the ratio as it found it: the
// ratio only scales local counts, and it gets its samples in the sessions
// whose decisions it steers, those near the limit.
type budget struct {
	c      *Counter
	model  string
	ratio  float64
	anchor Anchor
	system string
	tools  []provider.ToolSpec
	msgs   []provider.Message // the history, for exact counts when they are wanted
	// Upper bounds, always kept: of the system prompt and tools, and
	// bound[i] of msgs[:i].
	fixedBound int
	bound      []int
	// exact: fixed and prefix hold exact local counts (prefix[i] of
	// msgs[:i]), kept from then on for the rest of the run.
	exact   bool
	fixed   int
	prefix  []int
	pending []sample
}

// sample is a usage report not yet learnt from: the request carried the
// first messages of the history and the provider counted input tokens.
type sample struct{ messages, input int }

func newBudget(c *Counter, model string, ratio float64, anchor Anchor, system string, tools []provider.ToolSpec, history []provider.Message) *budget {
	if ratio <= 0 {
		ratio = seedRatio(model)
	}
	b := &budget{c: c, model: model, ratio: clampRatio(ratio), anchor: anchor, system: system, tools: tools}
	if system != "" {
		b.fixedBound = msgOverhead + tokenBound(system)
	}
	b.fixedBound += boundTools(tools)
	b.reset(history)
	return b
}

// reset recounts the history (cached per message) and drops the anchor if
// it no longer fits. Samples still pending refer to the history being
// replaced, so they are learnt first.
func (b *budget) reset(history []provider.Message) {
	if len(b.pending) > 0 {
		b.countExactly()
	}
	b.msgs = make([]provider.Message, 0, len(history)+16)
	b.bound = make([]int, 1, len(history)+16)
	b.prefix = b.prefix[:0]
	if b.exact {
		b.prefix = append(b.prefix, 0)
	}
	b.add(history...)
	if b.anchor.Model != b.model || b.anchor.Messages <= 0 || b.anchor.Messages > len(history) {
		b.anchor = Anchor{}
	}
}

// add counts messages appended to the history: their bounds, and their
// exact counts once the run counts exactly.
func (b *budget) add(msgs ...provider.Message) {
	for _, m := range msgs {
		b.msgs = append(b.msgs, m)
		b.bound = append(b.bound, b.bound[len(b.bound)-1]+b.c.boundMessage(m))
		if b.exact {
			b.prefix = append(b.prefix, b.prefix[len(b.prefix)-1]+b.c.CountMessage(m))
		}
	}
}

func (b *budget) len() int { return len(b.msgs) }

// countExactly switches the run to exact counts (building the tokenizer if
// no count has yet) and learns from the pending samples, in the order they
// came, as observe would have.
func (b *budget) countExactly() {
	if b.exact {
		return
	}
	b.exact = true
	b.fixed = 0
	if b.system != "" {
		b.fixed = msgOverhead + b.c.Count(b.system)
	}
	b.fixed += b.c.CountTools(b.tools)
	b.prefix = make([]int, 1, cap(b.bound))
	for _, m := range b.msgs {
		b.prefix = append(b.prefix, b.prefix[len(b.prefix)-1]+b.c.CountMessage(m))
	}
	for _, s := range b.pending {
		b.learn(s)
	}
	b.pending = nil
}

// over reports whether the next request's estimate passes limit. It counts
// exactly only when the estimate on upper bounds passes it: below, the
// exact estimate is below too.
func (b *budget) over(limit int) bool {
	if !b.exact && b.upper() <= limit {
		return false
	}
	return b.estimate() > limit
}

// upper is an upper bound of estimate that needs no tokenizer: the same
// sum on bounds, with the highest ratio the pending samples could lead to.
func (b *budget) upper() int {
	r := b.ratio
	if len(b.pending) > 0 {
		r = maxRatio
	}
	return b.sum(r, b.fixedBound, b.bound)
}

// estimate returns the expected input tokens of a request carrying the
// whole history, counting exactly.
func (b *budget) estimate() int {
	b.countExactly()
	return b.sum(b.ratio, b.fixed, b.prefix)
}

// sum is the estimate with ratio r, the system prompt and tools counted as
// fixed and the history's prefix sums prefix.
func (b *budget) sum(r float64, fixed int, prefix []int) int {
	n := b.len()
	if !b.anchor.IsZero() && b.anchor.Messages <= n {
		since := prefix[n] - prefix[b.anchor.Messages]
		return b.anchor.InputTokens + b.anchor.OutputTokens + int(r*float64(since)+0.5)
	}
	return int(r*float64(fixed+prefix[n]) + 0.5)
}

// observe learns from the usage reported for a request that carried the
// first reqMessages history messages; the response message must already be
// added. The anchor moves to this response at once; the ratio learns from
// the report now if the run counts exactly, else when it first does.
func (b *budget) observe(reqMessages int, u provider.Usage) {
	if !u.Known || u.InputTokens <= 0 || reqMessages > b.len() {
		return
	}
	if s := (sample{reqMessages, u.InputTokens}); b.exact {
		b.learn(s)
	} else {
		b.pending = append(b.pending, s)
	}
	b.anchor = Anchor{Model: b.model, Messages: min(reqMessages+1, b.len()), InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
}

// learn moves the ratio a fifth of the way towards reported/local (this is
// providers.md's r ← 0.8·r + 0.2·r·P/E with E = r·local), clamped to
// [0.5, 2.5]. It needs exact counts.
func (b *budget) learn(s sample) {
	if local := b.fixed + b.prefix[s.messages]; local > 0 {
		sample := float64(s.input) / float64(local)
		b.ratio = clampRatio((1-ratioWeight)*b.ratio + ratioWeight*sample)
	}
}

func clampRatio(r float64) float64 {
	return max(minRatio, min(maxRatio, r))
}
