package slackemu_test

import (
	"context"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// BenchmarkEventAckRoundTrip measures the emulator's own share of ack
// latency: envelope written → slack-go client acks at once → ack recorded.
func BenchmarkEventAckRoundTrip(b *testing.B) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	defer emu.Close()
	sm := socketmode.New(botClient(emu))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = sm.RunContext(ctx); done <- struct{}{} }()
	go func() {
		defer func() { done <- struct{}{} }()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-sm.Events:
				if ev.Request != nil && ev.Request.EnvelopeID != "" {
					_ = sm.AckCtx(ctx, ev.Request.EnvelopeID, nil)
				}
			}
		}
	}()
	defer func() { cancel(); <-done; <-done }()
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	if err := emu.WaitFor(wctx, func() bool { return emu.LiveConnections() == 1 }); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	for b.Loop() {
		p := emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "ping", "")
		if _, err := emu.WaitAck(wctx, p.Envelope); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	st := emu.AckStats()
	b.ReportMetric(float64(st.P50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(st.P99.Microseconds()), "p99-µs")
}

// BenchmarkPostAndUpdate measures a Web API round trip through slack-go.
func BenchmarkPostAndUpdate(b *testing.B) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	defer emu.Close()
	api := botClient(emu)
	_, ts, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("x", false))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, _, _, err := api.UpdateMessage(slackemu.ChannelGen, ts, slack.MsgOptionMarkdownText("some streamed text")); err != nil {
			b.Fatal(err)
		}
	}
}
