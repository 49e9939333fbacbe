package bot_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// firstTextRunner wraps the agent to note when each turn's first model
// text reaches the bot.
type firstTextRunner struct {
	next bot.Runner
	mu   sync.Mutex
	at   []time.Time
}

type firstTextObserver struct {
	next agent.Observer
	r    *firstTextRunner
	seen bool
}

func (o *firstTextObserver) Observe(ev agent.Event) {
	if ev.Kind == agent.EventText && !o.seen {
		o.seen = true
		o.r.mu.Lock()
		o.r.at = append(o.r.at, time.Now())
		o.r.mu.Unlock()
	}
	o.next.Observe(ev)
}

func (r *firstTextRunner) Run(ctx context.Context, t agent.Turn) (agent.Result, error) {
	t.Observer = &firstTextObserver{next: t.Observer, r: r}
	return r.next.Run(ctx, t)
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkFirstVisibleText: time from the model's first text delta
// reaching the bot to the first Slack version of the reply that shows text,
// in edit and native mode.
func BenchmarkFirstVisibleText(b *testing.B) {
	for _, mode := range []string{bot.StreamEdit, bot.StreamNative} {
		b.Run(mode, func(b *testing.B) { benchFirstVisibleText(b, mode, nil) })
	}
}

// BenchmarkFirstVisibleTextTracing: BenchmarkFirstVisibleText with tracing
// off (no tracer, as when OTEL_EXPORTER_OTLP_ENDPOINT is unset) and on (the
// SDK's TracerProvider sampling every trace and batching to an exporter
// that counts and discards, given to the bot and the agent as cmd/bot
// does, minus the network). Besides p50/p99 from the model's first text
// (the renderer's share, where few spans open) it reports mention-p50-ms
// and mention-p99-ms: from the mention posted to the first visible text,
// the window in which invoke_agent and the chat span open. spans/op shows
// that "on" really recorded and exported.
func BenchmarkFirstVisibleTextTracing(b *testing.B) {
	for _, mode := range []string{bot.StreamEdit, bot.StreamNative} {
		for _, tracing := range []string{"off", "on"} {
			b.Run(mode+"/"+tracing, func(b *testing.B) {
				if tracing == "off" {
					benchFirstVisibleText(b, mode, nil)
					return
				}
				exp := &countingExporter{}
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(exp))
				defer func() { _ = tp.Shutdown(context.Background()) }()
				benchFirstVisibleText(b, mode, tp.Tracer("github.com/bobbinbot/bobbin"))
				if err := tp.ForceFlush(context.Background()); err != nil {
					b.Fatal(err)
				}
				if exp.spans.Load() == 0 {
					b.Fatal("tracing on exported no span")
				}
				// Per turn run: b.N and the warm-up turn.
				b.ReportMetric(float64(exp.spans.Load())/float64(b.N+1), "spans/op")
			})
		}
	}
}

// countingExporter counts the spans exported to it and drops them.
type countingExporter struct{ spans atomic.Int64 }

func (e *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.spans.Add(int64(len(spans)))
	return nil
}

func (e *countingExporter) Shutdown(context.Context) error { return nil }

// benchFirstVisibleText runs b.N mentions, one at a time; tracer (nil:
// tracing off) opens the bot's and the agent's spans. The warm-up turn
// is not measured (connections, the SDK's pools).
func benchFirstVisibleText(b *testing.B, mode string, tracer trace.Tracer) {
	var ftr *firstTextRunner
	// Limits off on both sides: this measures the renderer, not the
	// budget (BenchmarkFirstVisibleTextFourReplies does, under it).
	h := newHarness(b, harnessOpts{emu: slackemu.Options{NoRateLimits: true}, bot: func(o *bot.Options) {
		ftr = &firstTextRunner{next: o.Agent}
		o.Agent = ftr
		o.StreamMode = mode
		o.Tracer = tracer
		unlimitedEdits(o)
	}, agent: func(o *agent.Options) { o.Tracer = tracer }})
	h.llm.SetTokenInterval(5 * time.Millisecond)
	var lat, fromMention []time.Duration
	turn := func(i int) {
		posted := time.Now()
		p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, fmt.Sprintf("latency %d", i), "")
		h.waitReplyB(b, slackemu.ChannelGen, p.TS)
		r := h.emu.BotReplies(slackemu.ChannelGen, p.TS)
		ftr.mu.Lock()
		first := ftr.at[len(ftr.at)-1]
		ftr.mu.Unlock()
		for _, v := range r[0].History {
			if strings.TrimSpace(v.Text+v.MarkdownText) != "" {
				lat = append(lat, v.Time.Sub(first))
				fromMention = append(fromMention, v.Time.Sub(posted))
				break
			}
		}
	}
	turn(-1)
	lat, fromMention = lat[:0], fromMention[:0]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		turn(i)
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(percentile(fromMention, 0.5).Microseconds())/1000, "mention-p50-ms")
	b.ReportMetric(float64(percentile(fromMention, 0.99).Microseconds())/1000, "mention-p99-ms")
}

// BenchmarkSlackCallsPerReply: Web API calls for one 2,000-token answer
// streamed at 200 tokens/s in edit mode (1 s edit interval).
func BenchmarkSlackCallsPerReply(b *testing.B) {
	h := newHarness(b, harnessOpts{bot: func(o *bot.Options) {
		o.EditInterval = time.Second
		o.UserTurnsPerMinute = 1000000
	}})
	answer := strings.TrimSpace(strings.Repeat("word ", 2000))
	h.llm.SetTokenInterval(5 * time.Millisecond)
	h.llm.SetResponder(func(llmemu.Recorded) llmemu.Reply { return llmemu.Reply{Text: answer} })
	calls := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := len(h.emu.Journal())
		p := h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, fmt.Sprintf("long %d", i), "")
		h.waitReplyB(b, slackemu.ChannelGen, p.TS)
		time.Sleep(100 * time.Millisecond)
		for _, c := range h.emu.Journal()[before:] {
			if strings.HasPrefix(c.Method, "chat.") {
				calls++
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(calls)/float64(b.N), "chat-calls/reply")
}

// BenchmarkAckLatency: envelopes at 50 per second (each a mention in its
// own thread, so turns run meanwhile); the emulator measures send → ack.
func BenchmarkAckLatency(b *testing.B) {
	h := newHarness(b, harnessOpts{bot: unlimitedEdits})
	h.emu.SetRateLimit("chat.update", slackemu.RateLimit{Off: true})
	// 100 replies in one channel would otherwise queue behind Slack's
	// ~1 post/s per channel; this measures acks.
	h.emu.SetRateLimit("chat.postMessage", slackemu.RateLimit{Off: true})
	n := max(b.N, 100)
	b.ResetTimer()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last slackemu.Posted
	for i := 0; i < n; i++ {
		<-tick.C
		last = h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, fmt.Sprintf("ack %d", i), "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.emu.WaitAck(ctx, last.Envelope); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	st := h.emu.AckStats()
	b.ReportMetric(float64(st.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(st.P99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(st.Max.Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(st.Late+st.Unacked), "late")
	h.waitAllReplies(n)
}

// BenchmarkMemoryPerActiveTurn: heap and goroutines per turn while 50
// turns stream at once (model streams parked mid-answer).
func BenchmarkMemoryPerActiveTurn(b *testing.B) {
	const turns = 50
	h := newHarness(b, harnessOpts{bot: func(o *bot.Options) {
		o.MaxConcurrentTurns = turns
		unlimitedEdits(o)
	}})
	h.emu.SetRateLimit("chat.update", slackemu.RateLimit{Off: true})
	h.emu.SetRateLimit("chat.postMessage", slackemu.RateLimit{Off: true})
	for i := 0; i < b.N; i++ {
		release := h.llm.Hold(5)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		held := h.llm.Held()
		for j := 0; j < turns; j++ {
			h.emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, fmt.Sprintf("mem %d %d", i, j), "")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := h.llm.WaitHeld(ctx, held+turns); err != nil {
			b.Fatal(err)
		}
		cancel()
		time.Sleep(200 * time.Millisecond)
		runtime.GC()
		runtime.ReadMemStats(&after)
		g1 := runtime.NumGoroutine()
		b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/turns/1024, "KiB/turn")
		b.ReportMetric(float64(g1-g0)/turns, "goroutines/turn")
		release()
		h.waitAllReplies((i + 1) * turns)
	}
}

// unlimitedEdits lifts the bot's Slack budgets (the emulator's limits are
// lifted alongside) and the per-person turn budget, for benchmarks that
// measure something else.
func unlimitedEdits(o *bot.Options) {
	o.RateLimits = noLimits()
	o.UserTurnsPerMinute = 1000000
}

// noLimits turns every Slack budget of the bot off (SLACK_RATE_LIMITS=*=off).
func noLimits() map[string]slackapi.RateLimit {
	l, err := slackapi.ParseRateLimits("*=off", slackapi.DefaultRateLimits())
	if err != nil {
		panic(err)
	}
	return l
}

// waitReplyB is waitReply for benchmarks.
func (h *harness) waitReplyB(b *testing.B, channel, thread string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := h.emu.WaitFor(ctx, func() bool { _, _, done := h.replyText(channel, thread); return done }); err != nil {
		b.Fatal(err)
	}
}

// waitAllReplies waits until n replies are finished in #general.
func (h *harness) waitAllReplies(n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_ = h.emu.WaitFor(ctx, func() bool {
		done := 0
		for _, m := range h.emu.Messages(slackemu.ChannelGen) {
			if m.IsBot() || m.ThreadTS != "" {
				continue
			}
			if _, _, ok := h.replyText(slackemu.ChannelGen, m.TS); ok {
				done++
			}
		}
		return done >= n
	})
}

// threadFirstText notes when each turn's first model text reaches the
// bot, by the ts of the turn's last message (the thread of a new mention).
type threadFirstText struct {
	next bot.Runner
	mu   sync.Mutex
	at   map[string]time.Time
}

type threadFirstObserver struct {
	next agent.Observer
	r    *threadFirstText
	ts   string
	seen bool
}

func (o *threadFirstObserver) Observe(ev agent.Event) {
	if ev.Kind == agent.EventText && !o.seen {
		o.seen = true
		o.r.mu.Lock()
		o.r.at[o.ts] = time.Now()
		o.r.mu.Unlock()
	}
	o.next.Observe(ev)
}

func (r *threadFirstText) Run(ctx context.Context, t agent.Turn) (agent.Result, error) {
	ts := ""
	if n := len(t.History); n > 0 {
		ts = t.History[n-1].Meta["ts"]
	}
	t.Observer = &threadFirstObserver{next: t.Observer, r: r, ts: ts}
	return r.next.Run(ctx, t)
}

// BenchmarkFirstVisibleTextFourReplies: four replies start at once in four
// channels under the default budgets (Slack's tiers, the emulator's
// conservative bursts, real time): time from each turn's first model text
// to the first Slack version of its reply showing text. Four is the most
// that stream at once with chat.update's burst of 5 (issue 11: ≤ 300 ms
// when fewer than 5 replies stream). Use -benchtime=Nx: each iteration
// waits for its four replies and for the budget to refill.
func BenchmarkFirstVisibleTextFourReplies(b *testing.B) {
	ftr := &threadFirstText{at: map[string]time.Time{}}
	h := newHarness(b, harnessOpts{bot: func(o *bot.Options) {
		ftr.next = o.Agent
		o.Agent = ftr
		o.UserTurnsPerMinute = 1000000
		o.RateLimits = slackapi.DefaultRateLimits()
	}})
	chans := []string{"C8001", "C8002", "C8003", "C8004"}
	for _, c := range chans {
		h.emu.AddChannel(slackemu.TeamID, slackemu.Channel{ID: c, Name: c, BotMember: true})
	}
	h.llm.SetTokenInterval(20 * time.Millisecond)
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		var ps []slackemu.Posted
		for j, c := range chans {
			ps = append(ps, h.emu.Mention(slackemu.TeamID, c, slackemu.UserAlice, fmt.Sprintf("latency %d/%d", i, j), ""))
		}
		for j, p := range ps {
			h.waitReplyB(b, chans[j], p.TS)
			ftr.mu.Lock()
			first := ftr.at[p.TS]
			ftr.mu.Unlock()
			for _, v := range h.emu.BotReplies(chans[j], p.TS)[0].History {
				if strings.TrimSpace(v.Text+v.MarkdownText) != "" {
					lat = append(lat, v.Time.Sub(first))
					break
				}
			}
		}
		// The replies spent most of chat.update's burst: let it refill
		// (45/min) so every iteration starts alike.
		b.StopTimer()
		time.Sleep(8 * time.Second)
		b.StartTimer()
	}
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(slices.Max(lat).Microseconds())/1000, "max-ms")
	if rl := h.emu.RateLimited(); len(rl) != 0 {
		b.Errorf("Slack answered 429: %v", rl)
	}
}
