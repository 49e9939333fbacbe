package provider

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrTruncated means the stream ended without its terminal marker. Events
// already yielded stay valid for display, but the turn did not end normally.
var ErrTruncated = errors.New("provider: stream truncated")

// ErrContextLength means the request exceeded the model's context window;
// the caller compacts and retries once. errors.Is matches an *APIError that
// reports it.
var ErrContextLength = errors.New("provider: context length exceeded")

// ErrMediaUnsupported means the endpoint refused image or PDF input (a
// model without vision, a server without file parts). The caller retries
// without media, notes in their place. errors.Is matches an *APIError that
// reports it.
var ErrMediaUnsupported = errors.New("provider: the endpoint does not take image or PDF input")

// APIError is an error answered by the model endpoint, before or during the
// stream. It never contains the API key.
type APIError struct {
	// Provider names the client ("openai", "anthropic").
	Provider string
	// Status is the HTTP status; 0 for an error inside a 200 stream.
	Status int
	// Type and Code are the endpoint's error type and code, if any.
	Type string
	Code string
	// Param is the request field the endpoint named, if any (OpenAI's
	// "param").
	Param string
	// Message is the endpoint's message, shortened.
	Message string
	// Retryable is true for overload, rate limits and server errors.
	Retryable bool
	// RetryAfter is the endpoint's requested wait, zero if none.
	RetryAfter time.Duration
	// ContextLength is true when the endpoint said the input is too long.
	ContextLength bool
	// MediaUnsupported is true when the endpoint refused the request's
	// image or PDF input. Only a request that carried media is so
	// classified.
	MediaUnsupported bool
}

func (e *APIError) Error() string {
	s := e.Provider + ": api error"
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Type != "" {
		s += " " + e.Type
	}
	if e.Code != "" && e.Code != e.Type {
		s += " [" + e.Code + "]"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is reports ErrContextLength for context-length errors and
// ErrMediaUnsupported for refused media.
func (e *APIError) Is(target error) bool {
	return target == ErrContextLength && e.ContextLength ||
		target == ErrMediaUnsupported && e.MediaUnsupported
}

// MediaRefusal reports whether an endpoint's 400 (or 422) error message
// refuses image or file input, as real servers word it: OpenAI's "Invalid
// content type. image_url is only supported by certain models.", vLLM's
// "Unsupported chat content part type: 'file'", DeepSeek's "unknown variant
// `image_url`, expected `text`", Anthropic's "Could not process image" and
// its per-field complaints ("messages.0.content.1.image.source…"). The
// clients ask only for requests that carried media; a context-length error
// is never a refusal.
func MediaRefusal(status int, msg string) bool {
	if status != 400 && status != 422 {
		return false
	}
	m := strings.ToLower(msg)
	for _, s := range []string{"image", "vision", "file_data", "content part", "pdf", "document", "multimodal", "media_type", "unknown variant", "chatcompletionrequestcontent", "expected a string"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// IsRetryable reports whether err is an APIError marked retryable.
func IsRetryable(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Retryable
}
