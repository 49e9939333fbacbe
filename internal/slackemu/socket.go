package slackemu

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// ConnInfo describes one Socket Mode connection.
type ConnInfo struct {
	ID        string
	Remote    string // client address (host:port)
	OpenedAt  time.Time
	Hello     bool // hello was sent
	Draining  bool // a disconnect was sent; no new envelopes go there
	Pinging   bool // the server still sends PINGs
	Blackhole bool // half-open: frames to and from it are lost
	PingsSent int
	Pongs     int
	Delivered int // envelopes written to it
	Acks      int // acks read from it
	ClosedAt  time.Time
}

// ConnStats counts Socket Mode connections over the server's life.
type ConnStats struct {
	Opened   int // sockets that got hello
	Rejected int // sockets turned away with too_many_websockets
	MaxLive  int // most sockets with hello open at once
}

// conn is one live WebSocket.
type conn struct {
	id     string
	ws     *websocket.Conn
	out    chan outFrame
	done   chan struct{} // closed when the connection is gone
	wg     sync.WaitGroup
	closeO sync.Once

	// guarded by Server.mu
	info ConnInfo
}

type outFrame struct {
	typ   int // websocket.TextMessage, BinaryMessage, CloseMessage
	data  []byte
	after func() // runs after the write (under no lock)
}

// kill closes the socket abruptly.
func (c *conn) kill() {
	c.closeO.Do(func() {
		close(c.done)
		_ = c.ws.UnderlyingConn().Close()
	})
}

func (c *conn) wait() { c.wg.Wait() }

// send queues a frame; false if the queue is full or the conn is gone.
func (c *conn) send(f outFrame) bool {
	select {
	case <-c.done:
		return false
	default:
	}
	select {
	case c.out <- f:
		return true
	default:
		return false
	}
}

func (s *Server) connectionsOpen(r *request) (map[string]any, error) {
	ticket := s.newUUIDLocked()
	s.tickets[ticket] = time.Now().Add(s.opts.TicketTTL)
	s.issuedLocked()
	host := strings.TrimPrefix(s.base, "http://")
	return map[string]any{"url": fmt.Sprintf("ws://%s/link/?ticket=%s&app_id=%s", host, ticket, s.opts.AppID)}, nil
}

func (s *Server) handleLink(w http.ResponseWriter, hr *http.Request) {
	if !s.enter() {
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	defer s.tasks.Done()
	ticket := hr.URL.Query().Get("ticket")
	s.mu.Lock()
	exp, ok := s.tickets[ticket]
	delete(s.tickets, ticket)
	closed := s.closed
	s.mu.Unlock()
	if closed || !ok || time.Now().After(exp) {
		http.Error(w, "invalid or used ticket", http.StatusUnauthorized)
		return
	}
	// slack-go sends Origin: https://api.slack.com; gorilla's default check
	// would refuse it.
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }, WriteBufferSize: 32 * 1024}
	ws, err := up.Upgrade(w, hr, nil)
	if err != nil {
		return
	}
	c := &conn{ws: ws, out: make(chan outFrame, 4096), done: make(chan struct{})}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ws.Close()
		return
	}
	s.connSeq++
	c.id = fmt.Sprintf("ws%d", s.connSeq)
	c.info = ConnInfo{ID: c.id, Remote: hr.RemoteAddr, OpenedAt: time.Now(), Pinging: true}
	live := s.liveCountLocked()
	tooMany := live >= s.opts.MaxSockets
	s.conns[c.id] = c
	c.wg.Add(2)
	go s.writeLoop(c)
	go s.readLoop(c)
	if tooMany {
		c.info.Draining = true
		frame, _ := json.Marshal(map[string]any{
			"type": "disconnect", "reason": "too_many_websockets", "num_connections": live,
			"debug_info": map[string]any{"host": "applink-emu"}, "connection_info": map[string]any{"app_id": s.opts.AppID},
		})
		c.send(outFrame{typ: websocket.TextMessage, data: frame})
		s.closeLaterLocked(c, time.Second)
		s.connStats.Rejected++
		s.log.Debug("slackemu: too many websockets", "conn", c.id, "live", live)
	} else {
		hello, _ := json.Marshal(map[string]any{
			"type": "hello", "num_connections": live + 1,
			"debug_info":      map[string]any{"host": "applink-emu-" + c.id, "build_number": 10, "approximate_connection_time": 18060},
			"connection_info": map[string]any{"app_id": s.opts.AppID},
		})
		c.info.Hello = true
		s.connStats.Opened++
		s.connStats.MaxLive = max(s.connStats.MaxLive, live+1)
		c.send(outFrame{typ: websocket.TextMessage, data: hello})
		s.flushPendingLocked()
		s.log.Debug("slackemu: socket open", "conn", c.id)
	}
	s.changedLocked()
	s.mu.Unlock()
}

// liveCountLocked counts open sockets that said hello.
func (s *Server) liveCountLocked() int {
	n := 0
	for _, c := range s.conns {
		if c.info.Hello {
			n++
		}
	}
	return n
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.conns[c.id]; ok {
		delete(s.conns, c.id)
		c.info.ClosedAt = time.Now()
		s.connLog = cappedAppend(s, s.connLog, c.info)
		s.log.Debug("slackemu: socket closed", "conn", c.id)
		s.changedLocked()
	}
}

// closeLaterLocked closes c after d unless it is gone by then.
func (s *Server) closeLaterLocked(c *conn, d time.Duration) {
	s.afterLocked(d, func() {
		c.send(outFrame{typ: websocket.CloseMessage, data: websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")})
		select {
		case <-c.done:
		case <-time.After(200 * time.Millisecond):
			c.kill()
		}
	})
}

func (s *Server) writeLoop(c *conn) {
	defer c.wg.Done()
	defer c.kill()
	tick := time.NewTicker(s.opts.PingInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case f := <-c.out:
			s.mu.Lock()
			hole := c.info.Blackhole
			s.mu.Unlock()
			if !hole {
				_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if err := c.ws.WriteMessage(f.typ, f.data); err != nil {
					return
				}
			}
			if f.after != nil {
				f.after()
			}
			if f.typ == websocket.CloseMessage {
				// Give the peer a moment to answer, then drop.
				select {
				case <-c.done:
				case <-time.After(time.Second):
				}
				return
			}
		case <-tick.C:
			s.mu.Lock()
			ping := c.info.Pinging && !c.info.Blackhole
			if ping {
				c.info.PingsSent++
			}
			s.mu.Unlock()
			if ping {
				if err := c.ws.WriteControl(websocket.PingMessage, []byte("emu"), time.Now().Add(5*time.Second)); err != nil {
					return
				}
			}
		}
	}
}

func (s *Server) readLoop(c *conn) {
	defer c.wg.Done()
	defer s.removeConn(c)
	defer c.kill()
	c.ws.SetPongHandler(func(string) error {
		s.mu.Lock()
		c.info.Pongs++
		s.mu.Unlock()
		return nil
	})
	// Answer client pings unless half-open.
	c.ws.SetPingHandler(func(data string) error {
		s.mu.Lock()
		hole := c.info.Blackhole
		s.mu.Unlock()
		if hole {
			return nil
		}
		err := c.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(5*time.Second))
		if errors.Is(err, websocket.ErrCloseSent) {
			return nil
		}
		return err
	})
	c.ws.SetReadLimit(32 << 20)
	for {
		typ, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		s.handleFrame(c, typ, data)
	}
}

// handleFrame processes one frame from the client: an ack.
func (s *Server) handleFrame(c *conn, typ int, data []byte) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.info.Blackhole {
		return
	}
	var ack struct {
		EnvelopeID string          `json:"envelope_id"`
		Payload    json.RawMessage `json:"payload"`
	}
	if typ != websocket.TextMessage || json.Unmarshal(data, &ack) != nil || ack.EnvelopeID == "" {
		s.badFrames++
		s.log.Debug("slackemu: unreadable client frame", "conn", c.id, "bytes", len(data))
		return
	}
	c.info.Acks++
	if len(data) >= MaxAckBytes && !s.opts.KeepLargeAcks {
		s.ackLogLocked(AckRecord{EnvelopeID: ack.EnvelopeID, Time: now, Conn: c.id, Dropped: "too_large", Bytes: len(data)})
		s.changedLocked()
		return
	}
	if s.opts.AckDropRate > 0 && s.rng.Float64() < s.opts.AckDropRate {
		s.ackLogLocked(AckRecord{EnvelopeID: ack.EnvelopeID, Time: now, Conn: c.id, Dropped: "lost", Bytes: len(data)})
		s.changedLocked()
		return
	}
	s.applyAckLocked(c.id, ack.EnvelopeID, ack.Payload, now, len(data))
}

// Connections returns the open Socket Mode connections.
func (s *Server) Connections() []ConnInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ConnInfo, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c.info)
	}
	slices.SortFunc(out, func(a, b ConnInfo) int { return a.OpenedAt.Compare(b.OpenedAt) })
	return out
}

// ClosedConnections returns the connections closed so far (ClosedAt set),
// in closing order: with Connections, the full socket history.
func (s *Server) ClosedConnections() []ConnInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.connLog)
}

// ConnStats returns connection counters.
func (s *Server) ConnStats() ConnStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connStats
}

// LiveConnections counts open sockets that got hello and no disconnect.
func (s *Server) LiveConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		if c.info.Hello && !c.info.Draining {
			n++
		}
	}
	return n
}

// BadFrames counts unreadable frames received from clients.
func (s *Server) BadFrames() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.badFrames
}

// selectConns returns the targeted live connections (all when ids is empty).
func (s *Server) selectConnsLocked(ids []string) []*conn {
	var out []*conn
	for _, c := range s.conns {
		if len(ids) == 0 || slices.Contains(ids, c.id) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *conn) int { return strings.Compare(a.id, b.id) })
	return out
}

// Disconnect sends {"type":"disconnect","reason":reason} to the given
// connections (all when none given) and stops routing envelopes to them.
// Reasons: "warning" (the server closes after WarningGrace),
// "refresh_requested", "link_disabled", "too_many_websockets" (closed after
// 1 s unless the client closes first). It returns how many got it.
func (s *Server) Disconnect(reason string, connIDs ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.selectConnsLocked(connIDs) {
		if c.info.Draining {
			continue
		}
		frame := map[string]any{"type": "disconnect", "reason": reason, "debug_info": map[string]any{"host": "applink-emu-" + c.id}}
		if reason == "too_many_websockets" {
			frame["num_connections"] = s.liveCountLocked()
		}
		data, _ := json.Marshal(frame)
		c.info.Draining = true
		c.send(outFrame{typ: websocket.TextMessage, data: data})
		grace := time.Second
		if reason == "warning" {
			grace = s.opts.WarningGrace
		}
		s.closeLaterLocked(c, grace)
		n++
	}
	s.changedLocked()
	return n
}

// DropConnections closes the TCP connections of the given sockets (all
// when none given) without a close frame.
func (s *Server) DropConnections(connIDs ...string) int {
	s.mu.Lock()
	cs := s.selectConnsLocked(connIDs)
	for _, c := range cs {
		c.info.Draining = true
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.kill()
	}
	return len(cs)
}

// StopPinging turns the given sockets (all when none given) half-open:
// no more PINGs, and every frame in either direction is silently lost
// while the TCP connection stays up. Envelopes may still be routed there,
// as Slack would not notice either; unacked events are redelivered.
func (s *Server) StopPinging(connIDs ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.selectConnsLocked(connIDs)
	for _, c := range cs {
		c.info.Pinging = false
		c.info.Blackhole = true
	}
	s.changedLocked()
	return len(cs)
}

// PausePings stops PINGs on the given sockets (all when none given) but
// keeps delivering frames.
func (s *Server) PausePings(connIDs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.selectConnsLocked(connIDs) {
		c.info.Pinging = false
	}
}

// SendRaw writes data as one frame (binary when binary is set) to the
// given socket, or to a random live one when connID is "". Use it for
// malformed frames: empty, binary, huge, deeply nested, truncated JSON.
func (s *Server) SendRaw(connID string, data []byte, binary bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var c *conn
	if connID != "" {
		c = s.conns[connID]
	} else {
		c = s.pickConnLocked()
	}
	if c == nil {
		return errors.New("slackemu: SendRaw: no such live connection")
	}
	typ := websocket.TextMessage
	if binary {
		typ = websocket.BinaryMessage
	}
	if !c.send(outFrame{typ: typ, data: data}) {
		return errors.New("slackemu: SendRaw: connection queue full or closed")
	}
	return nil
}

// pickConnLocked chooses a random routable socket (nil when none).
func (s *Server) pickConnLocked() *conn {
	var live []*conn
	for _, c := range s.selectConnsLocked(nil) {
		if c.info.Hello && !c.info.Draining {
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[s.rng.IntN(len(live))]
}
