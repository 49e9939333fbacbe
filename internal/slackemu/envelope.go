package slackemu

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gorilla/websocket"
)

// Envelope types.
const (
	TypeEventsAPI     = "events_api"
	TypeInteractive   = "interactive"
	TypeSlashCommands = "slash_commands"
)

// Envelope is one Socket Mode envelope and its delivery record.
type Envelope struct {
	ID                     string
	Type                   string // events_api, interactive, slash_commands
	Team                   string
	EventID                string // events_api only
	EventType              string // inner event type or interactive payload type
	AcceptsResponsePayload bool
	Payload                json.RawMessage

	Created time.Time
	// Deliveries lists every write of this envelope: retry attempt, reason
	// and socket.
	Deliveries []Delivery
	Acked      bool
	AckedAt    time.Time
	AckPayload json.RawMessage
	// AckLatency is from the last delivery to the ack.
	AckLatency time.Duration
	Late       bool // acked after its deadline
	// Failed is set when Slack gives up: an interactive/slash envelope not
	// acked in time (the person sees an error) or an event whose retries
	// ran out.
	Failed bool

	attempt  int       // current retry_attempt
	deadline time.Time // of the current delivery
	gen      int       // invalidates stale deadline timers
	result   chan struct{}
}

// Delivery is one write of an envelope to a socket.
type Delivery struct {
	Time         time.Time
	Conn         string
	RetryAttempt int
	RetryReason  string
}

// AckRecord is one ack frame received.
type AckRecord struct {
	EnvelopeID string
	Time       time.Time
	Conn       string
	Latency    time.Duration // since the envelope's last delivery
	Bytes      int
	Payload    json.RawMessage
	Duplicate  bool   // the envelope was already acked
	Unknown    bool   // no such envelope
	Dropped    string // "too_large" or "lost" (AckDropRate): not applied
}

// Failure is a user-visible failure: an interaction Slack gave up on.
type Failure struct {
	Time       time.Time
	EnvelopeID string
	Type       string
	Team       string
	User       string
	Reason     string // "ack_timeout", "retries_exhausted", "no_socket"
}

// AckStats summarises ack behaviour.
type AckStats struct {
	Envelopes    int
	Acked        int
	Late         int
	Unacked      int
	Failed       int
	Redeliveries int // timeout retries written
	Duplicates   int // acks for already-acked envelopes
	Latencies    []time.Duration
	P50, P99     time.Duration
	Max          time.Duration
}

type envelopeFrame struct {
	EnvelopeID             string          `json:"envelope_id"`
	Payload                json.RawMessage `json:"payload"`
	Type                   string          `json:"type"`
	AcceptsResponsePayload bool            `json:"accepts_response_payload"`
	RetryAttempt           *int            `json:"retry_attempt,omitempty"`
	RetryReason            *string         `json:"retry_reason,omitempty"`
}

// newEnvelopeLocked registers an envelope and sends it (or queues it until
// a socket connects).
func (s *Server) newEnvelopeLocked(typ, team string, payload any, accepts bool) *Envelope {
	data, err := json.Marshal(payload)
	if err != nil {
		panic(fmt.Sprintf("slackemu: marshal payload: %v", err))
	}
	e := &Envelope{ID: s.newUUIDLocked(), Type: typ, Team: team, AcceptsResponsePayload: accepts, Payload: data, Created: time.Now(), result: make(chan struct{})}
	var head struct {
		Type    string `json:"type"`
		EventID string `json:"event_id"`
		Event   struct {
			Type string `json:"type"`
		} `json:"event"`
	}
	_ = json.Unmarshal(data, &head)
	e.EventID = head.EventID
	e.EventType = head.Type
	if head.Event.Type != "" {
		e.EventType = head.Event.Type
	}
	s.envelopes[e.ID] = e
	s.envOrder = append(s.envOrder, e)
	s.trimEnvelopesLocked()
	s.sendEnvelopeLocked(e, 0, "")
	return e
}

// trimEnvelopesLocked forgets the oldest settled (acked or failed)
// envelopes beyond Options.JournalLimit; unsettled ones are kept.
func (s *Server) trimEnvelopesLocked() {
	limit := s.opts.JournalLimit
	if limit <= 0 || len(s.envOrder) <= limit {
		return
	}
	kept := s.envOrder[:0]
	excess := len(s.envOrder) - limit
	for _, e := range s.envOrder {
		if excess > 0 && (e.Acked || e.Failed) {
			delete(s.envelopes, e.ID)
			delete(s.inter, e.ID)
			excess--
			continue
		}
		kept = append(kept, e)
	}
	clear(s.envOrder[len(kept):])
	s.envOrder = kept
}

// sendEnvelopeLocked writes e to a random live socket with the given retry
// fields, or parks it until one connects, and arms its deadline.
func (s *Server) sendEnvelopeLocked(e *Envelope, attempt int, reason string) {
	e.attempt = attempt
	c := s.pickConnLocked()
	if c == nil {
		s.parkLocked(e)
		s.changedLocked()
		return
	}
	f := envelopeFrame{EnvelopeID: e.ID, Payload: e.Payload, Type: e.Type, AcceptsResponsePayload: e.AcceptsResponsePayload}
	if e.Type == TypeEventsAPI {
		f.RetryAttempt, f.RetryReason = &attempt, &reason
	}
	data, _ := json.Marshal(f)
	now := time.Now()
	e.Deliveries = append(e.Deliveries, Delivery{Time: now, Conn: c.id, RetryAttempt: attempt, RetryReason: reason})
	c.info.Delivered++
	if !c.send(outFrame{typ: websocket.TextMessage, data: data}) {
		s.log.Debug("slackemu: socket queue full, envelope lost", "conn", c.id, "envelope", e.ID)
	}
	e.gen++
	gen := e.gen
	e.deadline = now.Add(s.opts.AckDeadline)
	s.afterLocked(s.opts.AckDeadline, func() { s.deadlinePassed(e, gen) })
	s.changedLocked()
}

// flushPendingLocked sends the envelopes parked while no socket was open.
func (s *Server) flushPendingLocked() {
	p := s.pending
	s.pending = nil
	for _, e := range p {
		if !e.Acked && !e.Failed {
			s.sendEnvelopeLocked(e, e.attempt, retryReason(e.attempt))
		}
	}
}

func retryReason(attempt int) string {
	if attempt == 0 {
		return ""
	}
	return "timeout"
}

// deadlinePassed handles an envelope not acked in time.
func (s *Server) deadlinePassed(e *Envelope, gen int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.gen != gen || e.Acked || e.Failed {
		return
	}
	if e.Type != TypeEventsAPI {
		// Slack shows the person an error; no redelivery.
		s.failLocked(e, "ack_timeout")
		return
	}
	next := e.attempt + 1
	if next > len(s.opts.RetryDelays) {
		s.failLocked(e, "retries_exhausted")
		return
	}
	delay := s.opts.RetryDelays[next-1]
	e.gen++
	gen = e.gen
	s.afterLocked(delay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if e.gen != gen || e.Acked || e.Failed {
			return
		}
		s.sendEnvelopeLocked(e, next, "timeout")
	})
}

func (s *Server) failLocked(e *Envelope, reason string) {
	e.Failed = true
	var who struct {
		UserID string `json:"user_id"`
		User   struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	_ = json.Unmarshal(e.Payload, &who)
	user := who.UserID
	if user == "" {
		user = who.User.ID
	}
	s.failures = cappedAppend(s, s.failures, Failure{Time: time.Now(), EnvelopeID: e.ID, Type: e.Type, Team: e.Team, User: user, Reason: reason})
	s.signalLocked(e)
	s.changedLocked()
}

func (s *Server) signalLocked(e *Envelope) {
	select {
	case <-e.result:
	default:
		close(e.result)
	}
}

// applyAckLocked records an ack and applies its payload.
func (s *Server) applyAckLocked(connID, id string, payload json.RawMessage, now time.Time, size int) {
	rec := AckRecord{EnvelopeID: id, Time: now, Conn: connID, Bytes: size, Payload: payload}
	e := s.envelopes[id]
	switch {
	case e == nil:
		rec.Unknown = true
	case e.Acked:
		rec.Duplicate = true
	default:
		if len(e.Deliveries) > 0 {
			rec.Latency = now.Sub(e.Deliveries[len(e.Deliveries)-1].Time)
		}
		e.Acked, e.AckedAt, e.AckPayload, e.AckLatency = true, now, payload, rec.Latency
		e.Late = now.After(e.deadline) || e.Failed
		if !e.Failed {
			s.applyAckPayloadLocked(e, payload)
		}
		s.signalLocked(e)
	}
	s.ackLogLocked(rec)
	s.changedLocked()
}

// Envelopes returns copies of every envelope, in creation order.
func (s *Server) Envelopes() []Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Envelope, 0, len(s.envOrder))
	for _, e := range s.envOrder {
		out = append(out, copyEnvelope(e))
	}
	return out
}

// Envelope returns one envelope by id.
func (s *Server) Envelope(id string) (Envelope, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envelopes[id]
	if e == nil {
		return Envelope{}, false
	}
	return copyEnvelope(e), true
}

func copyEnvelope(e *Envelope) Envelope {
	c := *e
	c.Deliveries = slices.Clone(e.Deliveries)
	c.result = nil
	return c
}

// Acks returns every ack frame received, in order.
func (s *Server) Acks() []AckRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.acks)
}

// Failures returns the user-visible failures so far.
func (s *Server) Failures() []Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.failures)
}

// AckStats summarises envelope acks; latencies are per acked envelope,
// from its last delivery.
func (s *Server) AckStats() AckStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st AckStats
	for _, e := range s.envOrder {
		st.Envelopes++
		for _, d := range e.Deliveries {
			if d.RetryReason == "timeout" {
				st.Redeliveries++
			}
		}
		switch {
		case e.Acked:
			st.Acked++
			st.Latencies = append(st.Latencies, e.AckLatency)
			if e.Late {
				st.Late++
			}
		default:
			st.Unacked++
		}
		if e.Failed {
			st.Failed++
		}
	}
	for _, a := range s.acks {
		if a.Duplicate {
			st.Duplicates++
		}
	}
	st.P50, st.P99, st.Max = percentiles(st.Latencies)
	return st
}

// percentiles returns p50, p99 and the maximum (nearest rank).
func percentiles(ds []time.Duration) (p50, p99, maxD time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return rank(0.50), rank(0.99), s[len(s)-1]
}

// WaitAck waits until the envelope is acked (nil) or Slack gave up on it
// (an error), or ctx ends.
func (s *Server) WaitAck(ctx context.Context, envelopeID string) (Envelope, error) {
	s.mu.Lock()
	e := s.envelopes[envelopeID]
	var done chan struct{}
	if e != nil {
		done = e.result // Redeliver replaces it
	}
	s.mu.Unlock()
	if e == nil {
		return Envelope{}, fmt.Errorf("slackemu: no envelope %s", envelopeID)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return Envelope{}, fmt.Errorf("slackemu: waiting for ack of %s: %w", envelopeID, context.Cause(ctx))
	}
	got, _ := s.Envelope(envelopeID)
	if got.Failed && !got.Acked {
		return got, fmt.Errorf("slackemu: envelope %s not acked in time", envelopeID)
	}
	return got, nil
}

// Redeliver writes an existing envelope again with the same envelope_id
// and retry_attempt 0, as Slack sometimes does; its ack tracking restarts.
func (s *Server) Redeliver(envelopeID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envelopes[envelopeID]
	if e == nil {
		return fmt.Errorf("slackemu: no envelope %s", envelopeID)
	}
	e.Acked, e.Failed = false, false
	e.result = make(chan struct{})
	s.sendEnvelopeLocked(e, 0, "")
	return nil
}

// Resend delivers an events_api envelope's event again in a new envelope
// under a new event_id (the same message, as Slack does on some retries).
// It returns the new envelope and event ids.
func (s *Server) Resend(envelopeID string) (newEnvelopeID, newEventID string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envelopes[envelopeID]
	if e == nil || e.Type != TypeEventsAPI {
		return "", "", fmt.Errorf("slackemu: no events_api envelope %s", envelopeID)
	}
	var p map[string]any
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		return "", "", err
	}
	newEventID = s.newIDLocked("Ev")
	p["event_id"] = newEventID
	ne := s.newEnvelopeLocked(TypeEventsAPI, e.Team, p, false)
	return ne.ID, newEventID, nil
}

// DeliverEnvelope sends an arbitrary envelope (payload is marshalled as
// is) and returns its id: for hand-made or malformed payloads.
func (s *Server) DeliverEnvelope(typ, team string, payload any, acceptsResponsePayload bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newEnvelopeLocked(typ, team, payload, acceptsResponsePayload).ID
}
