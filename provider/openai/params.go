package openai

import (
	"context"
	"log/slog"
	"strings"

	"github.com/bobbinbot/bobbin/provider"
)

// variant is how one attempt spells the request's optional parameters.
type variant struct {
	tokenParam  string // TokenParamMaxTokens or TokenParamMaxCompletionTokens
	streamUsage bool   // send stream_options.include_usage
	// flipped records that the token parameter was already switched once
	// for this request, so two servers' worth of contradictions cannot loop.
	flipped bool
}

// variant returns the first attempt's spelling for model.
func (c *Client) variant(model string) variant {
	v := variant{
		tokenParam:  c.tokenMode,
		streamUsage: (c.opts.IncludeUsage == nil || *c.opts.IncludeUsage) && !c.noStreamOptions.Load(),
	}
	if v.tokenParam == TokenParamAuto {
		v.tokenParam = TokenParamMaxTokens
		if needsCompletionTokens(model) {
			v.tokenParam = TokenParamMaxCompletionTokens
		}
		if p, ok := c.learned.Load(model); ok {
			v.tokenParam = p.(string)
		}
	}
	return v
}

// needsCompletionTokens reports the model families that refuse max_tokens:
// OpenAI's reasoning models (o1, o3, o4-mini, …) and gpt-5. A routing
// prefix ("openai/o3-mini") is ignored.
func needsCompletionTokens(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	if strings.HasPrefix(m, "gpt-5") {
		return true
	}
	return len(m) >= 2 && m[0] == 'o' && m[1] >= '1' && m[1] <= '9'
}

// adapt decides whether a refused request is worth one more attempt with
// another spelling: a server that refuses stream_options (then never sent
// again by this client), or, in auto mode, the token parameter it does not
// take (then remembered for the model). It reports false when ae is
// something else.
func (c *Client) adapt(ctx context.Context, ae *provider.APIError, req provider.Request, v variant) (variant, bool) {
	if v.streamUsage && rejectsParam(ae, "stream_options") {
		if !c.noStreamOptions.Swap(true) {
			c.log.LogAttrs(ctx, slog.LevelWarn, "openai: the endpoint refuses stream_options; streaming without usage reports from now on (set LLM_STREAM_USAGE=false to skip the refused attempt)",
				slog.String("model", req.Model), slog.String("error", ae.Message))
		}
		v.streamUsage = false
		return v, true
	}
	if c.tokenMode == TokenParamAuto && !v.flipped && req.MaxTokens > 0 && rejectsParam(ae, v.tokenParam) {
		other := TokenParamMaxCompletionTokens
		if v.tokenParam == TokenParamMaxCompletionTokens {
			other = TokenParamMaxTokens
		}
		if _, loaded := c.learned.Swap(req.Model, other); !loaded {
			c.log.LogAttrs(ctx, slog.LevelInfo, "openai: the endpoint refuses "+v.tokenParam+"; sending "+other+" for this model from now on",
				slog.String("model", req.Model))
		}
		v.tokenParam, v.flipped = other, true
		return v, true
	}
	return v, false
}

// refusalWords are how servers say a request field is not accepted:
// OpenAI "Unsupported parameter: 'max_tokens' is not supported with this
// model." (code unsupported_parameter) and "Unknown parameter:
// 'stream_options'." (code unknown_parameter), Azure "Unrecognized request
// argument supplied: stream_options", pydantic-based servers "Extra inputs
// are not permitted".
var refusalWords = []string{"unsupported", "not supported", "unknown parameter", "unknown field", "unrecognized", "not permitted", "extra inputs", "extra fields", "not allowed"}

// rejectsParam reports whether ae is a 400 (or 422) refusing the request
// field name.
func rejectsParam(ae *provider.APIError, name string) bool {
	if ae.Status != 400 && ae.Status != 422 {
		return false
	}
	m := strings.ToLower(ae.Message)
	if ae.Param != name && !strings.Contains(m, name) {
		return false
	}
	if ae.Code == "unsupported_parameter" || ae.Code == "unknown_parameter" {
		return true
	}
	for _, w := range refusalWords {
		if strings.Contains(m, w) {
			return true
		}
	}
	return false
}

// requestHasMedia reports whether req carries image or PDF bytes.
func requestHasMedia(req provider.Request) bool {
	for _, m := range req.Messages {
		if provider.HasMedia(m.Parts) {
			return true
		}
	}
	return false
}
