package llmemu

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// stockError is the usual (type, code, message) of a protocol for a status.
func stockError(p Protocol, status int) (typ, code, msg string) {
	if p == Anthropic {
		switch status {
		case http.StatusBadRequest:
			return "invalid_request_error", "", "Invalid request."
		case http.StatusUnauthorized:
			return "authentication_error", "", "invalid x-api-key"
		case http.StatusForbidden:
			return "permission_error", "", "Your API key does not have permission to use the specified resource."
		case http.StatusNotFound:
			return "not_found_error", "", "The requested resource could not be found."
		case http.StatusRequestEntityTooLarge:
			return "request_too_large", "", "Request exceeds the maximum allowed number of bytes."
		case http.StatusTooManyRequests:
			return "rate_limit_error", "", "Number of requests has exceeded your rate limit."
		case http.StatusGatewayTimeout:
			return "timeout_error", "", "Request timed out."
		case 529:
			return "overloaded_error", "", "Overloaded"
		}
		if status < 500 {
			return "invalid_request_error", "", http.StatusText(status)
		}
		return "api_error", "", "Internal server error"
	}
	switch status {
	case http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key", "Incorrect API key provided."
	case http.StatusTooManyRequests:
		return "requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later."
	case http.StatusServiceUnavailable, 529:
		return "server_error", "", "The server is overloaded or not ready yet."
	}
	if status < 500 {
		return "invalid_request_error", "", cmp.Or(http.StatusText(status), "Invalid request.")
	}
	return "server_error", "", "The server had an error while processing your request. Sorry about that!"
}

// errorBody renders e in the protocol's error JSON.
func errorBody(p Protocol, e ErrorReply, status int) []byte {
	if e.Body != "" {
		return []byte(e.Body)
	}
	typ, code, msg := stockError(p, status)
	typ, msg = cmp.Or(e.Type, typ), cmp.Or(e.Message, msg)
	if p == Anthropic {
		b, _ := json.Marshal(struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}{Type: "error", Error: struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}{typ, msg}})
		return b
	}
	var codeJSON any // null unless a code applies
	if c := cmp.Or(e.Code, code); c != "" {
		codeJSON = c
	}
	var body struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Param   any    `json:"param"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	body.Error.Message, body.Error.Type, body.Error.Code = msg, typ, codeJSON
	if e.Param != "" {
		body.Error.Param = e.Param
	}
	b, _ := json.Marshal(body)
	return b
}

// openAIStreamError is the data of an OpenAI mid-stream error line.
func openAIStreamError(e *ErrorReply) []byte {
	if e == nil {
		return nil
	}
	return errorBody(OpenAI, *e, http.StatusInternalServerError)
}

// anthropicStreamError is the data of an Anthropic "event: error"; the
// default type is overloaded_error, the common mid-stream failure.
func anthropicStreamError(e *ErrorReply) []byte {
	if e == nil {
		return nil
	}
	return errorBody(Anthropic, *e, 529)
}

func writeHTTPError(w http.ResponseWriter, p Protocol, e ErrorReply) {
	status := cmp.Or(e.Status, http.StatusInternalServerError)
	h := w.Header()
	for k, vs := range e.Header {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		ms := e.RetryAfter.Milliseconds()
		h.Set("Retry-After", strconv.FormatInt((ms+999)/1000, 10))
		h.Set("Retry-After-Ms", strconv.FormatInt(ms, 10))
	}
	w.WriteHeader(status)
	_, _ = w.Write(errorBody(p, e, status))
}

// contextLengthError is the protocol's answer to a prompt over the window.
func contextLengthError(p Protocol, input, window int) ErrorReply {
	if p == Anthropic {
		return ErrorReply{Status: http.StatusBadRequest, Type: "invalid_request_error",
			Message: fmt.Sprintf("prompt is too long: %d tokens > %d maximum", input, window)}
	}
	return ErrorReply{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "context_length_exceeded",
		Message: fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", window, input)}
}
