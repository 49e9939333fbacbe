package playground

import (
	"fmt"
	"net/http"
	"time"
)

// Live updates: GET /api/events is a Server-Sent Events stream that says
// "change" whenever the emulator's state changed (a message posted or
// edited, a stream appended to, an ephemeral, a modal, a Web API call),
// at most every changeEvery. The page then reads /api/view again, so an
// event carries no data and a missed one loses nothing.

const (
	changeEvery = 100 * time.Millisecond
	keepAlive   = 15 * time.Second
)

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		http.Error(w, "too many open pages", http.StatusServiceUnavailable)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	// Take the change channel before the first event: a change between
	// the page's first fetch and the loop must not be lost.
	changed := s.slack.Changed()
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, "retry: 1000\n\nevent: change\ndata: {}\n\n")
	fl.Flush()

	ping := time.NewTicker(keepAlive)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-ping.C:
			_, _ = fmt.Fprint(w, ": keep-alive\n\n")
		case <-changed:
			// The next channel is taken now, so changes during the
			// coalescing pause below are announced after it.
			changed = s.slack.Changed()
			_, _ = fmt.Fprint(w, "event: change\ndata: {}\n\n")
		}
		fl.Flush()
		// Coalesce bursts (a stream's appends, a call and its message).
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-time.After(changeEvery):
		}
	}
}
