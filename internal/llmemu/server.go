package llmemu

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned by the Wait methods once the server is closed.
var ErrClosed = errors.New("llmemu: server closed")

// maxBody caps a request body; larger bodies get 413.
const maxBody = 32 << 20

// Options configures a Server. The zero value is usable.
type Options struct {
	// APIKey, when set, is required: OpenAI requests must send
	// "Authorization: Bearer <key>", Anthropic requests "x-api-key: <key>".
	// Others get 401 with the protocol's error JSON. Empty accepts anything.
	APIKey string
	// TokenInterval is the pause before each delta; 0 sends as fast as
	// possible. E2E tests typically use 5–20 ms. See SetTokenInterval.
	TokenInterval time.Duration
	// Respond decides replies when the queue is empty (see SetResponder);
	// nil means DefaultReply.
	Respond func(Recorded) Reply
	// ContextWindow, when positive, answers 400 with the protocol's
	// context-length error when a request's estimated input tokens
	// (see Recorded.InputTokens) exceed it.
	ContextWindow int
	// Reject makes the server refuse request features as real endpoints
	// do, with their own error texts (see Rejects and SetReject).
	Reject Rejects
}

// Server is a fake model server on a loopback address. It is safe for
// concurrent use. Close it when done.
type Server struct {
	hs            *httptest.Server
	key           string
	contextWindow int
	interval      atomic.Int64 // time.Duration
	done          chan struct{}
	closeOnce     sync.Once

	mu       sync.Mutex
	queue    []Reply
	respond  func(Recorded) Reply
	failN    int
	failErr  ErrorReply
	reject   Rejects
	gate     *gate
	reqs     []*Recorded
	inFlight int
	held     int
	changed  chan struct{} // closed and replaced on every state change
}

type gate struct {
	after int
	ch    chan struct{}
	once  sync.Once
}

// New starts a Server on 127.0.0.1 with an ephemeral port.
func New(opts Options) *Server {
	s := &Server{
		key:           opts.APIKey,
		contextWindow: opts.ContextWindow,
		respond:       opts.Respond,
		reject:        opts.Reject,
		done:          make(chan struct{}),
		changed:       make(chan struct{}),
	}
	s.interval.Store(int64(opts.TokenInterval))
	s.hs = httptest.NewServer(s)
	return s
}

// URL is the server's root, e.g. http://127.0.0.1:41234. The OpenAI base URL
// is URL()+"/v1"; the Anthropic base URL is URL() itself.
func (s *Server) URL() string { return s.hs.URL }

// Close stops the server. Parked, paced and delayed streams end at once;
// Close returns after every handler has returned. It may be called more than
// once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.hs.Close()
	})
}

// Enqueue appends replies to the FIFO queue; each request takes the next
// one (after faults armed by FailNext).
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Pending returns the number of queued replies not yet served.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// SetResponder sets the function that decides replies when the queue is
// empty; nil restores DefaultReply. It is called concurrently from request
// handlers and may block (the client then waits for its first byte).
func (s *Server) SetResponder(fn func(Recorded) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respond = fn
}

// SetTokenInterval changes the pause before each delta, for running streams
// too.
func (s *Server) SetTokenInterval(d time.Duration) { s.interval.Store(int64(d)) }

// FailNext answers the next n requests that pass the key and validation
// checks with e instead of their scripted reply (the queue is not
// consumed). It replaces faults still pending; n = 0 disarms.
func (s *Server) FailNext(n int, e ErrorReply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failN, s.failErr = n, e
}

// Hold parks every stream once it has sent afterDeltas deltas (streams
// already past that point park before their next delta) until release is
// called, the client goes away, or the server closes. The opening event is
// sent before any delta, so a parked stream has already returned 200.
// A later Hold replaces this one for streams not yet parked. release may
// be called more than once.
func (s *Server) Hold(afterDeltas int) (release func()) {
	g := &gate{after: afterDeltas, ch: make(chan struct{})}
	s.mu.Lock()
	s.gate = g
	s.notifyLocked()
	s.mu.Unlock()
	return func() {
		g.once.Do(func() {
			s.mu.Lock()
			if s.gate == g {
				s.gate = nil
			}
			close(g.ch)
			s.notifyLocked()
			s.mu.Unlock()
		})
	}
}

// Held returns the number of streams parked by Hold right now.
func (s *Server) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// InFlight returns the number of requests being handled right now: open
// streams, including parked ones, and replies still in their Delay.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Recorded, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = *r
	}
	return out
}

// WaitRequests blocks until at least n requests have been received and
// returns them all, or fails when ctx ends or the server closes.
func (s *Server) WaitRequests(ctx context.Context, n int) ([]Recorded, error) {
	if err := s.wait(ctx, func() bool { return len(s.reqs) >= n }); err != nil {
		return nil, err
	}
	return s.Requests(), nil
}

// WaitHeld blocks until at least n streams are parked by Hold.
func (s *Server) WaitHeld(ctx context.Context, n int) error {
	return s.wait(ctx, func() bool { return s.held >= n })
}

// WaitInFlight blocks until exactly n requests are being handled (use 0 to
// wait for every stream to end, e.g. after a client was killed).
func (s *Server) WaitInFlight(ctx context.Context, n int) error {
	return s.wait(ctx, func() bool { return s.inFlight == n })
}

// wait blocks until cond, evaluated under s.mu, holds.
func (s *Server) wait(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ok, ch := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return ErrClosed
		}
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) addInFlight(d int) {
	s.mu.Lock()
	s.inFlight += d
	s.notifyLocked()
	s.mu.Unlock()
}

// waitGate parks a stream that has sent sent deltas while a Hold applies.
// It reports false when the stream must stop.
func (s *Server) waitGate(ctx context.Context, sent int) bool {
	for {
		s.mu.Lock()
		g := s.gate
		if g == nil || sent < g.after {
			s.mu.Unlock()
			return true
		}
		s.held++
		s.notifyLocked()
		s.mu.Unlock()
		released := false
		select {
		case <-g.ch:
			released = true
		case <-ctx.Done():
		case <-s.done:
		}
		s.mu.Lock()
		s.held--
		s.notifyLocked()
		s.mu.Unlock()
		if !released {
			return false
		}
	}
}

// sleep waits d; false when ctx ends or the server closes first.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.done:
	}
	return false
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.addInFlight(1)
	defer s.addInFlight(-1)

	rec := &Recorded{Method: r.Method, Path: r.URL.Path, Header: redact(r.Header)}
	var countTokens bool
	switch r.URL.Path {
	case "/v1/chat/completions", "/chat/completions":
		rec.Protocol = OpenAI
	case "/v1/messages":
		rec.Protocol = Anthropic
	case "/v1/messages/count_tokens":
		rec.Protocol, countTokens = Anthropic, true
	}
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	rec.Body = body
	isJSON := decodeBody(rec)
	s.record(rec)

	fail := func(e ErrorReply) {
		s.setStatus(rec, e.Status)
		writeHTTPError(w, rec.Protocol, e)
	}
	switch {
	case rec.Protocol == "":
		fail(ErrorReply{Status: http.StatusNotFound, Message: fmt.Sprintf("llmemu: no route for %s %s", r.Method, r.URL.Path)})
		return
	case r.Method != http.MethodPost:
		fail(ErrorReply{Status: http.StatusMethodNotAllowed, Message: "llmemu: use POST"})
		return
	case !s.authorized(rec.Protocol, r.Header):
		fail(ErrorReply{Status: http.StatusUnauthorized})
		return
	case readErr != nil:
		fail(ErrorReply{Status: http.StatusRequestEntityTooLarge, Message: "llmemu: request body: " + readErr.Error()})
		return
	}
	if msg := validate(rec, isJSON, countTokens); msg != "" {
		fail(ErrorReply{Status: http.StatusBadRequest, Message: msg})
		return
	}
	if e, refused := s.refusal(rec); refused && !countTokens {
		fail(e)
		return
	}
	input := rec.InputTokens()
	if countTokens {
		s.setStatus(rec, http.StatusOK)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"input_tokens":%d}`, input)
		return
	}
	if s.contextWindow > 0 && input > s.contextWindow {
		fail(contextLengthError(rec.Protocol, input, s.contextWindow))
		return
	}

	reply := s.next(*rec)
	if !s.sleep(r.Context(), reply.Delay) {
		return
	}
	if e := reply.Error; e != nil && !e.MidStream {
		fail(*e)
		return
	}
	s.setStatus(rec, http.StatusOK)
	st := newStreamer(s, w)
	switch rec.Protocol {
	case OpenAI:
		s.streamOpenAI(r.Context(), st, rec, reply)
	case Anthropic:
		s.streamAnthropic(r.Context(), st, rec, reply)
	}
	if st.aborted {
		// Reset the connection: the client sees an unexpected EOF.
		panic(http.ErrAbortHandler)
	}
}

func (s *Server) record(rec *Recorded) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec.Seq = len(s.reqs) + 1
	s.reqs = append(s.reqs, rec)
	s.notifyLocked()
}

func (s *Server) setStatus(rec *Recorded, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec.Status = cmp.Or(status, http.StatusInternalServerError)
	s.notifyLocked()
}

// next picks the reply for a request: armed fault, queue, responder, default.
func (s *Server) next(rec Recorded) Reply {
	s.mu.Lock()
	if s.failN > 0 {
		s.failN--
		e := s.failErr
		s.mu.Unlock()
		return Reply{Error: &e}
	}
	if len(s.queue) > 0 {
		r := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		return r
	}
	fn := s.respond
	s.mu.Unlock()
	if fn != nil {
		return fn(rec)
	}
	return DefaultReply(rec)
}

func (s *Server) authorized(p Protocol, h http.Header) bool {
	if s.key == "" {
		return true
	}
	if p == Anthropic {
		return h.Get("X-Api-Key") == s.key
	}
	return h.Get("Authorization") == "Bearer "+s.key
}

// validate returns the 400 message for a request the real API would reject,
// or "".
func validate(rec *Recorded, isJSON, countTokens bool) string {
	switch {
	case !isJSON:
		return "llmemu: the request body is not a JSON object"
	case rec.Protocol == Anthropic && rec.Header.Get("Anthropic-Version") == "":
		return "anthropic-version: header is required"
	case rec.Model == "":
		if rec.Protocol == Anthropic {
			return "model: Field required"
		}
		return "you must provide a model parameter"
	case !nonEmptyArray(rec.JSON["messages"]):
		if rec.Protocol == Anthropic {
			return "messages: Field required"
		}
		return "'messages' is a required property"
	case countTokens:
		return ""
	case rec.Protocol == Anthropic && rec.MaxTokens <= 0:
		return "max_tokens: Field required"
	case !rec.Stream:
		return "llmemu: only streaming requests (\"stream\": true) are supported"
	}
	return ""
}

func nonEmptyArray(v any) bool {
	a, ok := v.([]any)
	return ok && len(a) > 0
}
