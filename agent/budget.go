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
type budget struct {
	c      *Counter
	model  string
	ratio  float64
	anchor Anchor
	fixed  int   // local tokens of the system prompt and tools
	prefix []int // prefix[i] = local tokens of history[:i]
}

func newBudget(c *Counter, model string, ratio float64, anchor Anchor, system string, tools []provider.ToolSpec, history []provider.Message) *budget {
	if ratio <= 0 {
		ratio = seedRatio(model)
	}
	b := &budget{c: c, model: model, ratio: clampRatio(ratio), anchor: anchor}
	if system != "" {
		b.fixed = msgOverhead + c.Count(system)
	}
	b.fixed += c.CountTools(tools)
	b.reset(history)
	return b
}

// reset recounts the history (cached per message) and drops the anchor if
// it no longer fits.
func (b *budget) reset(history []provider.Message) {
	b.prefix = make([]int, 1, len(history)+16)
	b.add(history...)
	if b.anchor.Model != b.model || b.anchor.Messages <= 0 || b.anchor.Messages > len(history) {
		b.anchor = Anchor{}
	}
}

// add counts messages appended to the history.
func (b *budget) add(msgs ...provider.Message) {
	for _, m := range msgs {
		b.prefix = append(b.prefix, b.prefix[len(b.prefix)-1]+b.c.CountMessage(m))
	}
}

func (b *budget) len() int { return len(b.prefix) - 1 }

// estimate returns the expected input tokens of a request carrying the
// whole history.
func (b *budget) estimate() int {
	n := b.len()
	if !b.anchor.IsZero() && b.anchor.Messages <= n {
		since := b.prefix[n] - b.prefix[b.anchor.Messages]
		return b.anchor.InputTokens + b.anchor.OutputTokens + int(b.ratio*float64(since)+0.5)
	}
	return int(b.ratio*float64(b.fixed+b.prefix[n]) + 0.5)
}

// observe learns from the usage reported for a request that carried the
// first reqMessages history messages; the response message must already be
// added. The ratio moves a fifth of the way towards reported/local (this is
// providers.md's r ← 0.8·r + 0.2·r·P/E with E = r·local), clamped to
// [0.5, 2.5], and the anchor moves to this response.
func (b *budget) observe(reqMessages int, u provider.Usage) {
	if !u.Known || u.InputTokens <= 0 || reqMessages > b.len() {
		return
	}
	if local := b.fixed + b.prefix[reqMessages]; local > 0 {
		sample := float64(u.InputTokens) / float64(local)
		b.ratio = clampRatio((1-ratioWeight)*b.ratio + ratioWeight*sample)
	}
	b.anchor = Anchor{Model: b.model, Messages: min(reqMessages+1, b.len()), InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
}

func clampRatio(r float64) float64 {
	return max(minRatio, min(maxRatio, r))
}
