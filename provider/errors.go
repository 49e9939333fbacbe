package provider

import (
	"errors"
	"fmt"
	"time"
)

// ErrTruncated means the stream ended without its terminal marker. Events
// already yielded stay valid for display, but the turn did not end normally.
var ErrTruncated = errors.New("provider: stream truncated")

// ErrContextLength means the request exceeded the model's context window;
// the caller compacts and retries once. errors.Is matches an *APIError that
// reports it.
var ErrContextLength = errors.New("provider: context length exceeded")

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
	// Message is the endpoint's message, shortened.
	Message string
	// Retryable is true for overload, rate limits and server errors.
	Retryable bool
	// RetryAfter is the endpoint's requested wait, zero if none.
	RetryAfter time.Duration
	// ContextLength is true when the endpoint said the input is too long.
	ContextLength bool
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

// Is reports ErrContextLength for context-length errors.
func (e *APIError) Is(target error) bool {
	return target == ErrContextLength && e.ContextLength
}

// IsRetryable reports whether err is an APIError marked retryable.
func IsRetryable(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Retryable
}
