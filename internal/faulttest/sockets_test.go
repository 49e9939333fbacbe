package faulttest

import (
	"strconv"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestTooManyWebsockets (R7): Slack allows the app only two sockets here;
// a third replica is turned away with too_many_websockets. It must back
// off (≥ 60 s between tries, so ≤ 6 tries a minute) instead of
// reconnecting at once, and its /metrics must show no open connection.
func TestTooManyWebsockets(t *testing.T) {
	window := pick(20*time.Second, 75*time.Second)
	c := newCluster(t, clusterOpts{emu: slackemu.Options{MaxSockets: 2}})
	a := c.start()
	c.start()
	before := c.emu.ConnStats()
	third := c.launch()
	c.waitFor("the third replica refused", 30*time.Second, func() bool { return c.emu.ConnStats().Rejected > before.Rejected })
	first := time.Now()
	time.Sleep(window)
	after := c.emu.ConnStats()
	tries := after.Rejected - before.Rejected
	perMin := float64(tries) / (time.Since(first).Minutes() + 1.0/60)
	sockets := third.metric("bobbin_socket_connections")
	report(t, "too-many-websockets", "max_sockets", 2, "window", window, "refused_tries", tries,
		"tries_per_min", perMinText(perMin, window), "third_replica_sockets", sockets, "max_live", after.MaxLive,
		"backoff_logged", third.logLines("too_many_websockets") > 0, "first_replica_sockets", a.metric("bobbin_socket_connections"))
	if window < tooManyWindowMin && tries > 2 {
		t.Errorf("%d refused connection attempts in %v; want at most 2 (a ≥ 60 s back-off)", tries, window)
	}
	if window >= tooManyWindowMin && perMin > 6 {
		t.Errorf("%.1f refused attempts a minute; want ≤ 6", perMin)
	}
	if after.MaxLive > 2 {
		t.Errorf("%d sockets live at once; the limit is 2", after.MaxLive)
	}
	if third.ready() {
		t.Error("the refused replica reports ready")
	}
}

const tooManyWindowMin = 60 * time.Second

// perMinText reports a rate only over a window long enough to mean it.
func perMinText(perMin float64, window time.Duration) string {
	if window < tooManyWindowMin {
		return "n/a(window<1m)"
	}
	return strconv.FormatFloat(perMin, 'f', 1, 64)
}

// TestHalfOpenSocket (R6): the only socket goes half-open (no pings, every
// frame lost, TCP still up). The replica must notice within its ping
// timeout and reconnect; events sent meanwhile are redelivered and
// answered once.
func TestHalfOpenSocket(t *testing.T) {
	const pingTimeout = 6 * time.Second
	c := newCluster(t, clusterOpts{
		emu: slackemu.Options{PingInterval: time.Second, RetryDelays: []time.Duration{0, 2 * time.Second, 4 * time.Second, 8 * time.Second}},
		env: map[string]string{"SOCKET_PING_TIMEOUT": pingTimeout.String()},
	})
	c.start()
	old := map[string]bool{}
	for _, ci := range c.emu.Connections() {
		old[ci.ID] = true
	}
	cut := time.Now()
	c.emu.StopPinging()
	during := c.startThreads(0, 3)
	c.waitFor("a new socket", 4*pingTimeout, func() bool {
		for _, ci := range c.emu.Connections() {
			if !old[ci.ID] && ci.Hello {
				return true
			}
		}
		return false
	})
	reconnect := time.Since(cut)
	c.waitFor("events from the half-open window answered", 60*time.Second, func() bool { return c.answered(during) })
	o := c.tally(during, cut)
	target := pingTimeout + 5*time.Second
	report(t, "half-open-socket", "ping_timeout", pingTimeout, "reconnect_after", reconnect.Round(time.Millisecond),
		"target", target, "within_target", reconnect <= target, "events_during", len(during),
		"lost", o.lost, "duplicate_replies", o.duplicates)
	if o.lost != 0 || o.duplicates != 0 {
		t.Errorf("lost=%d duplicates=%d; want 0 and 0", o.lost, o.duplicates)
	}
	// slack-go checks pings on a ticker of the same period: worst case is
	// two periods, plus reconnecting.
	if reconnect > 2*pingTimeout+5*time.Second {
		t.Errorf("reconnected %v after the socket went half-open; want ≤ %v", reconnect, 2*pingTimeout+5*time.Second)
	}
}
