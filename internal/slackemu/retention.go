package slackemu

import (
	"slices"
	"time"
)

// Retention: what a long-lived server (the playground, or any process
// that keeps one running for hours) forgets so its memory stays bounded.
// Tests keep the defaults (everything kept) so they can inspect it all;
// the limits below are opt-in through Options, except the sweep of
// expired single-use credentials, which changes nothing a test can see
// within sweepGrace.

// sweepGrace is how long an expired trigger_id, response_url or socket
// ticket is still remembered, so that using it answers Slack's "expired"
// error rather than "invalid".
const sweepGrace = 10 * time.Minute

// sweepEvery is how many credentials are issued between two sweeps
// (amortized: each sweep walks the maps once).
const sweepEvery = 256

// closedViewsKept is the least number of closed views kept when the
// journal is bounded (Leaks and tests read them).
const closedViewsKept = 100

// issuedLocked counts an issued credential and sweeps the expired ones
// every sweepEvery issues.
func (s *Server) issuedLocked() {
	s.issued++
	if s.issued%sweepEvery != 0 {
		return
	}
	cutoff := time.Now().Add(-sweepGrace)
	for id, t := range s.triggers {
		if t.expires.Before(cutoff) {
			delete(s.triggers, id)
		}
	}
	for id, ru := range s.responses {
		if ru.expires.Before(cutoff) {
			delete(s.responses, id)
		}
	}
	for id, exp := range s.tickets {
		if exp.Before(cutoff) {
			delete(s.tickets, id)
		}
	}
}

// trimViewsLocked forgets the oldest closed views beyond the bound when
// the journal is bounded. Open views and published home views stay.
func (s *Server) trimViewsLocked() {
	limit := max(s.opts.JournalLimit, closedViewsKept)
	if s.opts.JournalLimit <= 0 || len(s.views) <= limit {
		return
	}
	var closed []*View
	for _, v := range s.views {
		if v.Closed {
			closed = append(closed, v)
		}
	}
	// View ids carry a sequence number: sort oldest first.
	slices.SortFunc(closed, func(a, b *View) int { return a.created.Compare(b.created) })
	for _, v := range closed[:max(0, min(len(closed), len(s.views)-limit))] {
		delete(s.views, v.ID)
	}
}

// trimChannelLocked drops a channel's oldest messages beyond
// Options.MessageLimit (0 keeps all).
func (s *Server) trimChannelLocked(channel string) {
	limit := s.opts.MessageLimit
	list := s.order[channel]
	if limit <= 0 || len(list) <= limit {
		return
	}
	n := len(list) - limit
	for _, m := range list[:n] {
		delete(s.msgs, msgKey(m.Channel, m.TS))
	}
	clear(list[:n])
	s.order[channel] = list[n:]
}

// trimHistoryLocked keeps a message's first version and its newest ones
// within Options.VersionLimit (0 keeps all), and its stream chunks within
// the same number.
func (s *Server) trimHistoryLocked(m *Message) {
	limit := s.opts.VersionLimit
	if limit <= 0 {
		return
	}
	if len(m.History) > limit {
		keep := max(limit-1, 1)
		h := make([]Version, 0, keep+1)
		h = append(h, m.History[0])
		h = append(h, m.History[len(m.History)-keep:]...)
		m.History = h
	}
	if len(m.Chunks) > limit {
		m.Chunks = slices.Clone(m.Chunks[len(m.Chunks)-limit:])
	}
}

// capped appends v to a log bounded by Options.JournalLimit.
func cappedAppend[T any](s *Server, list []T, v T) []T {
	return appendCapped(list, v, s.opts.JournalLimit)
}

// parkLocked parks an envelope until a socket connects. With a bounded
// journal at most JournalLimit wait; the oldest beyond it fail as Slack
// gives up on an app that is not connected.
func (s *Server) parkLocked(e *Envelope) {
	if slices.Contains(s.pending, e) {
		return
	}
	s.pending = append(s.pending, e)
	limit := s.opts.JournalLimit
	for limit > 0 && len(s.pending) > limit {
		old := s.pending[0]
		s.pending[0] = nil
		s.pending = s.pending[1:]
		if !old.Acked && !old.Failed {
			s.failLocked(old, "no_socket")
		}
	}
}
