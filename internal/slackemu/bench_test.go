package slackemu_test

import (
	"context"
	"fmt"
	"io"
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

// BenchmarkRepliesPage100 is the emulator's cost of one
// conversations.replies page of a 100-message thread (the page a bot's
// thread import reads), through slack-go.
func BenchmarkRepliesPage100(b *testing.B) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	defer emu.Close()
	parent, _ := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice, Text: "incident", Silent: true})
	for i := range 99 {
		_, _ = emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserBob, Text: fmt.Sprintf("update %d: something happened", i), ThreadTS: parent.TS, Silent: true})
	}
	api := botClient(emu)
	params := &slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: parent.TS, Limit: 200}
	b.ResetTimer()
	for b.Loop() {
		msgs, _, _, err := api.GetConversationReplies(params)
		if err != nil || len(msgs) != 100 {
			b.Fatalf("%d messages, %v", len(msgs), err)
		}
	}
}

// BenchmarkFileDownload1MB is the emulator's cost of serving a 1 MB file
// to slack-go's GetFile.
func BenchmarkFileDownload1MB(b *testing.B) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	defer emu.Close()
	p, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice, Silent: true,
		Files: []slackemu.File{{Name: "big.png", Content: make([]byte, 1<<20)}}})
	if err != nil {
		b.Fatal(err)
	}
	api := botClient(emu)
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for b.Loop() {
		if err := api.GetFile(p.Files[0].URLPrivateDownload, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
