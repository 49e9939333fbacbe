package bot

import (
	"bytes"
	"context"
	"crypto/tls"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/bobbinbot/bobbin/bot/internal/pause"
)

// Socket budget. Slack allows 10 socket-mode connections per app, across
// every replica. A connection past that gets disconnect
// "too_many_websockets"; slack-go reconnects at once and never reports the
// reason, so a replica over budget would hammer Slack. The reason is read
// off the wire instead (server frames are not masked, and Slack's frames
// are small JSON texts), the connection's client is torn down, and this
// replica opens no socket for tooManyCooldown.

// socketDrain bounds how long sockets stay open once shutdown starts.
// Slack does not redeliver clicks and slash commands, so those being
// handled still get their answer and ack before the sockets close; events
// are no longer acked (admitEvent) and Slack redelivers them to another
// replica.
const socketDrain = time.Second

// drainSockets waits until no envelope is being handled, at most
// socketDrain.
func (b *Bot) drainSockets() {
	deadline := time.Now().Add(socketDrain)
	for len(b.admitSem) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// tooManyCooldown is the least wait after too_many_websockets.
const tooManyCooldown = 60 * time.Second

var tooManyMarker = []byte(`"too_many_websockets"`)

// cooldown is the replica-wide socket back-off.
type cooldown struct {
	until atomic.Int64 // unix nanoseconds
}

// start begins a back-off of at least tooManyCooldown (plus jitter, so
// replicas turned away together do not return together).
func (c *cooldown) start() {
	end := time.Now().Add(tooManyCooldown + rand.N(10*time.Second)).UnixNano()
	for {
		cur := c.until.Load()
		if cur >= end || c.until.CompareAndSwap(cur, end) {
			return
		}
	}
}

// wait sleeps until the back-off is over; false if ctx ended first.
func (c *cooldown) wait(ctx context.Context) bool {
	for {
		d := time.Until(time.Unix(0, c.until.Load()))
		if d <= 0 {
			return true
		}
		if !pause.Sleep(ctx, d) {
			return false
		}
	}
}

// socketDialer is the WebSocket dialer of one socket-mode client. When
// Slack turns the connection away with too_many_websockets, it starts the
// replica's cooldown and calls stop (which ends the client).
//
// Every dial is numbered (b.dials); lastDial holds the number of the
// client's newest socket.
func (b *Bot) socketDialer(stop func(), lastDial *atomic.Uint64) *websocket.Dialer {
	var once sync.Once
	seen := func() {
		once.Do(func() {
			b.cool.start()
			b.log.Warn("bot: Slack refused the socket: too_many_websockets; backing off",
				"cooldown", tooManyCooldown.String(), "hint", "(replicas + rolling-update surge) × SOCKET_CONNECTIONS must stay ≤ 10")
			stop()
		})
	}
	nd := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	d := &websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: 10 * time.Second,
		WriteBufferSize:  32 * 1024,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return b.sniff(c, seen, lastDial), nil
		},
	}
	// For wss the frames are readable only above TLS: do the handshake
	// here, unless a proxy is in the way (gorilla would then dial the proxy
	// with this function).
	probe := &http.Request{URL: &url.URL{Scheme: "https", Host: "wss-primary.slack.com"}}
	if p, _ := http.ProxyFromEnvironment(probe); p == nil {
		d.NetDialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			td := &tls.Dialer{NetDialer: nd, Config: &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}}
			c, err := td.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return b.sniff(c, seen, lastDial), nil
		}
	}
	return d
}

// sniff wraps a freshly dialed connection, numbering the dial.
func (b *Bot) sniff(c net.Conn, tooMany func(), lastDial *atomic.Uint64) *sniffConn {
	seq := b.dials.Add(1)
	lastDial.Store(seq)
	return &sniffConn{Conn: c, onTooMany: tooMany, onLinkDisabled: b.linkDisabled}
}

// linkDisabledMarker is the disconnect reason Slack sends when Socket Mode
// is turned off; slack-go does not report it either.
var linkDisabledMarker = []byte(`"link_disabled"`)

// sniffConn reports the too_many_websockets and link_disabled markers in
// what it reads. It keeps the tail of each read so a marker split across
// reads is found (a short marker may then be reported twice: the callbacks
// are idempotent).
type sniffConn struct {
	net.Conn
	onTooMany      func()
	onLinkDisabled func() // nil: not watched
	carry          []byte
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		buf := append(c.carry, p[:n]...)
		if bytes.Contains(buf, tooManyMarker) {
			c.onTooMany()
		}
		if c.onLinkDisabled != nil && bytes.Contains(buf, linkDisabledMarker) {
			c.onLinkDisabled()
		}
		keep := min(len(buf), max(len(tooManyMarker), len(linkDisabledMarker))-1)
		c.carry = append(c.carry[:0], buf[len(buf)-keep:]...)
	}
	return n, err
}
