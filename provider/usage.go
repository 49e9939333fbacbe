package provider

// StopReason says why the model stopped.
type StopReason string

// Normalized stop reasons. Tools are executed only after StopToolUse; after
// StopMaxTokens tool arguments may be cut and must not run.
const (
	StopEndTurn   StopReason = "end_turn"
	StopToolUse   StopReason = "tool_use"
	StopMaxTokens StopReason = "max_tokens"
	// StopOther covers refusals, content filters, provider errors reported as
	// a finish reason and anything unknown; RawStopReason has the value.
	StopOther StopReason = "other"
)

// Usage is normalized token usage of one response.
type Usage struct {
	// InputTokens is the total input, cached tokens included.
	InputTokens int `json:"input_tokens"`
	// OutputTokens includes reasoning tokens.
	OutputTokens int `json:"output_tokens"`
	// CacheReadTokens is the part of InputTokens read from a prompt cache.
	CacheReadTokens int `json:"cache_read_tokens,omitempty"`
	// CacheWriteTokens is the part of InputTokens written to a prompt cache.
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
	// Known is false when the endpoint reported no usage; the zeros then
	// mean "unknown", never "free".
	Known bool `json:"known"`
}

// Add accumulates o into u. The sum is known if either side is.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheWriteTokens += o.CacheWriteTokens
	u.Known = u.Known || o.Known
}

// CacheReadShare is the fraction of input tokens served from a prompt cache.
func (u Usage) CacheReadShare() float64 {
	if u.InputTokens == 0 {
		return 0
	}
	return float64(u.CacheReadTokens) / float64(u.InputTokens)
}
