// Package openai is the streaming client for OpenAI-compatible Chat
// Completions endpoints (OpenAI, DeepSeek, OpenRouter, Ollama, vLLM, LM
// Studio, llama.cpp). It shapes provider.Request into a chat/completions
// body and normalizes the server's SSE chunks into provider.Event values,
// smoothing over the servers' differences (where usage arrives, tool-call
// indexing, reasoning fields, mid-stream error shapes).
//
// Request shaping, in short: leading system messages become one system
// message; a later one or a compaction summary is sent as a user message
// unless Options.MidConversationSystem; a user
// message whose speaker is known starts with "[Name (ID)] " (or "[Name] ",
// "[ID] "); each tool result is its own "tool" message; an assistant message
// with tool calls always carries reasoning_content (DeepSeek requires it);
// a call without a result gets a synthesized error result. A user message
// with images or PDFs has an array content of text, image_url (data URL)
// and file parts; text files and notes are inlined text, and without media
// the content stays one string. A tool's images are notes in its tool
// message (Chat Completions tool results are text).
//
// Optional parameters adapt to the endpoint: max_tokens or
// max_completion_tokens (Options.TokenParam), and stream_options, each
// retried once in the other form on the server's 400 refusal. A refusal of
// the request's images or PDFs is an APIError matching
// provider.ErrMediaUnsupported, for the caller to retry without them.
//
// Stream ends: [DONE], or a clean end of body after a finish reason, is a
// normal end; anything else is provider.ErrTruncated. After finish_reason
// "length" tool calls are dropped (their arguments may be cut).
//
// openai may import provider and its internal packages; it must not import
// agent, bot, session, mcp, slack-go, go-redis or the MCP SDK.
package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/sse"
	"github.com/bobbinbot/bobbin/provider/internal/transport"
)

// DefaultBaseURL is used when Options.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// Options configure a Client. Zero values mean defaults.
type Options struct {
	provider.ClientOptions
	// MidConversationSystem keeps a system message that follows other
	// messages (a compaction summary) as a system message. The default,
	// false, sends it as a user message, because many local templates
	// (Qwen, Llama, Gemma) reject a non-leading system message with a 400.
	// OpenAI, DeepSeek and OpenRouter accept it.
	MidConversationSystem bool
	// IncludeUsage asks for the final usage chunk
	// (stream_options.include_usage); nil means true. Set it to false for
	// servers that reject stream_options. When it is on and a server
	// answers 400 naming stream_options, the request is retried once
	// without it and the client stops sending it (for the process).
	IncludeUsage *bool
	// TokenParam says how Request.MaxTokens is sent: TokenParamMaxTokens,
	// TokenParamMaxCompletionTokens, or TokenParamAuto (the default, also
	// for ""): max_completion_tokens for the model families that require it
	// (OpenAI's o-series and gpt-5), max_tokens otherwise, and on a 400
	// "unsupported parameter" naming the one sent, one retry with the
	// other, remembered for the model.
	TokenParam string
	// MaxCompletionTokens is the older switch for TokenParam =
	// TokenParamMaxCompletionTokens; it applies when TokenParam is empty.
	MaxCompletionTokens bool
}

// Values of Options.TokenParam (LLM_OPENAI_TOKEN_PARAM).
const (
	TokenParamAuto                = "auto"
	TokenParamMaxTokens           = "max_tokens"
	TokenParamMaxCompletionTokens = "max_completion_tokens"
)

// Client streams chat completions. It is safe for concurrent use.
type Client struct {
	opts Options
	url  string
	log  *slog.Logger
	t    *transport.Client

	tokenMode string // one of the TokenParam constants
	// learned maps a model name to the token parameter its endpoint
	// accepted after refusing the other one (auto mode).
	learned sync.Map
	// noStreamOptions is set once the endpoint refused stream_options.
	noStreamOptions atomic.Bool
}

var _ provider.Provider = (*Client)(nil)

// New returns a Client for opts.
func New(opts Options) *Client {
	base := strings.TrimRight(opts.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mode := opts.TokenParam
	switch {
	case mode == TokenParamMaxTokens, mode == TokenParamMaxCompletionTokens:
	case mode == "" && opts.MaxCompletionTokens:
		mode = TokenParamMaxCompletionTokens
	default:
		mode = TokenParamAuto
	}
	return &Client{
		opts:      opts,
		url:       base + "/chat/completions",
		log:       log,
		t:         transport.New(transport.Config{Provider: "openai", Options: opts.ClientOptions, DecodeError: decodeHTTPError}),
		tokenMode: mode,
	}
}

// Stream sends req and yields the normalized events of the answer: text
// and reasoning deltas as they arrive, then each complete tool call (only
// when the model stopped to use tools), then one EventDone. On failure the
// error is the last pair; events already yielded stay valid. Breaking out of
// the loop cancels the request. Retries happen only before the first byte.
func (c *Client) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Event, error] {
	return func(yield func(provider.Event, error) bool) {
		var hdr http.Header
		if c.opts.APIKey != "" {
			hdr = http.Header{"Authorization": {"Bearer " + c.opts.APIKey}}
		}
		v := c.variant(req.Model)
		var s *transport.Stream
		for {
			body, err := c.requestBody(req, v)
			if err != nil {
				yield(provider.Event{}, fmt.Errorf("openai: encoding request: %w", err))
				return
			}
			s, err = c.t.Post(ctx, c.url, hdr, body)
			if err == nil {
				break
			}
			var ae *provider.APIError
			if !errors.As(err, &ae) {
				// An APIError names the provider itself.
				yield(provider.Event{}, fmt.Errorf("openai: request: %w", err))
				return
			}
			if next, ok := c.adapt(ctx, ae, req, v); ok {
				v = next
				continue
			}
			if !ae.ContextLength && requestHasMedia(req) && provider.MediaRefusal(ae.Status, ae.Message) {
				ae.MediaUnsupported = true
			}
			yield(provider.Event{}, err)
			return
		}
		defer s.Close()
		c.decode(ctx, s, yield)
	}
}

// decode reads the SSE body of s and yields events.
func (c *Client) decode(ctx context.Context, s *transport.Stream, yield func(provider.Event, error) bool) {
	if ct := s.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		// Some gateways answer 200 with a JSON error instead of a stream.
		yield(provider.Event{}, c.jsonInsteadOfStream(ctx, s))
		return
	}
	r := sse.NewReader(s, 0)
	var d decoder
	sawDone := false
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			yield(provider.Event{}, c.readError(ctx, s, err))
			return
		}
		s.Touch()
		if ev.Data == "[DONE]" {
			sawDone = true
			break
		}
		evs, err := d.feed(ev.Data)
		for _, e := range evs {
			if !yield(e, nil) {
				return
			}
		}
		if err != nil {
			// A mid-stream APIError or a malformed chunk.
			var ae *provider.APIError
			if errors.As(err, &ae) {
				ae.Message = c.t.ScrubString(ae.Message)
			} else {
				err = fmt.Errorf("openai: stream: %w", err)
			}
			yield(provider.Event{}, c.t.Scrub(err))
			return
		}
	}
	evs, err := d.end(sawDone)
	if err != nil {
		yield(provider.Event{}, fmt.Errorf("openai: stream: %w", err))
		return
	}
	for _, e := range evs {
		if !yield(e, nil) {
			return
		}
	}
}

// jsonInsteadOfStream reports a 200 answer that is JSON, not SSE: its
// error if it carries one, else a truncated stream.
func (c *Client) jsonInsteadOfStream(ctx context.Context, s *transport.Stream) error {
	b, err := io.ReadAll(io.LimitReader(s, transport.MaxErrorBody))
	if err != nil {
		return c.readError(ctx, s, err)
	}
	if ae, ok := probeError(b).(*provider.APIError); ok {
		ae.Message = c.t.ScrubString(ae.Message)
		return ae
	}
	return fmt.Errorf("openai: stream: %w: got a JSON body instead of an event stream", provider.ErrTruncated)
}

// readError wraps a failure to read the body (see Stream.ReadError).
func (c *Client) readError(ctx context.Context, s *transport.Stream, err error) error {
	return fmt.Errorf("openai: stream: %w", s.ReadError(ctx, err))
}
