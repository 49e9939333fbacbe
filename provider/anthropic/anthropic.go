package anthropic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"strings"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/sse"
	"github.com/bobbinbot/bobbin/provider/internal/transport"
)

// Defaults for the zero values of Options.
const (
	DefaultBaseURL   = "https://api.anthropic.com"
	DefaultVersion   = "2023-06-01"
	DefaultMaxTokens = 4096
)

// Options configure a Client. Zero values mean the defaults.
type Options struct {
	provider.ClientOptions
	// Version is the anthropic-version header (default DefaultVersion).
	Version string
	// PromptCaching puts cache_control breakpoints on the system prompt,
	// the tool list and the conversation's last block; nil means on.
	PromptCaching *bool
	// DefaultMaxTokens is sent when a Request has no MaxTokens: the Messages
	// API requires max_tokens (default 4096).
	DefaultMaxTokens int
}

// Client streams from the Anthropic Messages API. It is safe for concurrent
// use.
type Client struct {
	url       string
	apiKey    string
	version   string
	caching   bool
	maxTokens int
	log       *slog.Logger
	tr        *transport.Client
}

var _ provider.Provider = (*Client)(nil)

// New returns a Client for opts.
func New(opts Options) *Client {
	base := strings.TrimRight(cmp.Or(opts.BaseURL, DefaultBaseURL), "/")
	// BaseURL is documented without /v1; accept it with /v1 as well.
	base = strings.TrimSuffix(base, "/v1")
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{
		url:       base + "/v1/messages",
		apiKey:    opts.APIKey,
		version:   cmp.Or(opts.Version, DefaultVersion),
		caching:   opts.PromptCaching == nil || *opts.PromptCaching,
		maxTokens: cmp.Or(opts.DefaultMaxTokens, DefaultMaxTokens),
		log:       log,
		tr: transport.New(transport.Config{
			Provider:    "anthropic",
			Options:     opts.ClientOptions,
			DecodeError: classifyBody,
		}),
	}
}

// Stream sends req and yields the normalized events of the answer. The
// request is retried only before the first byte; once an event has been
// yielded, a failure ends the stream with the error as the last pair.
// Breaking out of the loop cancels the request. A stream that ends without
// message_stop yields an error wrapping provider.ErrTruncated.
func (c *Client) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Event, error] {
	return func(yield func(provider.Event, error) bool) {
		body, err := buildRequest(req, c.maxTokens, c.caching, c.log).encode()
		if err != nil {
			yield(provider.Event{}, fmt.Errorf("anthropic: encoding request: %w", err))
			return
		}
		h := make(http.Header, 2)
		h.Set("x-api-key", c.apiKey)
		h.Set("anthropic-version", c.version)
		s, err := c.tr.Post(ctx, c.url, h, body)
		if err != nil {
			var ae *provider.APIError
			if errors.As(err, &ae) && !ae.ContextLength && requestHasMedia(req) && provider.MediaRefusal(ae.Status, ae.Message) {
				ae.MediaUnsupported = true
			}
			yield(provider.Event{}, c.wrap(err))
			return
		}
		defer s.Close()
		rd := sse.NewReader(s, 0)
		var d decoder
		for !d.done() {
			ev, err := rd.Next()
			if err == io.EOF {
				if err := d.end(); err != nil {
					yield(provider.Event{}, err)
				}
				return
			}
			if err != nil {
				yield(provider.Event{}, c.wrap(fmt.Errorf("reading stream: %w", s.ReadError(ctx, err))))
				return
			}
			// Only data events feed the idle watchdog; the SSE reader
			// never returns comments.
			s.Touch()
			err = d.feed(ev.Type, ev.Data)
			for _, e := range d.out {
				if !yield(e, nil) {
					return
				}
			}
			d.out = d.out[:0]
			if err != nil {
				yield(provider.Event{}, c.wrap(err))
				return
			}
		}
	}
}

// wrap prefixes err with the client name unless it already is an APIError,
// and makes sure the API key appears nowhere in it.
func (c *Client) wrap(err error) error {
	var ae *provider.APIError
	if errors.As(err, &ae) {
		ae.Message = c.tr.ScrubString(ae.Message)
		return c.tr.Scrub(err)
	}
	if !strings.HasPrefix(err.Error(), "anthropic: ") {
		err = fmt.Errorf("anthropic: %w", err)
	}
	return c.tr.Scrub(err)
}
