package bot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/bot/internal/pause"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/bot/stream"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// maxBatch bounds how many queued messages one turn takes in.
const maxBatch = 20

// startWorker makes sure a local worker serves thread k: it starts one, or
// tells the running one to look again before it exits.
func (b *Bot) startWorker(ctx context.Context, k session.ThreadKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.running[k]; ok {
		b.running[k] = true // look again
		return
	}
	b.running[k] = false
	b.workers.Go(func() { b.threadWorker(ctx, k) })
}

func (b *Bot) threadWorker(ctx context.Context, k session.ThreadKey) {
	for {
		b.serveThread(ctx, k)
		b.mu.Lock()
		again := b.running[k]
		if !again || ctx.Err() != nil {
			delete(b.running, k)
			b.mu.Unlock()
			return
		}
		b.running[k] = false
		b.mu.Unlock()
	}
}

// serveThread takes the thread's lease and runs turns until its queue is
// empty. Without the lease (another replica holds it) it returns: the
// holder drains the queue.
func (b *Bot) serveThread(ctx context.Context, k session.ThreadKey) {
	log := b.log.With(threadAttrs(k.Team, k.Channel, k.ThreadTS)...)
	select {
	case b.turnSlots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-b.turnSlots }()

	var lease *session.Lease
	for attempt := 0; ; attempt++ {
		var err error
		lease, err = b.store.Acquire(ctx, k, b.opts.ReplicaID)
		if err == nil {
			break
		}
		if errors.Is(err, session.ErrLeaseHeld) {
			return
		}
		if attempt >= 4 || !pause.Sleep(ctx, time.Duration(1<<attempt)*250*time.Millisecond) {
			log.Error("bot: cannot take the thread lease; its queued messages wait for the next event", "err", err)
			return
		}
	}
	lctx, cancel := context.WithCancelCause(ctx)
	var renew sync.WaitGroup
	renew.Go(func() {
		if err := lease.Run(lctx); err != nil {
			log.Warn("bot: thread lease lost; stopping the turn", "err", err)
			cancel(err)
		}
	})
	renew.Go(func() { b.watchStops(lctx, k) })
	defer func() {
		cancel(nil)
		renew.Wait()
	}()
	b.resumeInterrupted(lctx, lease)

	for lctx.Err() == nil {
		var batch []inbound
		for len(batch) < maxBatch {
			payload, ok, err := b.store.Dequeue(lctx, k, lease.Token())
			if err != nil {
				log.Warn("bot: dequeue failed", "err", err)
				break
			}
			if !ok {
				break
			}
			var m inbound
			if err := json.Unmarshal(payload, &m); err != nil {
				log.Warn("bot: dropping undecodable queued message", "err", err)
				continue
			}
			batch = append(batch, m)
		}
		if len(batch) > 0 {
			b.runTurn(lctx, lease, batch)
			continue
		}
		released, err := lease.ReleaseIfIdle(context.WithoutCancel(lctx))
		if err != nil {
			log.Warn("bot: releasing the thread lease failed", "err", err)
			return
		}
		if released {
			return
		}
	}
	// Shutdown or lease lost: hand the thread over at once (it stays in
	// the active-turns index, so another replica's orphan scan resumes it).
	if errors.Is(context.Cause(lctx), errShutdown) || errors.Is(context.Cause(ctx), errShutdown) {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer rcancel()
		_ = lease.Handover(rctx)
	}
}

// stopCause is the cancel cause of a turn stopped with the Stop button.
type stopCause struct{ user string }

func (s stopCause) Error() string { return "stopped by " + s.user }

// runTurn runs one agent turn for the batch of messages.
func (b *Bot) runTurn(ctx context.Context, lease *session.Lease, batch []inbound) {
	k := lease.Key()
	fence := lease.Token()
	log := b.log.With(threadAttrs(k.Team, k.Channel, k.ThreadTS)...)
	// Replies recorded as context (THREAD_FOLLOWUPS=mention) after the
	// last message that asks for an answer start no turn: they are
	// appended after it (threadctx.go).
	ask := len(batch) - 1
	for ask >= 0 && !batch[ask].asksForAnswer() {
		ask--
	}
	if ask < 0 {
		b.recordContext(ctx, lease, batch)
		return
	}
	if rest := batch[ask+1:]; len(rest) > 0 {
		defer b.recordContext(ctx, lease, rest)
	}
	batch = batch[:ask+1]
	last := batch[len(batch)-1]
	for _, m := range batch {
		if wait := time.Until(m.NotBefore); wait > 0 && !pause.Sleep(ctx, wait) {
			return
		}
	}
	b.m.ActiveTurns.Inc()
	defer b.m.ActiveTurns.Dec()
	start := time.Now()

	meta, history, err := b.store.Load(ctx, k)
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		log.Error("bot: loading the session failed", "err", err)
		b.failNotice(ctx, k, last, "I couldn't load this conversation just now. Please try again in a moment.")
		return
	}
	now := b.opts.Now()
	newSession := meta.Created.IsZero()
	if newSession {
		meta.Created = now
		meta.Model = b.opts.Model
		meta.System = b.systemPrompt(ctx, k, now)
	}
	// The thread's earlier messages on its first turn, then the batch,
	// with their files (threadctx.go, files.go).
	var mb msgBuilder
	if newSession && b.importWanted(k, batch) {
		b.importContext(ctx, k, batch, &mb)
	}
	first := len(mb.msgs)
	b.batchMessages(ctx, k, batch, &mb)
	userMsgs := mb.build(ctx, b, k.Team)
	if note := b.paneNote(ctx, k, &meta); note != "" {
		userMsgs[first].Content = note + "\n\n" + userMsgs[first].Content // assistant.go
	}
	if newSession {
		var title sync.WaitGroup
		defer title.Wait()
		title.Go(func() { b.titleThread(ctx, k, batch[0]) })
	}
	meta.TurnID = newID()
	meta.RequesterID = last.User
	recordPeople(&meta, k.Team, batch) // access.go
	meta.TriggerTS = last.TS
	meta.ReplyTS = ""
	meta.Phase = "model"
	meta.Updated = now
	if err := b.store.Append(ctx, k, fence, userMsgs...); err != nil {
		log.Error("bot: saving the message failed", "err", err)
		return
	}
	if err := b.store.SaveMeta(ctx, k, fence, meta); err != nil {
		log.Warn("bot: saving session metadata failed", "err", err)
	}

	b.driveTurn(ctx, lease, meta, append(history, userMsgs...), last, start)
}

// driveTurn runs the agent on history for the person in who, streams the
// answer into the thread and records how the turn ended. A turn for new
// messages (runTurn) and a turn taken over from another replica
// (resumeTurn) differ only in what comes before it.
func (b *Bot) driveTurn(ctx context.Context, lease *session.Lease, meta session.Meta, history []provider.Message, who inbound, start time.Time) {
	k := lease.Key()
	fence := lease.Token()
	log := b.log.With(threadAttrs(k.Team, k.Channel, k.ThreadTS)...)
	tp := b.profileFor(ctx, k) // profile.go

	var tools []agent.Tool
	var notReady []servers.NotReady // notready.go
	if b.opts.Tools != nil {
		// Scoped to the place and the people the turn answers, never to
		// whoever clicks its buttons later (access.go).
		a := b.accessFor(ctx, k.Team, k.Channel, peopleOf(meta, who))
		var err error
		if tools, notReady, err = b.toolsFor(ctx, a); err != nil {
			log.Warn("bot: workspace tools unavailable; answering without them", "err", err)
			tools = nil
		}
		tools, notReady = tp.filter(tools, notReady)
	}

	tools = b.withSlackSearch(ctx, k, who, tools) // search.go
	turnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	turnCtx, span, log := b.startTurnSpan(turnCtx, k, tp, log)
	b.cancels.add(k, cancel)
	defer b.cancels.remove(k)

	sign := b.startSign(ctx, k, who) // sign.go
	defer sign.done()
	r := b.newReply(lease, meta.TurnID, who, sign, "") // reply.go
	var loop sync.WaitGroup
	loop.Go(func() { r.Run(turnCtx) })

	anchor := agent.Anchor{Model: meta.Model, Messages: meta.AnchorMessages, InputTokens: meta.AnchorInput}
	if meta.Extra != nil {
		anchor.OutputTokens, _ = strconv.Atoi(meta.Extra["anchor_output"])
	}
	var mu sync.Mutex // meta is written by checkpoints, read at the end
	checkpoint := func(ctx context.Context, cp agent.Checkpoint) error {
		if cp.Replace {
			if err := b.store.Replace(ctx, k, fence, cp.Append); err != nil {
				return err
			}
		} else if len(cp.Append) > 0 {
			if err := b.store.Append(ctx, k, fence, cp.Append...); err != nil {
				return err
			}
		}
		mu.Lock()
		defer mu.Unlock()
		meta.Usage.Add(cp.Usage)
		meta.Calibration = cp.Calibration
		meta.AnchorInput, meta.AnchorMessages = cp.Anchor.InputTokens, cp.Anchor.Messages
		if meta.Extra == nil {
			meta.Extra = map[string]string{}
		}
		meta.Extra["anchor_output"] = strconv.Itoa(cp.Anchor.OutputTokens)
		meta.Updated = b.opts.Now()
		return b.store.SaveMeta(ctx, k, fence, meta)
	}
	endTurn := b.waits.turn()
	res, runErr := b.opts.Agent.Run(turnCtx, agent.Turn{
		System:      tp.system(notReadySystem(meta.System, notReady)),
		History:     history,
		Tools:       b.withPrivate(k, who.User, b.auditTools(k, who.User, tools)), // private.go
		Grants:      meta.Grants,
		GrantValid:  b.grantCheck(k),
		Approver:    b.approverFor(k, who.User),
		Observer:    r,
		Files:       fileLoader{b: b, team: k.Team},
		Checkpoint:  checkpoint,
		Calibration: meta.Calibration,
		Anchor:      anchor,
		Model:       tp.model, MaxTokens: tp.maxTokens(), Provider: tp.provider, ProviderName: tp.provName,
		Budget: b.budgetFor(k, who, tp),
	})
	endTurn()

	// The final text must arrive even when the turn was cancelled. Its
	// delivery is part of the turn's trace (a budget wait of the final
	// edit is a child of invoke_agent), so the span ends after it.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(turnCtx), 2*time.Minute)
	defer fcancel()
	r.Close()
	loop.Wait()
	footer := ""
	phase := phaseDone
	cause := context.Cause(turnCtx)
	var stop stopCause
	switch {
	case runErr == nil:
		if res.Notice != "" {
			footer = "_" + res.Notice + "_"
		}
		if nr := notReadyFooter(notReady); nr != "" {
			footer = strings.TrimSpace(footer + "\n" + nr)
		}
	case errors.As(cause, &stop):
		footer = "_Stopped by " + stream.MaskUser(stop.user) + "._"
	case errors.Is(cause, errShutdown):
		// Handed over (serveThread): another replica resumes the turn.
		footer = "_Interrupted: the bot is restarting. The answer continues below._"
		phase = phaseInterrupted
	case errors.Is(cause, session.ErrLeaseLost), errors.Is(runErr, session.ErrStaleFence):
		// Another replica has the thread now; it finishes the answer.
	default:
		log.Error("bot: turn failed", "err", runErr, "outcome", res.Outcome.String())
		footer = failureFooter(runErr)
	}
	r.Finish(fctx, res.Text, footer)
	endTurnSpan(span, res, runErr)
	sign.done()

	mu.Lock()
	final := meta
	mu.Unlock()
	b.endTurn(fctx, lease, final, phase, r.TS())

	outcome := res.Outcome.String()
	if errors.As(cause, &stop) {
		outcome = "stopped"
	}
	b.m.Turns.WithLabelValues(outcome).Inc()
	b.m.TurnDuration.Observe(time.Since(start).Seconds())
	if res.Usage.Known {
		b.m.Tokens.WithLabelValues("input").Add(float64(res.Usage.InputTokens))
		b.m.Tokens.WithLabelValues("output").Add(float64(res.Usage.OutputTokens))
		b.m.Tokens.WithLabelValues("cache_read").Add(float64(res.Usage.CacheReadTokens))
	}
	log.Info("bot: turn done", "outcome", outcome, "steps", res.Steps, "duration", time.Since(start).Round(time.Millisecond).String())
}

// grantChecker is session.Store's HasGrant.
type grantChecker interface {
	HasGrant(ctx context.Context, k session.ThreadKey, tool string) (bool, error)
}

// grantCheck lets a running turn see a Revoke click made on any replica:
// every call that relies on a thread grant re-reads it from Redis first.
// When it cannot be read the grant does not count (the person is asked).
func (b *Bot) grantCheck(k session.ThreadKey) func(context.Context, string) bool {
	return func(ctx context.Context, tool string) bool {
		has, err := b.store.HasGrant(ctx, k, tool)
		if err != nil {
			b.log.Warn("bot: checking a thread grant failed; asking again", append(threadAttrs(k.Team, k.Channel, k.ThreadTS), "tool", tool, "err", err)...)
			return false
		}
		return has
	}
}

// failNotice posts a short safe message in the thread.
func (b *Bot) failNotice(ctx context.Context, k session.ThreadKey, m inbound, text string) {
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	err := b.slack.Do(nctx, slackapi.Call{Team: k.Team, Method: slackapi.ChatPostMessage, Channel: k.Channel}, func(ctx context.Context, api *slack.Client) error {
		_, _, err := api.PostMessageContext(ctx, k.Channel,
			slack.MsgOptionTS(k.ThreadTS), slack.MsgOptionText(mrkdwn.EscapeText(text), false),
			slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl())
		return err
	})
	if err != nil {
		b.log.Warn("bot: failure notice not delivered", "err", err)
	}
}

// systemPrompt is the session's system prompt, fixed at session start so
// prompt caches hit: the Slack setting, the date, workspace and channel
// names, how to format, then the operator's instructions.
func (b *Bot) systemPrompt(ctx context.Context, k session.ThreadKey, now time.Time) string {
	team, channel := b.people.TeamName(ctx, k.Team), b.people.ChannelName(ctx, k.Team, k.Channel)
	var s strings.Builder
	s.WriteString("You are Bobbin, an assistant answering inside a Slack thread. ")
	s.WriteString("Several people may talk in the thread; each user message starts with who wrote it as [name (user id)]. ")
	fmt.Fprintf(&s, "Today is %s. ", now.UTC().Format("Monday, 2 January 2006"))
	fmt.Fprintf(&s, "Workspace: %s. ", team)
	if strings.HasPrefix(k.Channel, "D") {
		s.WriteString("This is a direct message conversation. ")
	} else {
		fmt.Fprintf(&s, "Channel: #%s. ", channel)
	}
	s.WriteString("Format answers in standard Markdown (bold, italics, lists, links, fenced code blocks); " +
		"Slack shows it directly, but has no tables: use lists or code blocks instead. Keep answers concise and readable in a chat. " +
		"Never try to notify people: do not write @channel, @here or user mentions.")
	if p := strings.TrimSpace(b.opts.SystemPrompt); p != "" {
		s.WriteString("\n\n")
		s.WriteString(p)
	}
	return s.String()
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// cancelRegistry maps running threads to their turn's cancel function, for
// the Stop button.
type cancelRegistry struct {
	mu sync.Mutex
	m  map[session.ThreadKey]context.CancelCauseFunc
}

func (r *cancelRegistry) add(k session.ThreadKey, c context.CancelCauseFunc) {
	r.mu.Lock()
	r.m[k] = c
	r.mu.Unlock()
}

func (r *cancelRegistry) remove(k session.ThreadKey) {
	r.mu.Lock()
	delete(r.m, k)
	r.mu.Unlock()
}

func (r *cancelRegistry) cancel(k session.ThreadKey, cause error) bool {
	r.mu.Lock()
	c, ok := r.m[k]
	r.mu.Unlock()
	if ok {
		c(cause)
	}
	return ok
}
