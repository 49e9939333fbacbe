package bot

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/session"
)

// Action ids of the bot's buttons.
const actionStop = "bobbin_stop"

// nativeLifetime is how long a native stream is used before the reply
// continues with edits.
const nativeLifetime = 4 * time.Minute

// thinkingDelay is how long a turn may stay silent before a status message
// appears.
const thinkingDelay = 800 * time.Millisecond

// streamer renders one turn into the thread. It implements agent.Observer:
// Observe only records and signals (lossy progress); loop coalesces the text
// into Slack calls; finish delivers the final text (must-deliver).
type streamer struct {
	b         *Bot
	k         session.ThreadKey
	requester string
	assistant bool // a DM or assistant thread: status via setStatus
	native    bool
	start     time.Time

	mu        sync.Mutex
	text      strings.Builder
	status    string
	tasks     []slack.StreamChunk // tool progress for a native stream, not yet sent
	firstText time.Time
	wake      chan struct{}
	stop      chan struct{}
	stopOnce  sync.Once

	// Owned by loop, then by finish.
	posted    []postedMsg
	ns        nativeStream
	shownText bool
	backoff   time.Time // after a 429: no lossy edits before this

	// guard, when set, is checked before every Slack write (the lease's
	// Renew); onPost learns the reply's first ts (takeover.go).
	guard    func(context.Context) error
	onPost   func(ctx context.Context, ts string)
	lost     bool
	reported bool
}

// postedMsg is one message of the reply.
type postedMsg struct {
	ts       string
	rendered string    // what the message shows (a key for "changed")
	at       time.Time // last post or edit
	// markdownText: the message was created by a native stream and is
	// edited with markdown_text (no blocks: same representation).
	markdownText bool
}

// nativeStream is the state of a chat.startStream message.
type nativeStream struct {
	ts      string
	sent    int // bytes of the answer already appended
	at      time.Time
	started time.Time
	failed  bool
	stopped bool
}

func newStreamer(b *Bot, k session.ThreadKey, m inbound) *streamer {
	mode := b.opts.StreamMode
	return &streamer{
		b:         b,
		k:         k,
		requester: m.User,
		assistant: strings.HasPrefix(k.Channel, "D"),
		native:    mode == StreamNative || mode == StreamAuto,
		start:     time.Now(),
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
	}
}

// Observe records progress; it never blocks.
func (r *streamer) Observe(ev agent.Event) {
	r.mu.Lock()
	switch ev.Kind {
	case agent.EventStep:
		if s := r.text.String(); ev.Step > 1 && s != "" && !strings.HasSuffix(s, "\n\n") {
			r.text.WriteString("\n\n")
		}
		r.status = "Thinking…"
	case agent.EventText:
		if r.firstText.IsZero() && ev.Text != "" {
			r.firstText = time.Now()
		}
		r.text.WriteString(ev.Text)
		r.status = ""
	case agent.EventReasoning:
		r.status = "Thinking…"
	case agent.EventApprovalNeeded:
		r.status = "Waiting for approval to run " + toolName(ev) + "…"
	case agent.EventToolStarted:
		r.status = "Running " + toolName(ev) + "…"
		if r.native {
			c := slack.NewTaskUpdateChunk(ev.Call.ID, "Running "+toolName(ev))
			c.Status = slack.TaskCardStatusInProgress
			r.tasks = append(r.tasks, c)
		}
	case agent.EventToolFinished:
		r.status = "Thinking…"
		result := "ok"
		if ev.IsError {
			result = "error"
		}
		r.b.m.ToolCalls.WithLabelValues(ev.Decision.String(), result).Inc()
		if r.native && ev.Call.ID != "" {
			c := slack.NewTaskUpdateChunk(ev.Call.ID, toolName(ev))
			c.Status = slack.TaskCardStatusComplete
			if ev.IsError {
				c.Status = slack.TaskCardStatusError
			}
			r.tasks = append(r.tasks, c)
		}
	case agent.EventCompacted:
		r.status = "Summarizing the earlier conversation…"
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func toolName(ev agent.Event) string {
	if ev.Hints.Server != "" && ev.Hints.Tool != "" {
		return ev.Hints.Server + "/" + ev.Hints.Tool
	}
	return ev.Call.Name
}

func (r *streamer) snapshot() (text, status string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.text.String(), r.status
}

// loop coalesces progress into Slack calls until close.
func (r *streamer) loop(ctx context.Context) {
	tick := time.NewTicker(max(r.b.opts.EditInterval/4, 50*time.Millisecond))
	defer tick.Stop()
	lastStatus := ""
	for {
		select {
		case <-r.stop:
			return
		case <-ctx.Done():
			return
		case <-r.wake:
			// Deltas wake the loop only until the reply is on screen
			// (first text as soon as possible); after that the ticker
			// paces the edits.
			if r.onScreen() {
				continue
			}
		case <-tick.C:
		}
		_, status := r.snapshot()
		if r.assistant && status != lastStatus && status != "" {
			r.setStatus(ctx, status)
		}
		lastStatus = status
		r.flush(ctx, false)
	}
}

// onScreen reports whether the reply already shows text.
func (r *streamer) onScreen() bool { return r.shownText }

// close stops the loop; finish may run after it returns.
func (r *streamer) close() { r.stopOnce.Do(func() { close(r.stop) }) }

// replyTS is the first message of the reply ("" if none).
func (r *streamer) replyTS() string {
	if len(r.posted) > 0 {
		return r.posted[0].ts
	}
	return r.ns.ts
}

// finish delivers the final answer: the streamed text (or final when the
// stream showed none) followed by footer. It retries rate limits until ctx
// ends.
func (r *streamer) finish(ctx context.Context, final, footer string) {
	r.mu.Lock()
	if strings.TrimSpace(r.text.String()) == "" && final != "" {
		r.text.WriteString(final)
	}
	if footer != "" {
		if s := r.text.String(); s != "" && !strings.HasSuffix(s, "\n") {
			r.text.WriteString("\n\n")
		}
		r.text.WriteString(footer)
	}
	if strings.TrimSpace(r.text.String()) == "" {
		r.text.WriteString("_(no answer)_")
	}
	r.status = ""
	r.mu.Unlock()
	r.flush(ctx, true)
	if r.assistant {
		r.setStatus(ctx, "")
	}
}

// flush brings Slack up to date. Lossy (final=false) flushes skip edits
// that are not due or not within the workspace budget; the final flush
// waits for both.
func (r *streamer) flush(ctx context.Context, final bool) {
	text, status := r.snapshot()
	if r.native && !r.ns.failed {
		if r.flushNative(ctx, text, final) {
			return
		}
	}
	if r.native {
		r.ensureStopped(ctx)
	}
	if strings.TrimSpace(text) == "" {
		if final || status == "" || len(r.posted) > 0 || time.Since(r.start) < thinkingDelay || r.assistant {
			return
		}
		// Silent so far: show the status with the Stop button.
		r.post(ctx, "", status, true)
		return
	}
	if !final && time.Now().Before(r.backoff) {
		return
	}
	pieces := Split(text, SplitLimit)
	render := func(i int) (content, st string, live bool) {
		content, live = pieces[i], i == len(pieces)-1 && !final
		if live {
			content, st = Live(content), status
		}
		return content, st, live
	}
	// New pieces first, then edits of the earlier ones: the reply always
	// shows a live message (with Stop) until the final text is complete.
	for i := len(r.posted); i < len(pieces); i++ {
		content, st, live := render(i)
		if !r.post(ctx, content, st, live) {
			return
		}
	}
	for i := range pieces {
		content, st, live := render(i)
		p := &r.posted[i]
		if p.rendered == renderKey(content, st, live, p.markdownText) {
			continue
		}
		if !final && r.shownText && time.Since(p.at) < r.b.opts.EditInterval {
			// (The first text replaces a status message at once.)
			continue
		}
		if !r.update(ctx, p, content, st, live, final) {
			return
		}
	}
	if final && len(pieces) > 0 && len(r.posted) > len(pieces) {
		// The answer needs fewer messages than were posted (rare: a split
		// point moved): nothing stale may stay.
		for _, p := range r.posted[len(pieces):] {
			_, _, _ = r.b.api.DeleteMessageContext(ctx, r.k.Channel, p.ts)
		}
		r.posted = r.posted[:len(pieces)]
	}
}

func renderKey(content, status string, live, markdownText bool) string {
	k := content + "\x00" + status
	if live {
		k += "\x00live"
	}
	if markdownText {
		k += "\x00md"
	}
	return k
}

// msgOptions renders a piece of the answer: a markdown block (standard
// Markdown, escaped), an optional status context line and Stop button, and
// the mrkdwn text fallback; link and media unfurls off.
func (r *streamer) msgOptions(content, status string, live, markdownText bool) []slack.MsgOption {
	opts := []slack.MsgOption{slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl()}
	if markdownText {
		// markdown_text excludes text and blocks (markdown_text_conflict).
		return append(opts, slack.MsgOptionMarkdownText(Markdown(content)))
	}
	var blocks []slack.Block
	if strings.TrimSpace(content) != "" {
		blocks = append(blocks, slack.NewMarkdownBlock("", Markdown(content)))
	}
	if status != "" {
		blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, "_"+EscapeText(status)+"_", false, false)))
	}
	if live {
		btn := slack.NewButtonBlockElement(actionStop, r.k.String(), slack.NewTextBlockObject(slack.PlainTextType, "Stop", false, false))
		btn.Style = slack.StyleDanger
		blocks = append(blocks, slack.NewActionBlock("bobbin_controls", btn))
	}
	fallback := Fallback(content)
	if fallback == "" {
		fallback = EscapeText(status)
	}
	return append(opts, slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(fallback, false))
}

// post adds a message to the reply; false when it failed (the next flush
// retries).
func (r *streamer) post(ctx context.Context, content, status string, live bool) bool {
	if !r.allowed(ctx) {
		return false
	}
	opts := append(r.msgOptions(content, status, live, false), slack.MsgOptionTS(r.k.ThreadTS))
	for {
		_, ts, err := r.b.api.PostMessageContext(ctx, r.k.Channel, opts...)
		if err == nil {
			r.posted = append(r.posted, postedMsg{ts: ts, rendered: renderKey(content, status, live, false), at: time.Now()})
			r.recordPost(ctx, ts)
			r.visible(content)
			return true
		}
		if !r.retry(ctx, err, true) {
			r.b.log.Warn("bot: posting the reply failed", append(threadAttrs(r.k.Team, r.k.Channel, r.k.ThreadTS), "err", err)...)
			return false
		}
	}
}

// update edits a posted message. Lossy edits spend the workspace's shared
// chat.update budget and give up on a 429; the final edit waits.
func (r *streamer) update(ctx context.Context, p *postedMsg, content, status string, live, final bool) bool {
	// One GCRA bucket per workspace, two tolerances: lossy edits pass only
	// while most of the burst is unspent, so final edits (larger
	// tolerance) always find room.
	burst := max(r.b.opts.UpdatesPerMinute/3, 4)
	if !final {
		burst = max(r.b.opts.UpdatesPerMinute/10, 2)
	}
	for {
		ok, wait, err := r.b.store.Take(ctx, r.k.Team+":chat.update", r.b.opts.UpdatesPerMinute, burst)
		if err == nil && !ok {
			if !final {
				// Skipped; no lossy edit before the budget has room.
				r.backoff = time.Now().Add(wait)
				return true
			}
			if !sleepCtx(ctx, wait) {
				return false
			}
			continue
		}
		break
	}
	if !r.allowed(ctx) {
		return false
	}
	opts := r.msgOptions(content, status, live, p.markdownText)
	for {
		_, _, _, err := r.b.api.UpdateMessageContext(ctx, r.k.Channel, p.ts, opts...)
		if err == nil {
			p.rendered = renderKey(content, status, live, p.markdownText)
			p.at = time.Now()
			r.visible(content)
			return true
		}
		if !r.retry(ctx, err, final) {
			if final {
				r.b.log.Warn("bot: final edit failed", append(threadAttrs(r.k.Team, r.k.Channel, r.k.ThreadTS), "err", err)...)
			}
			return false
		}
	}
}

// retry decides whether to retry a failed call: rate limits are honoured
// (waiting when must is set, else backing off lossy edits); other errors
// are retried once a second a few times for must-deliver calls.
func (r *streamer) retry(ctx context.Context, err error, must bool) bool {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		wait := max(rl.RetryAfter, time.Second)
		r.backoff = time.Now().Add(wait)
		return must && sleepCtx(ctx, wait)
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return false // Slack said no; retrying the same call will not help
	}
	return must && sleepCtx(ctx, time.Second)
}

// visible records the time to first visible text.
func (r *streamer) visible(content string) {
	if r.shownText || strings.TrimSpace(content) == "" {
		return
	}
	r.shownText = true
	r.mu.Lock()
	first := r.firstText
	r.mu.Unlock()
	if !first.IsZero() {
		r.b.m.FirstText.Observe(time.Since(first).Seconds())
	}
}

// setStatus shows the assistant-thread status (best effort).
func (r *streamer) setStatus(ctx context.Context, status string) {
	err := r.b.api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{
		ChannelID: r.k.Channel, ThreadTS: r.k.ThreadTS, Status: status,
	})
	if err != nil {
		r.b.log.Debug("bot: setStatus failed", "err", err)
	}
}

// flushNative streams the answer with chat.startStream/appendStream/
// stopStream. It returns false when the edit path must take over: the
// stream failed or expired, or the answer outgrew one message. The edit
// path then rewrites the stream's message with the whole text, so nothing
// is lost or repeated.
func (r *streamer) flushNative(ctx context.Context, text string, final bool) bool {
	ns := &r.ns
	api := r.b.api
	r.mu.Lock()
	tasks := r.tasks
	r.tasks = nil
	r.mu.Unlock()
	if len(tasks) > 0 && !r.sendTasks(ctx, tasks) {
		return false
	}
	if strings.TrimSpace(text) == "" {
		return true
	}
	// Streams die about 5 minutes after they start
	// (message_not_in_streaming_state): finish with edits before that.
	if len(Split(text, SplitLimit)) > 1 || (!ns.started.IsZero() && time.Since(ns.started) > nativeLifetime) {
		r.nativeFallback(ctx)
		return false
	}
	if ns.ts == "" {
		if !r.allowed(ctx) {
			return true // the lease is lost: write nothing, on either path
		}
		_, ts, err := api.StartStreamContext(ctx, r.k.Channel,
			slack.MsgOptionTS(r.k.ThreadTS),
			slack.MsgOptionMarkdownText(Markdown(text)),
			slack.MsgOptionRecipientTeamID(r.k.Team),
			slack.MsgOptionRecipientUserID(r.requester))
		if err != nil {
			r.b.log.Info("bot: native stream unavailable; using edits", "err", err)
			ns.failed = true
			return false
		}
		ns.ts, ns.sent, ns.at, ns.started = ts, len(text), time.Now(), time.Now()
		r.recordPost(ctx, ts)
		r.visible(text)
	} else if len(text) > ns.sent && (final || time.Since(ns.at) >= r.b.opts.EditInterval) {
		ok := final
		if !ok {
			var err error
			ok, _, err = r.b.store.Take(ctx, r.k.Team+":chat.appendStream", 90, 10)
			ok = ok || err != nil
		}
		if ok && !r.allowed(ctx) {
			return true
		}
		if ok {
			_, _, err := api.AppendStreamContext(ctx, r.k.Channel, ns.ts, slack.MsgOptionMarkdownText(Markdown(text[ns.sent:])))
			if err != nil {
				var se slack.SlackErrorResponse
				if errors.As(err, &se) && se.Err == "stopped_by_user" {
					// The person pressed Slack's own stop: end the turn.
					r.b.cancels.cancel(r.k, stopCause{user: r.requester})
				}
				r.b.log.Info("bot: native stream append failed; finishing with edits", "err", err)
				r.nativeFallback(ctx)
				return false
			}
			ns.sent, ns.at = len(text), time.Now()
		}
	}
	if final && !ns.stopped {
		if !r.allowed(ctx) {
			return true
		}
		if _, _, err := api.StopStreamContext(ctx, r.k.Channel, ns.ts); err != nil {
			r.nativeFallback(ctx)
			return false
		}
		ns.stopped = true
	}
	return true
}

// sendTasks shows tool progress as task_update chunks, starting the stream
// if no text has come yet. Progress is lossy: on failure the edit path
// takes over (false).
func (r *streamer) sendTasks(ctx context.Context, tasks []slack.StreamChunk) bool {
	ns := &r.ns
	if !r.allowed(ctx) {
		return true
	}
	if ns.ts == "" {
		_, ts, err := r.b.api.StartStreamContext(ctx, r.k.Channel,
			slack.MsgOptionTS(r.k.ThreadTS),
			slack.MsgOptionChunks(tasks...),
			slack.MsgOptionRecipientTeamID(r.k.Team),
			slack.MsgOptionRecipientUserID(r.requester))
		if err != nil {
			r.b.log.Info("bot: native stream unavailable; using edits", "err", err)
			ns.failed = true
			return false
		}
		ns.ts, ns.at, ns.started = ts, time.Now(), time.Now()
		r.recordPost(ctx, ts)
		return true
	}
	if _, _, err := r.b.api.AppendStreamContext(ctx, r.k.Channel, ns.ts, slack.MsgOptionChunks(tasks...)); err != nil {
		r.b.log.Info("bot: native stream append failed; finishing with edits", "err", err)
		r.nativeFallback(ctx)
		return false
	}
	return true
}

// nativeFallback ends native streaming; the stream's message becomes the
// first piece of an edit-mode reply (edited with markdown_text).
func (r *streamer) nativeFallback(ctx context.Context) {
	ns := &r.ns
	if ns.failed {
		return
	}
	ns.failed = true
	if ns.ts == "" {
		return
	}
	r.ensureStopped(ctx)
	r.posted = append(r.posted[:0], postedMsg{ts: ns.ts, markdownText: true, rendered: "\x00stream"})
}

// ensureStopped ends the native stream before the edit path touches its
// message (chat.update on a streaming message is streaming_state_conflict).
// A cancelled ctx leaves it for the final flush, which runs on a fresh one.
func (r *streamer) ensureStopped(ctx context.Context) {
	ns := &r.ns
	if ns.ts == "" || ns.stopped {
		return
	}
	_, _, err := r.b.api.StopStreamContext(ctx, r.k.Channel, ns.ts)
	var se slack.SlackErrorResponse
	if err == nil || errors.As(err, &se) {
		// Stopped now, or Slack says it is not streaming any more.
		ns.stopped = true
		return
	}
	r.b.log.Debug("bot: stopping the native stream failed", "err", err)
}

// stopClicked handles the Stop button. The same people may stop a turn as
// may approve its tool calls (mayStop); anyone else is told why nothing
// happened.
func (b *Bot) stopClicked(ctx context.Context, cb slack.InteractionCallback, value string) {
	k, ok := parseThreadKey(value)
	if !ok || k.Team != cb.Team.ID {
		return
	}
	user := cb.User.ID
	meta, requester, err := b.requesterOf(ctx, k)
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		b.log.Warn("bot: reading the session for a Stop click failed", append(threadAttrs(k.Team, k.Channel, k.ThreadTS), "err", err)...)
		b.tell(ctx, cb, k.ThreadTS, "I couldn't reach this answer's state just now, so nothing happened. Please try again in a moment.")
		return
	}
	if ok, why := b.mayStop(ctx, k.Team, user, cb.User.TeamID, requester); !ok {
		b.tell(ctx, cb, k.ThreadTS, why)
		return
	}
	if b.cancels.cancel(k, stopCause{user: user}) {
		return
	}
	// Not running here: the replica that runs it stops it (stopreq.go).
	b.log.Debug("bot: stop clicked for a turn not running here", threadAttrs(k.Team, k.Channel, k.ThreadTS)...)
	if err := b.requestStop(ctx, k, meta, user); err != nil {
		b.log.Warn("bot: recording a stop request failed", append(threadAttrs(k.Team, k.Channel, k.ThreadTS), "err", err)...)
		b.tell(ctx, cb, k.ThreadTS, "I couldn't stop this answer just now. Please try again in a moment.")
		return
	}
	b.withdrawApprovals(ctx, k, user) // a prompt the turn waits on elsewhere
}

// requesterOf returns the session's metadata and current requester. A
// Stop click is answered before its ack, so it reads the metadata alone
// when the store can (a long transcript is not needed for this).
func (b *Bot) requesterOf(ctx context.Context, k session.ThreadKey) (session.Meta, string, error) {
	var meta session.Meta
	var err error
	if ml, ok := b.store.(metaReader); ok {
		meta, err = ml.LoadMeta(ctx, k)
	} else {
		meta, _, err = b.store.Load(ctx, k)
	}
	return meta, meta.RequesterID, err
}

// parseThreadKey reads "team:channel:thread_ts" (session.ThreadKey.String).
func parseThreadKey(s string) (session.ThreadKey, bool) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return session.ThreadKey{}, false
	}
	return session.ThreadKey{Team: parts[0], Channel: parts[1], ThreadTS: parts[2]}, true
}
