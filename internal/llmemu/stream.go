package llmemu

import (
	"context"
	"net/http"
	"time"
)

// writeTimeout bounds each write so a client that stops reading cannot pin
// a handler (and so Close) forever.
const writeTimeout = 10 * time.Second

// streamer writes one SSE response: it flushes after every event, stops for
// good after a failed write, and applies Hold and the token pace before
// each delta.
type streamer struct {
	s       *Server
	w       http.ResponseWriter
	rc      *http.ResponseController
	buf     []byte
	events  int  // events written, drives Anthropic's JSON padding
	sent    int  // deltas sent
	dead    bool // a write failed or the client went away
	aborted bool // the reply asked for a connection reset
}

func newStreamer(s *Server, w http.ResponseWriter) *streamer {
	return &streamer{s: s, w: w, rc: http.NewResponseController(w)}
}

// start writes the status line and SSE headers.
func (st *streamer) start(requestIDHeader, requestID string) {
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set(requestIDHeader, requestID)
	st.w.WriteHeader(http.StatusOK)
	st.flush()
}

// send writes one event (event may be "" for a data-only event). pad
// trailing spaces are added after the data, as Anthropic does.
func (st *streamer) send(event string, data []byte, pad int) bool {
	if st.dead {
		return false
	}
	b := st.buf[:0]
	if event != "" {
		b = append(b, "event: "...)
		b = append(b, event...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	for range pad {
		b = append(b, ' ')
	}
	b = append(b, "\n\n"...)
	st.buf = b
	_ = st.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := st.w.Write(b); err != nil {
		st.dead = true
		return false
	}
	st.events++
	return st.flush()
}

func (st *streamer) flush() bool {
	if err := st.rc.Flush(); err != nil {
		st.dead = true
	}
	return !st.dead
}

// pace runs before each delta: it parks the stream while a Hold applies,
// then waits the token interval. False means stop.
func (st *streamer) pace(ctx context.Context) bool {
	if st.dead {
		return false
	}
	if !st.s.waitGate(ctx, st.sent) || !st.s.sleep(ctx, time.Duration(st.s.interval.Load())) {
		st.dead = true
	}
	return !st.dead
}

// cutIndex is the delta count at which the reply is cut short, or -1.
func cutIndex(r Reply) int {
	if r.Truncate || r.Abort || (r.Error != nil && r.Error.MidStream) {
		return max(r.CutAfter, 0)
	}
	return -1
}

// cut ends a stream early as the reply asks: a mid-stream error event, a
// connection reset, or a plain end of body.
func (st *streamer) cut(r Reply, errorEvent string, errorData []byte, pad int) {
	if r.Error != nil && r.Error.MidStream {
		st.send(errorEvent, errorData, pad)
	}
	st.aborted = r.Abort
}

// limitSteps applies the request's max tokens (one delta = one token).
func limitSteps(steps []step, maxTokens int) ([]step, bool) {
	if maxTokens > 0 && len(steps) > maxTokens {
		return steps[:maxTokens], true
	}
	return steps, false
}

// usageFor is the reply's usage, or the emulator's estimate.
func usageFor(r Reply, rec *Recorded, outputTokens int) Usage {
	if r.Usage != nil {
		return *r.Usage
	}
	return Usage{InputTokens: rec.InputTokens(), OutputTokens: outputTokens}
}
