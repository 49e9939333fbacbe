package bot_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// The rate-governor scenarios of issue 11: real Redis, the real slack-go
// client, the emulator with its conservative bursts (Tier 3: 5,
// chat.postMessage: 3 per channel), time-scaled so a Slack minute lasts
// scale minutes; the bots' budgets are the defaults scaled to match. One to
// three replicas are Bot instances sharing the emulator and Redis. Every
// scenario prints its figures (run with -v).

// govWorld is one emulated Slack, one model server, one Redis and n bot
// replicas.
type govWorld struct {
	t     *testing.T
	h     *harness
	scale float64
	n     int
	// replicas' metrics, in start order
	metrics []*bot.Metrics
	bots    []*bot.Bot

	// updateRate is the emulator's chat.update rate per Slack minute.
	updateRate float64

	mu    sync.Mutex
	endAt map[string]time.Time // message id → when its turn's model run ended
}

// endRunner notes when each turn's agent run ends, by the message ids the
// turn answers.
type endRunner struct {
	next bot.Runner
	w    *govWorld
}

func (r endRunner) Run(ctx context.Context, t agent.Turn) (agent.Result, error) {
	res, err := r.next.Run(ctx, t)
	ids := govIDRe.FindAllString(res.Text, -1)
	now := time.Now()
	r.w.mu.Lock()
	for _, id := range ids {
		if _, ok := r.w.endAt[id]; !ok {
			r.w.endAt[id] = now
		}
	}
	r.w.mu.Unlock()
	return res, err
}

type govOpts struct {
	replicas int
	scale    float64 // Slack time → real time (0.25: a Slack minute is 15 s)
	emu      func(*slackemu.Options)
	bot      func(*bot.Options)
}

// scaledLimits are the default budgets for a Slack whose minute lasts
// scale real minutes.
func scaledLimits(scale float64) map[string]slackapi.RateLimit {
	out := slackapi.DefaultRateLimits()
	for m, l := range out {
		l.PerMinute = int(float64(l.PerMinute) / scale)
		l.ChannelPerMinute = int(float64(l.ChannelPerMinute) / scale)
		out[m] = l
	}
	return out
}

func newGovWorld(t *testing.T, o govOpts) *govWorld {
	t.Helper()
	o.replicas = max(o.replicas, 1)
	w := &govWorld{t: t, scale: o.scale, n: o.replicas, endAt: map[string]time.Time{}, updateRate: slackemu.Tier3}
	eo := slackemu.Options{TimeScale: o.scale}
	if o.emu != nil {
		o.emu(&eo)
	}
	w.h = newHarness(t, harnessOpts{emu: eo, bot: func(b *bot.Options) {
		b.RateLimits = scaledLimits(o.scale)
		b.EditInterval = w.slack(time.Second)
		b.UserTurnsPerMinute = 1_000_000
		b.MaxConcurrentTurns = 64
		b.Metrics = bot.NewMetrics(nil)
		b.Agent = endRunner{next: b.Agent, w: w}
		if o.bot != nil {
			o.bot(b)
		}
		w.metrics = append(w.metrics, b.Metrics)
	}})
	for range o.replicas - 1 {
		w.startReplica()
	}
	for i := range 20 {
		w.h.emu.AddChannel(slackemu.TeamID, slackemu.Channel{ID: govChannel(i), Name: fmt.Sprintf("load-%d", i), BotMember: true})
	}
	return w
}

func govChannel(i int) string { return fmt.Sprintf("C9%03d", i) }

// slack is d of Slack time in real time.
func (w *govWorld) slack(d time.Duration) time.Duration { return time.Duration(float64(d) * w.scale) }

// startReplica runs one more bot on the same emulator, model and Redis.
func (w *govWorld) startReplica() {
	w.t.Helper()
	o := w.h.opts
	o.ReplicaID = ""
	o.Metrics = bot.NewMetrics(nil)
	w.metrics = append(w.metrics, o.Metrics)
	b, err := bot.New(o)
	if err != nil {
		w.t.Fatal(err)
	}
	w.bots = append(w.bots, b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	w.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			w.t.Errorf("replica Run: %v", err)
		}
	})
	w.h.wait("replica connected", func() bool { return b.Ready(context.Background()) == nil })
}

// ask is one mention in a new thread, and the answer it must get.
type ask struct {
	channel, ts, id string
	want            string
}

// answerText is the scripted answer to message id, words long.
func answerText(id string, words int) string {
	filler := []string{"alpha", "bravo", "delta", "gamma", "kilo", "lima", "mike", "oscar"}
	var b strings.Builder
	b.WriteString("Answer to " + id + ":")
	for i := range words {
		b.WriteString(" " + filler[i%len(filler)])
	}
	b.WriteString(" End of " + id + ".")
	return b.String()
}

var govIDRe = regexp.MustCompile(`msg-[0-9]+`)

// answerEach makes the model answer every message id it has not answered
// yet in the conversation (a turn may take in several queued messages).
func (w *govWorld) answerEach(words int) {
	w.h.llm.SetResponder(func(r llmemu.Recorded) llmemu.Reply {
		var ids []string
		for i := len(r.Messages) - 1; i >= 0 && r.Messages[i].Role != "assistant"; i-- {
			if r.Messages[i].Role == "user" {
				ids = append(ids, govIDRe.FindAllString(r.Messages[i].Text, -1)...)
			}
		}
		slices.Reverse(ids)
		parts := make([]string, len(ids))
		for i, id := range ids {
			parts[i] = answerText(id, words)
		}
		return llmemu.Reply{Text: strings.Join(parts, "\n\n")}
	})
}

// figures are a scenario's measurements, in Slack time.
type figures struct {
	name          string
	replies       int
	lastComplete  time.Duration // from the first mention to the last reply complete
	limited       map[string]int
	calls         map[string]int // by method, from the start
	updateUse     float64        // chat.update calls / (rate × window + burst)
	updateRateUse float64        // chat.update calls / (rate × window)
	window        time.Duration
	edited        int // replies with at least one edit
	// tail is how long after the model's answer was complete each reply
	// was complete in Slack (max and median).
	tailMax, tailMedian time.Duration
	// heldEdited counts messages posted complete (no Stop button) and
	// edited afterwards: there must be none.
	heldEdited int
}

// settle waits for every ask to be answered completely and gathers the
// figures; it fails the test on a wrong or duplicated answer.
func (w *govWorld) settle(name string, asks []ask, start time.Time) figures {
	w.t.Helper()
	h := w.h
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := h.emu.WaitFor(ctx, func() bool {
		for _, a := range asks {
			if _, _, done := h.replyText(a.channel, a.ts); !done {
				return false
			}
		}
		return true
	})
	if err != nil {
		n := 0
		for _, a := range asks {
			if _, _, done := h.replyText(a.channel, a.ts); done {
				n++
			}
		}
		w.t.Fatalf("%s: %d of %d replies complete: %v", name, n, len(asks), err)
	}
	f := figures{name: name, replies: len(asks), limited: h.emu.RateLimited(), calls: map[string]int{}}
	var last time.Time
	var tails []time.Duration
	for _, a := range asks {
		got, n, _ := h.replyText(a.channel, a.ts)
		var done time.Time
		if got != a.want {
			w.t.Errorf("%s: reply in %s/%s = %q, want %q", name, a.channel, a.ts, got, a.want)
		}
		if n != len(mrkdwn.Split(a.want, mrkdwn.SplitLimit)) {
			w.t.Errorf("%s: reply in %s/%s is %d messages", name, a.channel, a.ts, n)
		}
		edited := false
		for _, m := range h.emu.BotReplies(a.channel, a.ts) {
			if v := m.History[len(m.History)-1]; v.Time.After(done) {
				done = v.Time
			}
			edited = edited || len(m.History) > 1
			if m.Via == "chat.postMessage" && !strings.Contains(string(m.History[0].Blocks), "bobbin_stop") && len(m.History) > 1 {
				f.heldEdited++
			}
		}
		if edited {
			f.edited++
		}
		if done.After(last) {
			last = done
		}
		w.mu.Lock()
		at, ok := w.endAt[a.id]
		w.mu.Unlock()
		if ok {
			tails = append(tails, time.Duration(float64(done.Sub(at))/w.scale))
		}
	}
	if len(tails) > 0 {
		f.tailMax, f.tailMedian = slices.Max(tails), percentile(tails, 0.5)
	}
	f.lastComplete = time.Duration(float64(last.Sub(start)) / w.scale)
	var first, lastUpd time.Time
	updates := 0
	for _, c := range h.emu.Journal() {
		if c.Time.Before(start) {
			continue
		}
		f.calls[c.Method]++
		if c.Method == "chat.update" {
			updates++
			if first.IsZero() {
				first = c.Time
			}
			lastUpd = c.Time
		}
	}
	if updates > 1 {
		f.window = time.Duration(float64(lastUpd.Sub(first)) / w.scale)
		rate, burst := w.updateRate, 5.0 // the emulator's chat.update
		f.updateRateUse = float64(updates) / (rate * f.window.Minutes())
		f.updateUse = float64(updates) / (rate*f.window.Minutes() + burst)
	}
	return f
}

// check fails on any 429 and on calls that skipped the governor, and logs
// the figures.
func (w *govWorld) check(f figures) {
	w.t.Helper()
	if len(f.limited) != 0 {
		w.t.Errorf("%s: Slack answered 429: %v", f.name, f.limited)
	}
	if f.heldEdited != 0 {
		w.t.Errorf("%s: %d messages posted complete were edited afterwards", f.name, f.heldEdited)
	}
	w.checkGoverned()
	w.log(f)
}

func (w *govWorld) checkGoverned() {
	w.t.Helper()
	w.h.mu.Lock()
	all := append([]*bot.Bot{w.h.bot}, w.bots...)
	w.h.mu.Unlock()
	for _, b := range all {
		for m := range bot.UngovernedCalls(b) {
			if m != "auth.test" && m != "apps.connections.open" {
				w.t.Errorf("%s calls bypassed the governor", m)
			}
		}
	}
}

func (w *govWorld) log(f figures) {
	w.t.Helper()
	methods := make([]string, 0, len(f.calls))
	for m := range f.calls {
		methods = append(methods, m)
	}
	sort.Strings(methods)
	var per []string
	for _, m := range methods {
		per = append(per, fmt.Sprintf("%s %.2f", m, float64(f.calls[m])/float64(f.replies)))
	}
	w.t.Logf("%s [%d replica(s), Slack time ×%.2f]: %d replies, last complete after %.1f s, 429s %v, %d replies edited; calls per reply: %s",
		f.name, w.n, w.scale, f.replies, f.lastComplete.Seconds(), f.limited, f.edited, strings.Join(per, ", "))
	if f.tailMax != 0 {
		w.t.Logf("%s: reply complete in Slack after the model's answer: median %.2f s, max %.2f s",
			f.name, f.tailMedian.Seconds(), f.tailMax.Seconds())
	}
	if f.window > 0 {
		w.t.Logf("%s: chat.update budget use %.0f %% of rate×window+burst (%.0f %% of the rate) over %.1f s",
			f.name, 100*f.updateUse, 100*f.updateRateUse, f.window.Seconds())
	}
	var waits []string
	for i, m := range w.metrics {
		waits = append(waits, fmt.Sprintf("replica %d: dropped %v", i, droppedCounts(m)))
	}
	w.t.Logf("%s: %s", f.name, strings.Join(waits, "; "))
}

func droppedCounts(m *bot.Metrics) map[string]float64 {
	out := map[string]float64{}
	for _, method := range []string{"chat.update", "chat.postMessage", "reactions.add", "chat.appendStream", "chat.startStream", "assistant.threads.setStatus"} {
		for _, reason := range []string{"dropped", "merged"} {
			if v := counterValue(m.SlackDropped.WithLabelValues(method, reason)); v > 0 {
				out[method+"/"+reason] = v
			}
		}
	}
	return out
}

var govUsers = []string{slackemu.UserAlice, slackemu.UserBob, slackemu.UserAdmin, slackemu.UserOwner}

// burst sends n mentions in n threads over channels, spread evenly over
// within (Slack time); each answer is words long.
func (w *govWorld) burst(n, channels, words int, within time.Duration) ([]ask, time.Time) {
	asks := make([]ask, n)
	start := time.Now()
	gap := w.slack(within) / time.Duration(n)
	for i := range n {
		id := fmt.Sprintf("msg-%d", i+1)
		ch := govChannel(i % channels)
		p := w.h.emu.Mention(slackemu.TeamID, ch, govUsers[i%len(govUsers)], "please answer "+id, "")
		asks[i] = ask{channel: ch, ts: p.TS, id: id, want: answerText(id, words)}
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	return asks, start
}

// TestGovernorBurst50: 50 people mention the bot in 50 threads over 10
// channels within 5 s (short answers): every reply complete, no 429, one
// message each, and a reply posted complete never edited.
func TestGovernorBurst50(t *testing.T) {
	for _, replicas := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			w := newGovWorld(t, govOpts{replicas: replicas, scale: 0.25})
			w.answerEach(10)
			w.h.llm.SetTokenInterval(w.slack(20 * time.Millisecond))
			asks, start := w.burst(50, 10, 10, 5*time.Second)
			f := w.settle("burst-50", asks, start)
			w.check(f)
		})
	}
}

// TestGovernorStream10: 10 replies stream at once in 10 channels, about
// 6 s of model stream each: complete with no 429, the last word not held
// up by the budget (figure: time past the stream).
func TestGovernorStream10(t *testing.T) {
	for _, mode := range []string{bot.StreamEdit, bot.StreamNative} {
		t.Run(mode, func(t *testing.T) {
			w := newGovWorld(t, govOpts{scale: 0.25, bot: func(o *bot.Options) { o.StreamMode = mode }})
			const words = 60 // ≈ 100 deltas
			w.answerEach(words)
			deltas := len(llmemu.Tokens(answerText("msg-1", words)))
			stream := 6 * time.Second
			w.h.llm.SetTokenInterval(w.slack(stream / time.Duration(deltas)))
			asks, start := w.burst(10, 10, words, 0)
			f := w.settle("stream-10-"+mode, asks, start)
			w.check(f)
		})
	}
}

// TestGovernorWords20: 20 replies of 100 words stream at once in one
// workspace (chat.update 50/min, burst 5): no 429, every final text the
// model's, and the chat.update budget used while replies waited.
func TestGovernorWords20(t *testing.T) {
	for _, replicas := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			w := newGovWorld(t, govOpts{replicas: replicas, scale: 0.25})
			w.answerEach(100)
			// About 105 deltas over 8 s of Slack time.
			interval := w.slack(80 * time.Millisecond)
			w.h.llm.SetTokenInterval(interval)
			asks, start := w.burst(20, 10, 100, 0)
			f := w.settle("words-20", asks, start)
			w.check(f)
		})
	}
}

// TestGovernorStorm200: 200 mentions over 20 threads, one per thread per
// second, with 60 envelopes redelivered and 20 messages re-sent under new
// event ids: every mention answered exactly once, no 429 (reactions
// included: the :eyes: on queued messages is lossy).
func TestGovernorStorm200(t *testing.T) {
	f, n := runStorm200(t)
	t.Logf("storm-200: %d mentions, %d bot messages, %d reactions added", n, f.replies, f.calls["reactions.add"])
}

// runStorm200 runs the storm of TestGovernorStorm200, checks it (429s
// included) and returns its figures and the number of mentions.
func runStorm200(t *testing.T) (figures, int) {
	w := newGovWorld(t, govOpts{scale: 0.25, emu: func(o *slackemu.Options) { o.MessageEventsOnMention = true }})
	w.answerEach(6)
	w.h.llm.SetTokenInterval(w.slack(30 * time.Millisecond))
	const threads, rounds = 20, 10
	roots := make([]string, threads)
	chans := make([]string, threads)
	var envs []string
	start := time.Now()
	n := 0
	for round := range rounds {
		for i := range threads {
			n++
			id := fmt.Sprintf("msg-%d", n)
			chans[i] = govChannel(i % 10)
			p := w.h.emu.Mention(slackemu.TeamID, chans[i], govUsers[i%len(govUsers)], "please answer "+id, roots[i])
			if round == 0 {
				roots[i] = p.TS
			}
			envs = append(envs, p.Envelope)
		}
		time.Sleep(w.slack(time.Second))
	}
	for i, e := range envs {
		switch {
		case i%10 < 3 && i < 200: // 60 redelivered as they are
			if err := w.h.emu.Redeliver(e); err != nil {
				t.Fatal(err)
			}
		case i%10 == 5: // 20 re-sent under a new event id
			if _, _, err := w.h.emu.Resend(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Every id answered, each exactly once.
	count := func() (answered, dup int) {
		seen := map[string]int{}
		for i := range threads {
			for _, m := range w.h.emu.BotReplies(chans[i], roots[i]) {
				if m.Deleted {
					continue
				}
				text, live := messageText(m)
				if live || m.Streaming {
					continue
				}
				inMsg := map[string]bool{}
				for _, id := range govIDRe.FindAllString(text, -1) {
					if !inMsg[id] && strings.Contains(text, "End of "+id+".") {
						inMsg[id] = true
						seen[id]++
					}
				}
			}
		}
		for _, k := range seen {
			if k > 1 {
				dup++
			}
		}
		return len(seen), dup
	}
	w.h.wait("every mention answered", func() bool { a, _ := count(); return a >= n })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, e := range w.h.emu.Envelopes() {
		if _, err := w.h.emu.WaitAck(ctx, e.ID); err != nil {
			t.Fatalf("envelope %s: %v", e.ID, err)
		}
	}
	time.Sleep(w.slack(3 * time.Second)) // let any duplicate turn show
	answered, dup := count()
	var last time.Time
	replies := 0
	for i := range threads {
		for _, m := range w.h.emu.BotReplies(chans[i], roots[i]) {
			replies++
			if v := m.History[len(m.History)-1]; v.Time.After(last) {
				last = v.Time
			}
		}
	}
	if answered != n || dup != 0 {
		t.Errorf("%d of %d mentions answered, %d answered more than once", answered, n, dup)
	}
	f := figures{name: "storm-200", replies: replies, limited: w.h.emu.RateLimited(), calls: map[string]int{}}
	for _, c := range w.h.emu.Journal() {
		if !c.Time.Before(start) {
			f.calls[c.Method]++
		}
	}
	f.lastComplete = time.Duration(float64(last.Sub(start)) / w.scale)
	w.check(f)
	return f, n
}

// TestGovernor429PausesEveryReplica: a 429 one replica gets pauses the
// method for all of them until Retry-After has passed, and the replies
// still complete.
func TestGovernor429PausesEveryReplica(t *testing.T) {
	w := newGovWorld(t, govOpts{replicas: 3, scale: 0.25})
	w.answerEach(60)
	w.h.llm.SetTokenInterval(w.slack(60 * time.Millisecond))
	// The next chat.update, whichever replica makes it, is refused.
	w.h.emu.InjectFault("chat.update", slackemu.Fault{Status: 429, RetryAfter: 2})
	asks, start := w.burst(6, 6, 60, 0)
	f := w.settle("pause", asks, start)
	var limitedAt time.Time
	inFlight := 0
	for _, c := range w.h.emu.Calls("chat.update") {
		if c.Status == 429 {
			limitedAt = c.Time
			continue
		}
		if limitedAt.IsZero() {
			continue
		}
		switch d := c.Time.Sub(limitedAt); {
		case d < 100*time.Millisecond && inFlight < 2:
			// Sent by another replica before the 429 reached the one
			// that got it: already in flight, not a call the pause
			// could stop (at most one per other replica).
			inFlight++
		case d < 2*time.Second-50*time.Millisecond:
			t.Errorf("chat.update called %v after the 429 (Retry-After 2 s)", d)
		}
	}
	if limitedAt.IsZero() {
		t.Fatal("the injected 429 was never served")
	}
	if got := f.limited["chat.update"]; got != 1 {
		t.Errorf("%d 429s on chat.update, want only the injected one", got)
	}
	w.checkGoverned()
	w.log(f)
}

// TestGovernorStricterSlack: a Slack with half the default rates. The
// bots learn the smaller limits from 429s: none after the first (Slack)
// minute, and every reply completes.
func TestGovernorStricterSlack(t *testing.T) {
	const scale = 0.1
	w := newGovWorld(t, govOpts{replicas: 2, scale: scale, emu: func(o *slackemu.Options) {
		half := slackemu.DefaultRateLimits()
		for m, l := range half {
			l.Limit /= 2
			l.WorkspaceLimit /= 2
			half[m] = l
		}
		o.RateLimits = half
	}})
	w.updateRate = slackemu.Tier3 / 2
	w.answerEach(30)
	w.h.llm.SetTokenInterval(w.slack(40 * time.Millisecond))
	// First eight mentions at once in one channel (chat.postMessage's
	// smaller per-channel rate), then two Slack minutes of steady load: a
	// mention every 1.5 s over 6 channels (one a channel every 9 s),
	// answers streaming ~3 s.
	asks, start := w.burst(8, 1, 30, 0)
	for i := len(asks); time.Since(start) < w.slack(2*time.Minute); i++ {
		id := fmt.Sprintf("msg-%d", i+1)
		ch := govChannel(1 + i%6)
		p := w.h.emu.Mention(slackemu.TeamID, ch, govUsers[i%len(govUsers)], "please answer "+id, "")
		asks = append(asks, ask{channel: ch, ts: p.TS, id: id, want: answerText(id, 30)})
		time.Sleep(w.slack(1500 * time.Millisecond))
	}
	f := w.settle("stricter-slack", asks, start)
	var lastLimited time.Duration
	byMinute := map[int]int{}
	for _, c := range w.h.emu.Journal() {
		if c.Status == 429 {
			at := time.Duration(float64(c.Time.Sub(start)) / scale)
			byMinute[int(at/time.Minute)]++
			lastLimited = max(lastLimited, at)
		}
	}
	t.Logf("stricter-slack: 429s by Slack minute %v, last at %.0f s", byMinute, lastLimited.Seconds())
	if lastLimited > time.Minute {
		t.Errorf("429s went on for %.0f s (Slack time), want them to stop within a minute", lastLimited.Seconds())
	}
	w.checkGoverned()
	w.log(f)
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
