package bot

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/bobbinbot/bobbin/bot/install"
	"github.com/bobbinbot/bobbin/bot/internal/pause"
	"github.com/bobbinbot/bobbin/bot/stream"
)

// ackBudget bounds recording plus acking one envelope: Slack wants the ack
// within 3 s.
const ackBudget = 2500 * time.Millisecond

// superviseSocket keeps one socket-mode connection up until ctx ends,
// recreating the client when it gives up (fatal auth errors excepted, which
// it retries slowly so a revoked token shows in /readyz and logs).
func (b *Bot) superviseSocket(ctx, turnCtx context.Context, n int) {
	backoff := time.Second
	for ctx.Err() == nil {
		// After too_many_websockets no socket opens for a while
		// (connections.go).
		if !b.cool.wait(ctx) {
			return
		}
		start := time.Now()
		err := b.runSocket(ctx, turnCtx, n)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			backoff = time.Second
		}
		b.socketFailed(n, err)
		if tokenRejection(appTokenVar, err) == nil {
			b.log.Warn("bot: socket-mode client stopped; reconnecting", "conn", n, "err", err, "backoff", backoff)
		}
		if !pause.Sleep(ctx, backoff) {
			return
		}
		backoff = min(backoff*2, 2*time.Minute)
	}
}

// runSocket runs one socketmode client and drains its events: every
// envelope is handed to a bounded admission step (record, then ack) so the
// reader never stalls.
func (b *Bot) runSocket(ctx, turnCtx context.Context, n int) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lastDial atomic.Uint64
	client := socketmode.New(b.api,
		socketmode.OptionDialer(b.socketDialer(cancel, &lastDial)),
		socketmode.OptionPingInterval(b.opts.PingInterval),
	)
	runErr := make(chan error, 1)
	go func() { runErr <- client.RunContext(sctx) }()

	connected := false
	setConnected := func(v bool) {
		if v != connected {
			connected = v
			if v {
				b.sockets.Add(1)
				b.m.Sockets.Inc()
			} else {
				b.sockets.Add(-1)
				b.m.Sockets.Dec()
			}
		}
	}
	defer setConnected(false)

	var handlers sync.WaitGroup
	defer handlers.Wait()
	for {
		select {
		case err := <-runErr:
			return err
		case evt := <-client.Events:
			switch evt.Type {
			case socketmode.EventTypeConnected, socketmode.EventTypeHello:
				setConnected(true)
				b.health.ok(lastDial.Load())
				if evt.Request != nil && evt.Type == socketmode.EventTypeHello {
					b.log.Debug("bot: socket hello", "conn", n, "num_connections", evt.Request.NumConnections)
				}
			case socketmode.EventTypeConnecting, socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError,
				socketmode.EventTypeErrorWriteFailed, socketmode.EventTypeDisconnect:
				setConnected(false)
				if ce, ok := evt.Data.(*slack.ConnectionErrorEvent); ok && ce.ErrorObj != nil {
					b.socketFailed(n, ce.ErrorObj)
				}
				b.log.Debug("bot: socket state", "conn", n, "state", string(evt.Type))
			case socketmode.EventTypeInvalidAuth:
				// RunContext returns the error next; superviseSocket
				// reports it.
				setConnected(false)
			case socketmode.EventTypeErrorBadMessage:
				b.badMessage(sctx, client, evt)
			case socketmode.EventTypeEventsAPI, socketmode.EventTypeInteractive, socketmode.EventTypeSlashCommand:
				if evt.Request == nil {
					continue
				}
				received := time.Now()
				select {
				case b.admitSem <- struct{}{}:
				case <-sctx.Done():
					continue
				}
				handlers.Go(func() {
					defer func() { <-b.admitSem }()
					b.handleEnvelope(sctx, turnCtx, client, evt, received)
				})
			}
		}
	}
}

// handleEnvelope records one envelope and acks it. An events_api envelope
// that could not be recorded is not acked: Slack redelivers it.
func (b *Bot) handleEnvelope(ctx, turnCtx context.Context, client *socketmode.Client, evt socketmode.Event, received time.Time) {
	defer func() {
		if r := recover(); r != nil {
			b.log.Error("bot: panic while handling an envelope", "type", string(evt.Type), "panic", r)
		}
	}()
	req := evt.Request
	b.m.Events.WithLabelValues(string(evt.Type)).Inc()
	actx, cancel := context.WithTimeout(ctx, ackBudget)
	defer cancel()

	var payload any
	var after func(context.Context)
	ack := true
	switch evt.Type {
	case socketmode.EventTypeEventsAPI:
		ack, after = b.admitEvent(actx, turnCtx, req.Payload, req.RetryAttempt)
	case socketmode.EventTypeInteractive:
		if b.admitEnvelope(actx, install.InteractiveRef(req.Payload)) {
			payload = b.interactive(actx, turnCtx, req.Payload)
		}
	case socketmode.EventTypeSlashCommand:
		if b.admitEnvelope(actx, install.SlashRef(req.Payload)) {
			payload = b.slashCommand(actx, req.Payload)
		}
	}
	if !ack {
		return
	}
	if err := client.AckCtx(actx, req.EnvelopeID, payload); err != nil {
		b.log.Warn("bot: ack failed; Slack will redeliver", "type", string(evt.Type), "err", err)
		return
	}
	b.m.AckLatency.Observe(time.Since(received).Seconds())
	if after != nil {
		fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer fcancel()
		after(fctx)
	}
}

// badMessage handles a frame slack-go could not decode: it is logged by
// type only and acked when it carries an envelope id, since a payload we
// cannot parse will not parse on redelivery either.
func (b *Bot) badMessage(ctx context.Context, client *socketmode.Client, evt socketmode.Event) {
	bad, ok := evt.Data.(*socketmode.ErrorBadMessage)
	if !ok {
		return
	}
	var env struct {
		EnvelopeID string `json:"envelope_id"`
		Type       string `json:"type"`
	}
	_ = json.Unmarshal(bad.Message, &env)
	b.log.Warn("bot: malformed socket-mode frame", "type", env.Type, "bytes", len(bad.Message), "err", errors.Unwrap(bad.Cause))
	if env.EnvelopeID == "" {
		return
	}
	actx, cancel := context.WithTimeout(ctx, ackBudget)
	defer cancel()
	_ = client.AckCtx(actx, env.EnvelopeID, nil)
}

// interactive handles block_actions and view submissions; it returns the
// ack payload (nil for a plain ack).
func (b *Bot) interactive(ctx, turnCtx context.Context, raw json.RawMessage) any {
	var cb slack.InteractionCallback
	if err := json.Unmarshal(raw, &cb); err != nil {
		b.log.Warn("bot: malformed interactive payload", "err", err)
		return nil
	}
	if b.askShortcut(ctx, turnCtx, cb) {
		return nil
	}
	if ack, ok := b.handleControl(ctx, cb); ok {
		return ack
	}
	if cb.Type == slack.InteractionTypeViewSubmission && cb.View.CallbackID == callbackFeedbackReason {
		return b.feedbackReasonSubmitted(ctx, cb) // feedback.go
	}
	if cb.Type == slack.InteractionTypeBlockActions {
		for _, a := range cb.ActionCallback.BlockActions {
			if a == nil {
				continue
			}
			switch a.ActionID {
			case stream.ActionStop:
				b.stopClicked(ctx, cb, a.Value)
			case actionFeedback:
				b.feedbackClicked(ctx, cb, a) // feedback.go
			}
		}
	}
	return nil
}

// slashCommand answers /bobbin (bot/admin).
func (b *Bot) slashCommand(ctx context.Context, raw json.RawMessage) any {
	var cmd slack.SlashCommand
	if err := json.Unmarshal(raw, &cmd); err != nil {
		b.log.Warn("bot: malformed slash command", "err", err)
		return nil
	}
	return b.admin.Slash(ctx, cmd)
}

// logAttrs are the attributes every log line about a thread carries.
func threadAttrs(team, channel, thread string) []any {
	return []any{slog.String("team", team), slog.String("channel", channel), slog.String("thread", thread)}
}
