package stream

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot/internal/pause"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// ActionStop is the action id of the Stop button of a live reply; its
// value is the thread's session.ThreadKey.String(). The root routes its
// clicks (it needs the Bot: who may stop, the running turns).
const ActionStop = "bobbin_stop"

// thinkingDelay is how long a turn may stay silent before a status message
// appears.
const thinkingDelay = 800 * time.Millisecond

// Mode is how a reply is rendered: Edit (post and edit messages), Native
// (chat.startStream/appendStream/stopStream, then edits) or Auto (native).
type Mode string

// The modes (bot.Options.StreamMode's values).
const (
	Edit   Mode = "edit"
	Native Mode = "native"
	Auto   Mode = "auto"
)

// Budget is the governor's side a reply needs: the rate of chat.update
// and the live slots of the workspace (*slackapi.Governor).
type Budget interface {
	Limit(method string) slackapi.RateLimit
	Factor(team, method string) float64
	LiveSlots(team, pool string) int
	ReleaseSlot(ctx context.Context, team string, s *slackapi.Slot)
}

// Options configure one reply. API, Budget and Sessions are shared by the
// replies of a bot (Budget defaults to API's governor); the func fields
// are optional.
type Options struct {
	API      *slackapi.Client
	Budget   Budget
	Sessions *Sessions
	// Thread is the thread the reply goes into; Requester the person it
	// answers (a native stream's recipient, a new session's initiator).
	Thread    session.ThreadKey
	Requester string
	// Title is a new agent session's title (the first question).
	Title string
	Mode  Mode
	// EditInterval is the least time between two edits of one message.
	EditInterval time.Duration
	// StreamLifetime is how long a native stream is used before the
	// reply closes it (nothing unsent lost) and goes on with chat.update
	// on the same message; default DefaultStreamLifetime, below Slack's
	// ~5 minutes.
	StreamLifetime time.Duration
	// APIURL is the Web API base the clients of API use: chat.stopStream's
	// session_status, which slack-go has no option for, is sent to it.
	// Without it a stop leaves the session to Slack's default (active)
	// and agents.sessions.setStatus sets the turn's status again.
	APIURL string
	// Feedback is the block the final message carries (the 👍/👎
	// buttons); nil for none.
	Feedback slack.Block
	// Existing is the first message of a reply posted before (a turn
	// taken over): Finish edits it instead of posting a new one.
	Existing string
	// Guard, when set, is checked before every Slack write (the thread
	// lease's Renew): session.ErrLeaseLost stops all writes.
	Guard func(context.Context) error
	// OnPost learns the reply's first ts as soon as it is posted.
	OnPost func(ctx context.Context, ts string)
	// OnWorking learns that Slack accepted the thread's agent session
	// status "processing" or "suspended": the person sees the thread
	// working (a sign of life, bot/sign.go). Called at most once.
	OnWorking func()
	// UserStopped is called when the person stopped a native stream
	// with Slack's own stop (stopped_by_user): the turn should end.
	UserStopped func()
	// ToolCall counts a finished tool call (decision, "ok"|"error");
	// FirstText observes the time from the first text delta to the
	// reply showing text.
	ToolCall  func(decision, result string)
	FirstText func(time.Duration)
	Logger    *slog.Logger
}

// Delivery within the budget. A reply shows partial text (and its Stop
// button) only while it holds a live slot of the workspace (session
// SlotRequest): at most one fewer than the burst of the method its final
// call needs, and only when that budget has room for the final call. So
// the final edits of live replies never queue behind one another, and a
// reply without a slot is posted once, complete, when the answer is done:
// streaming never makes the last word arrive later than posting the whole
// answer at the end would. Interim edits are lossy: tried once when due,
// spaced by how many live replies share the budget, and skipped when the
// budget has no room to spare.

// Reply renders one turn into the thread. It implements agent.Observer:
// Observe only records and signals (lossy progress); Run coalesces the
// text into Slack calls; Finish delivers the final text (must-deliver).
type Reply struct {
	o         Options
	api       *slackapi.Client
	log       *slog.Logger
	k         session.ThreadKey
	requester string
	assistant bool // a DM or assistant thread: status via setStatus
	native    bool
	start     time.Time

	mu     sync.Mutex
	text   strings.Builder
	status string
	// breaks are offsets in text where an approval prompt went into the
	// thread: what the answer says after it is posted below the prompt,
	// in a message of its own, not edited into the one above.
	breaks    []int
	tasks     []slack.StreamChunk // tool progress for a native stream, not yet sent
	calls     toolCalls           // the turn's tool calls, for the progress line (progress.go)
	taskIDs   map[string]bool     // tool calls with a task card (taskcards.go)
	firstText time.Time
	wake      chan struct{}
	stop      chan struct{}
	stopOnce  sync.Once

	// Owned by Run, then by Finish.
	posted    []postedMsg
	ns        nativeStream
	shownText bool
	backoff   time.Time // no lossy call before this (a refusal or 429)
	// slotID names the reply in the workspace's live pools; held are the
	// pools it holds a slot in; noSlot delays the next try for one.
	slotID string
	held   map[string]bool
	noSlot time.Time
	// refused is when the budget last turned down a lossy call: edits
	// are then spaced by how many live replies share chat.update.
	refused time.Time

	// The lease guard (Options.Guard, Options.OnPost; guard.go).
	guardOK  time.Time
	lost     bool
	reported bool
	// as is the thread's agent session (session.go).
	as sessionState
	// finalPiece is the last piece of the final answer: it carries the
	// feedback buttons.
	finalPiece string
	// prog is the progress line of this flush's live message
	// (progress.go).
	prog string
	// cardPiece is the piece that shows each tool call's task card after
	// a native stream (cardblocks.go).
	cardPiece map[string]int
}

var _ agent.Observer = (*Reply)(nil)

// postedMsg is one message of the reply.
type postedMsg struct {
	ts       string
	rendered string    // what the message shows (a key for "changed")
	at       time.Time // last post or edit
}

// view is one piece of the reply as its message shows it.
type view struct {
	content, status string
	// live: the reply's last piece while the turn runs (the Stop button).
	live bool
	// tools, when set, are the tool calls of the piece's stretch, shown
	// as task cards after a native stream (cardblocks.go); earlier counts
	// calls no longer kept.
	tools   []toolCall
	earlier int
}

// New returns the renderer of a reply into o.Thread.
func New(o Options) *Reply {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Sessions == nil {
		o.Sessions = &Sessions{}
	}
	if o.Budget == nil && o.API != nil {
		o.Budget = o.API.Governor()
	}
	o.EditInterval = cmp.Or(o.EditInterval, time.Second)
	o.StreamLifetime = cmp.Or(o.StreamLifetime, DefaultStreamLifetime)
	r := &Reply{
		o:         o,
		api:       o.API,
		log:       o.Logger,
		k:         o.Thread,
		requester: o.Requester,
		assistant: strings.HasPrefix(o.Thread.Channel, "D"),
		native:    o.Mode == Native || o.Mode == Auto,
		start:     time.Now(),
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		slotID:    newID(),
		held:      map[string]bool{},
		as:        sessionState{title: o.Title},
	}
	if o.Existing != "" {
		r.posted = []postedMsg{{ts: o.Existing}}
	}
	return r
}

// Observe records progress; it never blocks.
func (r *Reply) Observe(ev agent.Event) {
	var sources []slack.TaskCardSource
	if r.native && ev.Kind == agent.EventToolFinished && !ev.IsError {
		sources = resultSources(ev.Result) // outside the lock: it reads the result
	}
	r.mu.Lock()
	seg := len(r.breaks) // before an approval's own break: its call belongs above the prompt
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
		r.text.WriteString(stripMasks(ev.Text))
		r.status = ""
	case agent.EventReasoning:
		r.status = "Thinking…"
	case agent.EventApprovalNeeded:
		r.status = "Waiting for approval to run " + toolName(ev) + "…"
		if n := r.text.Len(); strings.TrimSpace(r.text.String()) != "" && (len(r.breaks) == 0 || r.breaks[len(r.breaks)-1] < n) {
			r.breaks = append(r.breaks, n)
		}
		r.toolProgress(ev, sources, seg)
	case agent.EventToolStarted:
		r.status = "Running " + toolName(ev) + "…"
		r.toolProgress(ev, sources, seg)
	case agent.EventToolFinished:
		r.status = "Thinking…"
		result := "ok"
		if ev.IsError {
			result = "error"
		}
		if r.o.ToolCall != nil {
			r.o.ToolCall(ev.Decision.String(), result)
		}
		r.toolProgress(ev, sources, seg)
	case agent.EventCompacted:
		r.status = "Summarizing the earlier conversation…"
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// toolProgress records a tool event: its task card for a native stream
// (taskcards.go) and the call's state (progress.go). r.mu is held.
func (r *Reply) toolProgress(ev agent.Event, sources []slack.TaskCardSource, seg int) {
	if c, ok := cardOf(ev, sources); ok {
		r.taskProgress(c)
		r.calls.note(c, seg)
	}
}

func toolName(ev agent.Event) string {
	if ev.Hints.Server != "" && ev.Hints.Tool != "" {
		return ev.Hints.Server + "/" + ev.Hints.Tool
	}
	return ev.Call.Name
}

func (r *Reply) snapshot() (text, status string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.text.String(), r.status
}

// pieces splits text into the reply's messages: each stretch between two
// approval prompts on its own (so the answer reads in the thread's order),
// each stretch cut to Slack's size.
func (r *Reply) pieces(text string) []string {
	out, _ := r.stretches(text)
	return out
}

// stretches is pieces with the stretch of each piece (its number of
// approval prompts before it).
func (r *Reply) stretches(text string) (pieces []string, segs []int) {
	r.mu.Lock()
	breaks := slices.Clone(r.breaks)
	r.mu.Unlock()
	from := 0
	for i, at := range append(breaks, len(text)) {
		if at > len(text) || at <= from {
			continue
		}
		seg := text[from:at]
		if from > 0 {
			seg = strings.TrimLeft(seg, " \n") // the step's paragraph break
		}
		if strings.TrimSpace(seg) != "" {
			for _, p := range mrkdwn.Split(seg, mrkdwn.SplitLimit) {
				pieces, segs = append(pieces, p), append(segs, i)
			}
		}
		from = at
	}
	return pieces, segs
}

// Run coalesces progress into Slack calls until Close or ctx ends. Every
// call it makes is lossy and tried once: it never blocks on the budget.
func (r *Reply) Run(ctx context.Context) {
	tick := time.NewTicker(max(r.o.EditInterval/4, 50*time.Millisecond))
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
		r.syncSession(ctx, status)
		r.flush(ctx, false)
	}
}

// onScreen reports whether the reply already shows text.
func (r *Reply) onScreen() bool { return r.shownText }

// Close stops Run; Finish may run once Run has returned.
func (r *Reply) Close() { r.stopOnce.Do(func() { close(r.stop) }) }

// TS is the first message of the reply ("" if none). It is read after
// Finish (or while nothing else runs).
func (r *Reply) TS() string {
	if len(r.posted) > 0 {
		return r.posted[0].ts
	}
	return r.ns.ts
}

// Finish delivers the final answer: the streamed text (or final when the
// stream showed none) followed by footer. It waits for budget, and through
// rate limits, until ctx ends; then the reply's live slots go back. Call
// it after Run has returned (Close, then wait).
func (r *Reply) Finish(ctx context.Context, final, footer string) {
	r.mu.Lock()
	if strings.TrimSpace(r.text.String()) == "" && final != "" {
		r.text.WriteString(stripMasks(final))
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
	r.endSession(ctx)
	for pool := range r.held {
		r.o.Budget.ReleaseSlot(ctx, r.k.Team, r.slot(pool))
	}
	clear(r.held)
	if r.assistant {
		r.setStatus(ctx, "")
	}
}

// slot is the reply's slot in pool.
func (r *Reply) slot(pool string) *slackapi.Slot {
	for _, p := range slackapi.LivePools {
		if p.Pool == pool {
			return &slackapi.Slot{Pool: pool, ID: r.slotID, Cover: p.Cover}
		}
	}
	return nil
}

// mayGoLive reports whether a lossy call may try for a slot in pool now.
func (r *Reply) mayGoLive(pool string) bool {
	return r.held[pool] || !time.Now().Before(r.noSlot)
}

// lossyOutcome files the result of a lossy call that did not go through:
// no slot (try again in a while), no budget or a 429 (back off).
func (r *Reply) lossyOutcome(pool string, err error) {
	var be slackapi.BudgetError
	var rl *slack.RateLimitedError
	switch {
	case errors.Is(err, slackapi.ErrNoSlot):
		delete(r.held, pool)
		r.noSlot = time.Now().Add(max(r.o.EditInterval/2, 100*time.Millisecond))
	case errors.As(err, &be):
		r.refused = time.Now()
		r.backoff = r.refused.Add(max(be.Wait, 50*time.Millisecond))
	case errors.As(err, &rl):
		r.backoff = time.Now().Add(max(rl.RetryAfter, time.Second))
	case slackapi.IsRateLimited(err) || slackapi.IsDropped(err):
		r.backoff = time.Now().Add(time.Second)
	}
}

// flush brings Slack up to date. Lossy (final=false) flushes make only the
// calls that are due and within the budget; the final flush waits for
// budget.
func (r *Reply) flush(ctx context.Context, final bool) {
	text, status := r.snapshot()
	if r.native && !r.ns.failed {
		if r.flushNative(ctx, text, final) {
			return
		}
	}
	if r.native {
		r.ensureStopped(ctx, "")
	}
	if !final && time.Now().Before(r.backoff) {
		return
	}
	// After a native stream the tool calls are task cards in the
	// messages (cardblocks.go); otherwise the live message's progress
	// line shows them.
	cards := r.cardsAfterStream()
	r.prog = ""
	if !cards {
		r.prog = r.progressLine()
	}
	if strings.TrimSpace(text) == "" {
		if cards && !final && len(r.posted) == 1 {
			r.liveToolsOnly(ctx, status)
			return
		}
		if final || status == "" || len(r.posted) > 0 || time.Since(r.start) < thinkingDelay || r.assistant || !r.mayGoLive(slackapi.PoolEdit) {
			return
		}
		// Silent so far: show the status with the Stop button.
		r.post(ctx, view{status: status, live: true}, false)
		return
	}
	pieces, segs := r.stretches(text)
	if len(pieces) == 0 {
		return
	}
	if final {
		r.finalPiece = pieces[len(pieces)-1]
	}
	var tools map[int][]toolCall
	var earlier int
	if cards {
		tools, earlier = r.toolsByPiece(segs)
	}
	render := func(i int) view {
		v := view{content: pieces[i], live: i == len(pieces)-1 && !final, tools: tools[i]}
		if i == 0 {
			v.earlier = earlier
		}
		if v.live {
			v.content, v.status = mrkdwn.Live(v.content), status
		}
		return v
	}
	// New pieces first, then edits of the earlier ones: a live reply
	// always shows a live message (with Stop) until the final text is
	// complete. A reply without a slot posts only its complete pieces.
	for i := len(r.posted); i < len(pieces); i++ {
		v := render(i)
		if v.live && !r.mayGoLive(slackapi.PoolEdit) {
			break
		}
		if !r.post(ctx, v, final) {
			return
		}
	}
	for i := range min(len(pieces), len(r.posted)) {
		v := render(i)
		p := &r.posted[i]
		if p.rendered == r.renderKey(v) {
			continue
		}
		if !final {
			if !r.held[slackapi.PoolEdit] && !r.mayGoLive(slackapi.PoolEdit) {
				continue
			}
			// (The first text replaces a status message at once.)
			if r.shownText && time.Since(p.at) < r.editSpacing() {
				continue
			}
		}
		if !r.update(ctx, p, v, final) {
			return
		}
	}
	if final && len(pieces) > 0 && len(r.posted) > len(pieces) {
		// The answer needs fewer messages than were posted (rare: a split
		// point moved): nothing stale may stay.
		for _, p := range r.posted[len(pieces):] {
			_ = r.api.Do(ctx, slackapi.Call{Team: r.k.Team, Method: slackapi.ChatDelete}, func(ctx context.Context, api *slack.Client) error {
				_, _, err := api.DeleteMessageContext(ctx, r.k.Channel, p.ts)
				return err
			})
		}
		r.posted = r.posted[:len(pieces)]
	}
}

// editSpacing is the least time between two interim edits of one message:
// EditInterval while chat.update has room to spare; once the budget has
// turned an edit down, the live replies sharing it take turns (each edits
// once per their number of emission intervals), so that together they use
// the whole rate and none starves.
func (r *Reply) editSpacing() time.Duration {
	d := r.o.EditInterval
	l := r.o.Budget.Limit(slackapi.ChatUpdate)
	if l.Off || l.PerMinute <= 0 {
		return d
	}
	n := max(1, r.o.Budget.LiveSlots(r.k.Team, slackapi.PoolEdit))
	f := r.o.Budget.Factor(r.k.Team, slackapi.ChatUpdate)
	share := time.Duration(n) * time.Duration(float64(time.Minute)/(float64(l.PerMinute)*f))
	if time.Since(r.refused) > 2*share {
		return d
	}
	return max(d, share)
}

// renderKey names what a message shows, to tell whether it changed.
func (r *Reply) renderKey(v view) string {
	k := v.content + "\x00" + v.status
	if v.live {
		k += "\x00live\x00" + r.prog
	}
	if len(v.tools) > 0 || v.earlier > 0 {
		k += "\x00tools\x00" + r.toolsKey(v) // cardblocks.go
	}
	return k
}

// msgOptions renders a piece of the answer: a markdown block (standard
// Markdown, escaped), the task cards of its tool calls (after a native
// stream, cardblocks.go), an optional context line (the tool progress and
// the status, while live), the feedback buttons (the final piece) or the
// Stop button (while live), and the mrkdwn text fallback; link and media
// unfurls off.
func (r *Reply) msgOptions(v view) []slack.MsgOption {
	content, status, live := v.content, v.status, v.live
	opts := []slack.MsgOption{slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl()}
	var blocks []slack.Block
	if strings.TrimSpace(content) != "" {
		blocks = append(blocks, slack.NewMarkdownBlock("", unmaskMentions(mrkdwn.Markdown(content))))
	}
	blocks = append(blocks, r.toolBlocks(v)...)
	var line []slack.MixedElement
	if live && r.prog != "" {
		line = append(line, slack.NewTextBlockObject(slack.MarkdownType, r.prog, false, false))
	}
	if status != "" {
		line = append(line, slack.NewTextBlockObject(slack.MarkdownType, "_"+mrkdwn.EscapeText(status)+"_", false, false))
	}
	if len(line) > 0 {
		blocks = append(blocks, slack.NewContextBlock("", line...))
	}
	if r.feedbackFor(content, live) {
		blocks = append(blocks, r.o.Feedback)
	}
	if live {
		btn := slack.NewButtonBlockElement(ActionStop, r.k.String(), slack.NewTextBlockObject(slack.PlainTextType, "Stop", false, false))
		btn.Style = slack.StyleDanger
		blocks = append(blocks, slack.NewActionBlock("bobbin_controls", btn))
	}
	fallback := unmaskMentions(mrkdwn.Fallback(content))
	if fallback == "" {
		fallback = mrkdwn.EscapeText(status)
	}
	return append(opts, slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(fallback, false))
}

// feedbackFor reports whether a piece of the reply gets the feedback
// buttons: the last piece of the final answer (a native stream that ends
// the turn carries them in its stopStream instead, native.go).
func (r *Reply) feedbackFor(content string, live bool) bool {
	return r.o.Feedback != nil && !live && r.finalPiece != "" && content == r.finalPiece
}

// maxAttempts bounds how often a must-deliver post or edit is retried
// after an error that is neither Slack's answer nor a rate limit (the
// network): the call may have reached Slack, and retrying forever could
// post twice.
const maxAttempts = 3

// post adds a message to the reply; false when it did not (the next flush
// tries again). A live piece needs a live slot; interim posts are lossy,
// the final ones must-deliver.
func (r *Reply) post(ctx context.Context, v view, final bool) bool {
	c := slackapi.Call{Team: r.k.Team, Method: slackapi.ChatPostMessage, Channel: r.k.Channel}
	if !final {
		c.Prio = slackapi.Lossy
		if v.live {
			c.Slot = r.slot(slackapi.PoolEdit)
		}
	}
	for attempt := 1; ; attempt++ {
		if !r.allowed(ctx) {
			return false
		}
		opts := append(r.msgOptions(v), slack.MsgOptionTS(r.k.ThreadTS))
		var ts string
		err := r.api.Do(ctx, c, func(ctx context.Context, api *slack.Client) error {
			var err error
			_, ts, err = api.PostMessageContext(ctx, r.k.Channel, opts...)
			return err
		})
		if c.Slot != nil && !errors.Is(err, slackapi.ErrNoSlot) && !slackapi.IsDropped(err) {
			r.held[slackapi.PoolEdit] = true
		}
		if err == nil {
			r.posted = append(r.posted, postedMsg{ts: ts, rendered: r.renderKey(v), at: time.Now()})
			r.recordPost(ctx, ts)
			r.visible(v.content)
			return true
		}
		if r.cardsRefused(v, err) && final {
			continue // again, the calls as a line (cardblocks.go)
		}
		if !final {
			r.lossyOutcome(slackapi.PoolEdit, err)
			return false
		}
		if !r.retry(ctx, err, attempt) {
			r.log.Warn("bot: posting the reply failed", append(threadAttrs(r.k.Team, r.k.Channel, r.k.ThreadTS), "err", err)...)
			return false
		}
	}
}

// update edits a posted message. Interim edits are lossy and need the
// reply's live slot; the final edit waits for budget.
func (r *Reply) update(ctx context.Context, p *postedMsg, v view, final bool) bool {
	c := slackapi.Call{Team: r.k.Team, Method: slackapi.ChatUpdate}
	if !final {
		c.Prio, c.Merge, c.Slot = slackapi.Lossy, r.k.Channel+":"+p.ts, r.slot(slackapi.PoolEdit)
	}
	for attempt := 1; ; attempt++ {
		if !r.allowed(ctx) {
			return false
		}
		opts := r.msgOptions(v)
		err := r.api.Do(ctx, c, func(ctx context.Context, api *slack.Client) error {
			_, _, _, err := api.UpdateMessageContext(ctx, r.k.Channel, p.ts, opts...)
			return err
		})
		if c.Slot != nil && !errors.Is(err, slackapi.ErrNoSlot) && !slackapi.IsDropped(err) {
			r.held[slackapi.PoolEdit] = true
		}
		if err == nil {
			p.rendered = r.renderKey(v)
			p.at = time.Now()
			r.visible(v.content)
			return true
		}
		if r.cardsRefused(v, err) && final {
			continue // again, the calls as a line (cardblocks.go)
		}
		if !final {
			r.lossyOutcome(slackapi.PoolEdit, err)
			return false
		}
		if !r.retry(ctx, err, attempt) {
			r.log.Warn("bot: final edit failed", append(threadAttrs(r.k.Team, r.k.Channel, r.k.ThreadTS), "err", err)...)
			return false
		}
	}
}

// retry decides whether a must-deliver call that failed is tried again:
// Slack's own answers are final (retrying the same call will not help),
// rate limits were already waited out by slackapi.Client.Do (ctx ended), network
// errors are retried once a second a few times.
func (r *Reply) retry(ctx context.Context, err error, attempt int) bool {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) || slackapi.IsRateLimited(err) || ctx.Err() != nil || attempt >= maxAttempts {
		return false
	}
	return pause.Sleep(ctx, time.Second)
}

// visible records the time to first visible text.
func (r *Reply) visible(content string) {
	if r.shownText || strings.TrimSpace(content) == "" {
		return
	}
	r.shownText = true
	r.mu.Lock()
	first := r.firstText
	r.mu.Unlock()
	if !first.IsZero() && r.o.FirstText != nil {
		r.o.FirstText(time.Since(first))
	}
}

// setStatus shows the assistant-thread status (lossy: a newer status
// replaces one still waiting, and none waits long).
func (r *Reply) setStatus(ctx context.Context, status string) {
	c := slackapi.Call{Team: r.k.Team, Method: slackapi.AssistantThreadsSetStatus, Prio: slackapi.Lossy,
		Merge: r.k.Channel + ":" + r.k.ThreadTS, Wait: time.Second}
	err := r.api.Do(ctx, c, func(ctx context.Context, api *slack.Client) error {
		return api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{
			ChannelID: r.k.Channel, ThreadTS: r.k.ThreadTS, Status: status,
		})
	})
	if err != nil {
		r.log.Debug("bot: setStatus not sent", "err", err)
	}
}
