package anthropic

import (
	"encoding/json"
	"strings"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/transport"
)

// retryableType reports whether an Anthropic error type is worth retrying.
// Mid-stream errors are classified by type only: the HTTP status of the
// stream was 200.
func retryableType(typ string) bool {
	switch typ {
	case "overloaded_error", "api_error", "rate_limit_error", "timeout_error":
		return true
	}
	return false
}

// contextLengthMessage recognizes the endpoint saying the input does not fit,
// e.g. 400 "prompt is too long: 201234 tokens > 200000 maximum".
func contextLengthMessage(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"prompt is too long", "exceed context limit", "context length", "context window", "too many input tokens", "input is too long"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// classify builds the APIError for an error of the given HTTP status (0 in a
// stream), Anthropic error type and message.
func classify(status int, typ, msg string) *provider.APIError {
	e := &provider.APIError{
		Provider:  "anthropic",
		Status:    status,
		Type:      typ,
		Message:   transport.Shorten(msg),
		Retryable: retryableType(typ) || (status != 0 && transport.RetryableStatus(status)),
	}
	if (typ == "invalid_request_error" || typ == "request_too_large" || status == 400 || status == 413) && contextLengthMessage(msg) {
		e.ContextLength = true
		e.Retryable = false
	}
	return e
}

// classifyBody turns an HTTP error response body into an APIError. Bodies
// that are not Anthropic's {"type":"error","error":{…}} keep their text.
func classifyBody(status int, body []byte) *provider.APIError {
	var w struct {
		Error *wireErrorObj `json:"error"`
	}
	if json.Unmarshal(body, &w) == nil && w.Error != nil {
		return classify(status, w.Error.Type, w.Error.Message)
	}
	return classify(status, "", strings.TrimSpace(string(body)))
}
