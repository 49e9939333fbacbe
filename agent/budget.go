package agent

import (
	"strconv"
	"strings"
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
