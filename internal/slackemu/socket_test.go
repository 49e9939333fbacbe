package slackemu_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// fastOpts keeps socket tests quick. The ack deadline stays generous so a
// loaded machine never turns a prompt ack into a redelivery; tests about
// timeouts use timeoutOpts.
func fastOpts() slackemu.Options {
	return slackemu.Options{
		AckDeadline:  10 * time.Second,
		RetryDelays:  []time.Duration{0, 50 * time.Millisecond, 50 * time.Millisecond},
		PingInterval: 100 * time.Millisecond,
		WarningGrace: 200 * time.Millisecond,
	}
}

// timeoutOpts makes unacked envelopes time out quickly.
func timeoutOpts() slackemu.Options {
	o := fastOpts()
	o.AckDeadline = 200 * time.Millisecond
	return o
}

func TestSocketModeHelloEventsAndAck(t *testing.T) {
	opts := fastOpts()
	opts.MessageEventsOnMention = true
	emu := newEmu(t, opts)
	c := startSocket(t, emu, false)
	c.next(t, socketmode.EventTypeHello)

	p := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "list my tools", "")
	seen := map[string]bool{}
	for range 2 {
		ev := c.next(t, socketmode.EventTypeEventsAPI)
		req := ev.Request
		if req.RetryAttempt != 0 || req.RetryReason != "" || req.AcceptsResponsePayload {
			t.Errorf("envelope retry %d %q accepts %v", req.RetryAttempt, req.RetryReason, req.AcceptsResponsePayload)
		}
		api := ev.Data.(slackevents.EventsAPIEvent)
		switch inner := api.InnerEvent.Data.(type) {
		case *slackevents.AppMentionEvent:
			seen["app_mention"] = true
			if inner.TimeStamp != p.TS || inner.User != slackemu.UserAlice || inner.Text != "<@"+slackemu.BotUserID+"> list my tools" || inner.Channel != slackemu.ChannelGen {
				t.Errorf("app_mention = %+v", inner)
			}
		case *slackevents.MessageEvent:
			seen["message"] = true
			if inner.TimeStamp != p.TS || inner.ChannelType != "channel" {
				t.Errorf("message = %+v", inner)
			}
		default:
			t.Errorf("unexpected inner event %T", inner)
		}
		if i := slices.IndexFunc([]string{p.Envelope, p.MessageEnvelope}, func(s string) bool { return s == req.EnvelopeID }); i < 0 {
			t.Errorf("envelope id %s not one of %s %s", req.EnvelopeID, p.Envelope, p.MessageEnvelope)
		}
		c.ack(t, req.EnvelopeID, nil)
	}
	if !seen["app_mention"] || !seen["message"] {
		t.Errorf("events seen %v", seen)
	}
	waitFor(t, emu, "both acks", func() bool { return emu.AckStats().Acked == 2 })
	st := emu.AckStats()
	if st.Unacked != 0 || st.Redeliveries != 0 || len(st.Latencies) != 2 || st.P99 <= 0 {
		t.Errorf("AckStats = %+v", st)
	}
	conns := emu.Connections()
	if len(conns) != 1 || !conns[0].Hello || conns[0].Acks != 2 {
		t.Errorf("Connections = %+v", conns)
	}
	waitFor(t, emu, "pongs", func() bool { return emu.Connections()[0].Pongs > 0 })
}

func TestEventsRedeliveredWhenNotAcked(t *testing.T) {
	// The first retry comes at once after the deadline, the next only
	// after a long wait: the test's ack of the retry is never late.
	opts := timeoutOpts()
	opts.RetryDelays = []time.Duration{0, time.Minute, time.Minute}
	emu := newEmu(t, opts)
	c := startSocket(t, emu, false)
	c.next(t, socketmode.EventTypeHello)

	p := emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "hi", "")
	first := c.next(t, socketmode.EventTypeEventsAPI).Request
	if first.EnvelopeID != p.Envelope || first.RetryAttempt != 0 {
		t.Fatalf("first delivery %+v", first)
	}
	// Not acked: retry 1 with reason timeout, same envelope id.
	second := c.next(t, socketmode.EventTypeEventsAPI).Request
	if second.EnvelopeID != p.Envelope || second.RetryAttempt != 1 || second.RetryReason != "timeout" {
		t.Fatalf("redelivery %+v", second)
	}
	c.ack(t, second.EnvelopeID, nil)
	waitFor(t, emu, "ack", func() bool { e, _ := emu.Envelope(p.Envelope); return e.Acked })
	e, _ := emu.Envelope(p.Envelope)
	if len(e.Deliveries) != 2 || e.Failed {
		t.Errorf("envelope = %+v", e)
	}
}

func TestEventRetriesRunOut(t *testing.T) {
	emu := newEmu(t, timeoutOpts())
	c := startSocket(t, emu, false)
	c.next(t, socketmode.EventTypeHello)
	p := emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "again", "")
	waitFor(t, emu, "retries exhausted", func() bool { e, _ := emu.Envelope(p.Envelope); return e.Failed })
	e, _ := emu.Envelope(p.Envelope)
	var attempts []int
	for _, d := range e.Deliveries {
		attempts = append(attempts, d.RetryAttempt)
	}
	if !slices.Equal(attempts, []int{0, 1, 2, 3}) {
		t.Errorf("attempts = %v, want [0 1 2 3]", attempts)
	}
	if f := emu.Failures(); len(f) != 1 || f[0].Reason != "retries_exhausted" {
		t.Errorf("Failures = %+v", f)
	}
}

func TestEventsQueuedUntilASocketConnects(t *testing.T) {
	emu := newEmu(t, fastOpts())
	p := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "early", "")
	c := startSocket(t, emu, true)
	ev := c.next(t, socketmode.EventTypeEventsAPI)
	if ev.Request.EnvelopeID != p.Envelope {
		t.Errorf("got envelope %s, want %s", ev.Request.EnvelopeID, p.Envelope)
	}
}

func TestDisconnectRefreshRequestedReconnects(t *testing.T) {
	emu := newEmu(t, fastOpts())
	c := startSocket(t, emu, true)
	c.next(t, socketmode.EventTypeHello)
	first := emu.Connections()[0].ID

	if n := emu.Disconnect("refresh_requested"); n != 1 {
		t.Fatalf("Disconnect reached %d sockets", n)
	}
	waitFor(t, emu, "a new live socket", func() bool {
		cs := emu.Connections()
		return len(cs) == 1 && cs[0].ID != first && cs[0].Hello && !cs[0].Draining
	})
	p := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "after refresh", "")
	waitFor(t, emu, "ack after reconnect", func() bool { e, _ := emu.Envelope(p.Envelope); return e.Acked })
}

func TestDisconnectReasons(t *testing.T) {
	for _, reason := range []string{"warning", "link_disabled", "too_many_websockets"} {
		t.Run(reason, func(t *testing.T) {
			t.Parallel()
			emu := newEmu(t, fastOpts())
			ws := dialRaw(t, emu)
			readFrame(t, ws) // hello
			emu.Disconnect(reason)
			f := readFrame(t, ws)
			if f["type"] != "disconnect" || f["reason"] != reason {
				t.Errorf("frame = %v", f)
			}
			// The server closes the socket after the grace period.
			_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					break
				}
			}
		})
	}
}

func TestTooManyWebsockets(t *testing.T) {
	// Eleven apps.connections.open at once: past the default burst, and
	// this is about the socket limit.
	o := fastOpts()
	o.NoRateLimits = true
	emu := newEmu(t, o)
	var clients []*sockClient
	for range 10 {
		c := startSocket(t, emu, true)
		c.next(t, socketmode.EventTypeHello)
		clients = append(clients, c)
	}
	ws := dialRaw(t, emu)
	f := readFrame(t, ws)
	if f["type"] != "disconnect" || f["reason"] != "too_many_websockets" || f["num_connections"] != float64(10) {
		t.Errorf("11th socket got %v", f)
	}
	if n := emu.LiveConnections(); n != 10 {
		t.Errorf("LiveConnections = %d, want 10", n)
	}
	if st := emu.ConnStats(); st.Opened != 10 || st.Rejected != 1 || st.MaxLive != 10 {
		t.Errorf("ConnStats = %+v", st)
	}
	// Envelopes are spread over the live sockets.
	var envs []string
	for range 40 {
		envs = append(envs, emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "x", "").Envelope)
	}
	waitFor(t, emu, "all acked", func() bool { return emu.AckStats().Acked == 40 })
	used := map[string]bool{}
	for _, id := range envs {
		e, _ := emu.Envelope(id)
		used[e.Deliveries[0].Conn] = true
	}
	if len(used) < 3 {
		t.Errorf("40 envelopes went to only %d sockets", len(used))
	}
	for _, c := range clients {
		c.stop()
	}
}

func TestSocketFaultsAndRecovery(t *testing.T) {
	tests := []struct {
		name  string
		fault func(*slackemu.Server)
	}{
		{"tcp drop", func(e *slackemu.Server) { e.DropConnections() }},
		{"half open", func(e *slackemu.Server) { e.StopPinging() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			emu := newEmu(t, timeoutOpts())
			c := startSocket(t, emu, true, socketmode.OptionPingInterval(400*time.Millisecond))
			c.next(t, socketmode.EventTypeHello)
			first := emu.Connections()[0].ID
			tc.fault(emu)
			p := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "during fault", "")
			waitFor(t, emu, "reconnect", func() bool {
				for _, ci := range emu.Connections() {
					if ci.ID != first && ci.Hello {
						return true
					}
				}
				return false
			})
			waitFor(t, emu, "event acked after recovery", func() bool { e, _ := emu.Envelope(p.Envelope); return e.Acked })
		})
	}
}

func TestMalformedFramesKeepSocketUp(t *testing.T) {
	emu := newEmu(t, fastOpts())
	c := startSocket(t, emu, true)
	c.next(t, socketmode.EventTypeHello)
	id := emu.Connections()[0].ID
	nested := strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)
	frames := []struct {
		data   []byte
		binary bool
	}{
		{[]byte(`{"type":"events_api","envelope_id":"x","payload":`), false},
		{[]byte(nested), false},
		{[]byte{0xff, 0x00, 0x01}, true},
		{[]byte(`{"type":"mystery"}`), false},
		{[]byte(`{"type":"events_api","envelope_id":"y","payload":"not an object"}`), false},
		{[]byte(`{"type":"events_api","envelope_id":"z","payload":{"type":"event_callback","event":` + strings.Repeat(`"x`, 1<<20) + `"}}`), false},
	}
	for _, f := range frames {
		if err := emu.SendRaw(id, f.data, f.binary); err != nil {
			t.Fatal(err)
		}
	}
	p := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "still there?", "")
	waitFor(t, emu, "ack after junk", func() bool { e, _ := emu.Envelope(p.Envelope); return e.Acked })
}

func TestRedeliverAndResend(t *testing.T) {
	emu := newEmu(t, fastOpts())
	c := startSocket(t, emu, true)
	c.next(t, socketmode.EventTypeHello)
	p := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "once", "")
	first := c.next(t, socketmode.EventTypeEventsAPI)
	waitFor(t, emu, "ack", func() bool { e, _ := emu.Envelope(p.Envelope); return e.Acked })

	if err := emu.Redeliver(p.Envelope); err != nil {
		t.Fatal(err)
	}
	again := c.next(t, socketmode.EventTypeEventsAPI)
	if again.Request.EnvelopeID != p.Envelope || again.Request.RetryAttempt != 0 {
		t.Errorf("Redeliver sent %+v", again.Request)
	}
	newEnv, newEvent, err := emu.Resend(p.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	re := c.next(t, socketmode.EventTypeEventsAPI)
	ea := re.Data.(slackevents.EventsAPIEvent)
	cb := ea.Data.(*slackevents.EventsAPICallbackEvent)
	if re.Request.EnvelopeID != newEnv || cb.EventID != newEvent || newEvent == p.EventID {
		t.Errorf("Resend: envelope %s event %s (orig %s)", re.Request.EnvelopeID, cb.EventID, p.EventID)
	}
	if ea.InnerEvent.Data.(*slackevents.AppMentionEvent).TimeStamp != first.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AppMentionEvent).TimeStamp {
		t.Error("Resend changed the message ts")
	}
}

func TestSlashCommandAckPayload(t *testing.T) {
	emu := newEmu(t, fastOpts())
	c := startSocket(t, emu, false)
	c.next(t, socketmode.EventTypeHello)

	in := emu.SlashCommand(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAdmin, "/bobbin", "add")
	ev := c.next(t, socketmode.EventTypeSlashCommand)
	cmd := ev.Data.(slack.SlashCommand)
	if !ev.Request.AcceptsResponsePayload || cmd.Command != "/bobbin" || cmd.Text != "add" || cmd.UserID != slackemu.UserAdmin || cmd.TriggerID != in.TriggerID || cmd.ResponseURL != in.ResponseURL {
		t.Errorf("slash = %+v accepts %v", cmd, ev.Request.AcceptsResponsePayload)
	}
	c.ack(t, ev.Request.EnvelopeID, map[string]any{"response_type": "ephemeral", "text": "ok"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := in.Wait(ctx)
	if err != nil || res.ResponseType != "ephemeral" || res.Text != "ok" {
		t.Fatalf("Wait = %+v, %v", res, err)
	}
	if e := emu.Ephemerals(slackemu.UserAdmin); len(e) != 1 || e[0].Text != "ok" || e[0].Via != "slash_ack" {
		t.Errorf("Ephemerals = %+v", e)
	}

}

func TestUnackedSlashCommandFails(t *testing.T) {
	emu := newEmu(t, timeoutOpts())
	c := startSocket(t, emu, false)
	c.next(t, socketmode.EventTypeHello)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// An unacked slash command is a user-visible failure, not redelivered.
	in := emu.SlashCommand(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAdmin, "/bobbin", "list")
	c.next(t, socketmode.EventTypeSlashCommand)
	if _, err := in.Wait(ctx); err == nil {
		t.Error("Wait on unacked slash: no error")
	}
	e, _ := emu.Envelope(in.EnvelopeID)
	if len(e.Deliveries) != 1 || !e.Failed {
		t.Errorf("unacked slash envelope = %+v", e)
	}
	if f := emu.Failures(); len(f) != 1 || f[0].User != slackemu.UserAdmin || f[0].Reason != "ack_timeout" {
		t.Errorf("Failures = %+v", f)
	}
}

func TestAppsConnectionsOpenTickets(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)
	_, u, err := api.StartSocketModeContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, "ws://127.0.0.1:") || !strings.Contains(u, "/link/?ticket=") || !strings.Contains(u, "app_id="+slackemu.AppID) {
		t.Errorf("url %q", u)
	}
	h := http.Header{"Origin": {"https://api.slack.com"}}
	ws, _, err := websocket.DefaultDialer.Dial(u+"&debug_reconnects=true", h)
	if err != nil {
		t.Fatalf("dial with Slack's Origin and extra params: %v", err)
	}
	ws.Close()
	if _, resp, err := websocket.DefaultDialer.Dial(u, h); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("second use of a ticket: err %v", err)
	}
}

// dialRaw opens a socket with a fresh ticket, bypassing slack-go.
func dialRaw(t *testing.T, emu *slackemu.Server) *websocket.Conn {
	t.Helper()
	_, u, err := botClient(emu).StartSocketModeContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ws, _, err := websocket.DefaultDialer.Dial(u, http.Header{"Origin": {"https://api.slack.com"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

func readFrame(t *testing.T, ws *websocket.Conn) map[string]any {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, data, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("frame %q: %v", data, err)
	}
	return m
}

func TestSlashCommandVariantsParse(t *testing.T) {
	emu := newEmu(t, fastOpts())
	c := startSocket(t, emu, true)
	c.next(t, socketmode.EventTypeHello)
	// is_enterprise_install comes as a bool, a string or not at all.
	for i := range 3 {
		in := emu.SlashCommand(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "/bobbin", "help")
		ev := c.next(t, socketmode.EventTypeSlashCommand, socketmode.EventTypeErrorBadMessage)
		if ev.Type != socketmode.EventTypeSlashCommand {
			t.Fatalf("variant %d: %v", i, ev.Data)
		}
		if cmd := ev.Data.(slack.SlashCommand); cmd.ChannelName != "directmessage" || cmd.TeamDomain != "acme" || cmd.UserName != "alice" {
			t.Errorf("variant %d: %+v", i, cmd)
		}
		waitFor(t, emu, "ack", func() bool { e, _ := emu.Envelope(in.EnvelopeID); return e.Acked })
	}
}

func TestPostToUserIDOpensDM(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	ch, _, err := botClient(emu).PostMessage(slackemu.UserBob, slack.MsgOptionText("hi bob", false))
	if err != nil || ch != slackemu.DMBob {
		t.Fatalf("PostMessage(U333) = %q, %v; want channel %s", ch, err, slackemu.DMBob)
	}
}

func TestSetMaxSocketsStorm(t *testing.T) {
	emu := newEmu(t, fastOpts())
	c := startSocket(t, emu, true)
	c.next(t, socketmode.EventTypeHello)
	emu.SetMaxSockets(1)
	// A second client is turned away again and again (slack-go retries).
	startSocket(t, emu, true)
	waitFor(t, emu, "rejections", func() bool { return emu.ConnStats().Rejected >= 3 })
	if n := emu.LiveConnections(); n != 1 {
		t.Errorf("LiveConnections = %d, want 1", n)
	}
}
