package stream

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// DefaultStreamLifetime is how long a native stream is used before the
// reply closes it and continues with edits (Options.StreamLifetime):
// Slack ends a stream about 5 minutes after it starts (life.go).
const DefaultStreamLifetime = 4*time.Minute + 30*time.Second

// nativeStream is the state of a chat.startStream message.
type nativeStream struct {
	ts      string
	sent    int // bytes of the answer already appended
	at      time.Time
	started time.Time
	failed  bool
	stopped bool
}

// flushNative streams the answer with chat.startStream/appendStream/
// stopStream, through the same governor as edits. It returns false when
// the edit path must take over: the stream failed or expired, the answer
// outgrew one message, or it never started (no live slot) and the answer
// is complete (it is then posted once). The edit path rewrites a stream's
// message with the whole text, so nothing is lost or repeated.
func (r *Reply) flushNative(ctx context.Context, text string, final bool) bool {
	ns := &r.ns
	r.mu.Lock()
	tasks := r.tasks
	r.tasks = nil
	r.mu.Unlock()
	requeue := func() {
		r.mu.Lock()
		r.tasks = append(tasks, r.tasks...)
		r.mu.Unlock()
	}
	if ns.ts == "" && final {
		return false
	}
	if len(mrkdwn.Split(text, mrkdwn.SplitLimit)) > 1 {
		r.nativeFallback(ctx, "")
		return false
	}
	if (!ns.started.IsZero() && time.Since(ns.started) >= r.o.StreamLifetime) || r.waitsOnPerson() {
		// Streams die about 5 minutes after they start
		// (message_not_in_streaming_state): finish with edits before that,
		// and before a wait on a person (life.go), the text not yet
		// appended and the task cards not yet sent going out with the
		// stop.
		requeue()
		r.nativeFallback(ctx, r.unsent(text))
		return false
	}
	if ns.ts == "" {
		if len(tasks) == 0 && strings.TrimSpace(text) == "" {
			return true
		}
		if time.Now().Before(r.backoff) || !r.mayGoLive(slackapi.PoolNative) {
			requeue()
			return true
		}
		return r.startStream(ctx, text, tasks, requeue)
	}
	if len(tasks) > 0 && !r.sendTasks(ctx, tasks, final, requeue) {
		return false
	}
	if len(text) > ns.sent && (final || (time.Since(ns.at) >= r.o.EditInterval && !time.Now().Before(r.backoff))) {
		if !r.allowed(ctx) {
			return true // the lease is lost: write nothing, on either path
		}
		c := slackapi.Call{Team: r.k.Team, Method: slackapi.ChatAppendStream}
		if !final {
			c.Prio, c.Merge = slackapi.Lossy, r.k.Channel+":"+ns.ts
		}
		err := r.api.Do(ctx, c, func(ctx context.Context, api *slack.Client) error {
			_, _, err := api.AppendStreamContext(ctx, r.k.Channel, ns.ts, slack.MsgOptionMarkdownText(unmaskMentions(mrkdwn.Markdown(text[ns.sent:]))))
			return err
		})
		switch {
		case err == nil:
			ns.sent, ns.at = len(text), time.Now()
		case !final && (slackapi.IsDropped(err) || slackapi.IsRateLimited(err)):
			r.lossyOutcome(slackapi.PoolNative, err)
		default:
			var se slack.SlackErrorResponse
			if errors.As(err, &se) && se.Err == "stopped_by_user" {
				// The person pressed Slack's own stop: end the turn.
				if r.o.UserStopped != nil {
					r.o.UserStopped()
				}
			}
			r.log.Info("bot: native stream append failed; finishing with edits", "err", err)
			r.nativeFallback(ctx, "")
			return false
		}
	}
	if final && !ns.stopped {
		if !r.allowed(ctx) {
			return true
		}
		var blocks []slack.Block
		if r.o.Feedback != nil {
			blocks = append(blocks, r.o.Feedback)
		}
		// The stream ends the turn: its stop leaves the session active
		// (no agents.sessions.setStatus after it, session.go).
		if err := r.stopStream(ctx, "", slack.AgentSessionStatusActive, nil, blocks); err != nil {
			r.nativeFallback(ctx, "")
			return false
		}
	}
	return true
}

// unsent is the answer's text the stream's message still lacks: what
// came after the last append, up to the first approval prompt (what
// follows a prompt goes below it), when that fits the message.
func (r *Reply) unsent(text string) string {
	end := len(text)
	r.mu.Lock()
	if len(r.breaks) > 0 {
		end = min(end, r.breaks[0])
	}
	r.mu.Unlock()
	if end <= r.ns.sent || len(mrkdwn.Split(text[:end], mrkdwn.SplitLimit)) > 1 {
		return ""
	}
	return text[r.ns.sent:end]
}

// stopStream ends the native stream with rest appended (then tasks, task
// card chunks), blocks last, and the thread's agent session left in
// status ("" for Slack's default, active). slack-go has no session_status
// option: the argument is added to the form of chat.stopStream
// (Options.APIURL).
func (r *Reply) stopStream(ctx context.Context, rest, status string, tasks []slack.StreamChunk, blocks []slack.Block) error {
	ns := &r.ns
	if _, refused := r.o.Sessions.refused.Load(r.k.Team); refused || r.lost || r.o.APIURL == "" {
		status = ""
	}
	var opts []slack.MsgOption
	hasRest := strings.TrimSpace(rest) != ""
	switch {
	case len(tasks) > 0:
		var chunks []slack.StreamChunk
		if hasRest {
			chunks = append(chunks, slack.NewMarkdownTextChunk(unmaskMentions(mrkdwn.Markdown(rest))))
		}
		opts = append(opts, slack.MsgOptionChunks(append(chunks, tasks...)...))
	case hasRest:
		opts = append(opts, slack.MsgOptionMarkdownText(unmaskMentions(mrkdwn.Markdown(rest))))
	}
	if len(blocks) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(blocks...))
	}
	withStatus := opts
	if status != "" {
		withStatus = append(withStatus, slack.UnsafeMsgOptionEndpoint(r.o.APIURL+slackapi.ChatStopStream, func(v url.Values) {
			v.Set("session_status", status)
		}))
	}
	err := r.api.Do(ctx, slackapi.Call{Team: r.k.Team, Method: slackapi.ChatStopStream}, func(ctx context.Context, api *slack.Client) error {
		_, _, err := api.StopStreamContext(ctx, r.k.Channel, ns.ts, withStatus...)
		return err
	})
	var se slack.SlackErrorResponse
	if status != "" && errors.As(err, &se) && (se.Err == "invalid_arguments" || sessionRefusals[se.Err]) {
		// A Slack that does not take session_status: stop without it
		// (the turn's status then goes by agents.sessions.setStatus).
		r.log.Debug("bot: chat.stopStream refused session_status; stopping without it", "err", se.Err)
		status = ""
		err = r.api.Do(ctx, slackapi.Call{Team: r.k.Team, Method: slackapi.ChatStopStream}, func(ctx context.Context, api *slack.Client) error {
			_, _, err := api.StopStreamContext(ctx, r.k.Channel, ns.ts, opts...)
			return err
		})
	}
	if err != nil {
		return err
	}
	ns.stopped = true
	if hasRest {
		ns.sent += len(rest)
	}
	switch {
	case r.as.sent == "":
		// Not created by a setStatus yet: the first one still titles it.
	case status != "":
		r.as.sent, r.as.failed = status, ""
	default:
		r.as.sent = slack.AgentSessionStatusActive // Slack's default
	}
	return nil
}

// startStream starts the native stream with the text so far, or the tool
// progress when no text has come yet. It needs a live slot; without one
// the reply waits (and is posted once when complete).
func (r *Reply) startStream(ctx context.Context, text string, tasks []slack.StreamChunk, requeue func()) bool {
	ns := &r.ns
	if !r.allowed(ctx) {
		return true // the lease is lost: write nothing, on either path
	}
	opts := []slack.MsgOption{slack.MsgOptionTS(r.k.ThreadTS),
		slack.MsgOptionRecipientTeamID(r.k.Team), slack.MsgOptionRecipientUserID(r.requester)}
	chunksOnly := strings.TrimSpace(text) == ""
	if chunksOnly {
		opts = append(opts, slack.MsgOptionChunks(tasks...))
	} else {
		opts = append(opts, slack.MsgOptionMarkdownText(unmaskMentions(mrkdwn.Markdown(text))))
	}
	c := slackapi.Call{Team: r.k.Team, Method: slackapi.ChatStartStream, Prio: slackapi.Lossy, Slot: r.slot(slackapi.PoolNative)}
	var ts string
	err := r.api.Do(ctx, c, func(ctx context.Context, api *slack.Client) error {
		var err error
		_, ts, err = api.StartStreamContext(ctx, r.k.Channel, opts...)
		return err
	})
	if !errors.Is(err, slackapi.ErrNoSlot) && !slackapi.IsDropped(err) {
		r.held[slackapi.PoolNative] = true
	}
	switch {
	case err == nil:
	case slackapi.IsDropped(err) || slackapi.IsRateLimited(err):
		r.lossyOutcome(slackapi.PoolNative, err)
		requeue() // nothing went out
		return true
	default:
		r.log.Info("bot: native stream unavailable; using edits", "err", err)
		ns.failed = true
		requeue()
		return false
	}
	ns.ts, ns.at, ns.started = ts, time.Now(), time.Now()
	r.recordPost(ctx, ts)
	if !chunksOnly {
		ns.sent = len(text)
		r.visible(text)
		if len(tasks) > 0 {
			requeue() // the tool progress goes with the next append
		}
	}
	return true
}

// sendTasks shows tool progress as task_update chunks. Progress is lossy
// until the end: refused chunks wait for the next flush, and the final
// flush delivers what is left. On a failure the edit path takes over
// (false).
func (r *Reply) sendTasks(ctx context.Context, tasks []slack.StreamChunk, final bool, requeue func()) bool {
	ns := &r.ns
	if !r.allowed(ctx) {
		return true
	}
	c := slackapi.Call{Team: r.k.Team, Method: slackapi.ChatAppendStream}
	if !final {
		c.Prio = slackapi.Lossy
		if time.Now().Before(r.backoff) {
			requeue()
			return true
		}
	}
	err := r.api.Do(ctx, c, func(ctx context.Context, api *slack.Client) error {
		_, _, err := api.AppendStreamContext(ctx, r.k.Channel, ns.ts, slack.MsgOptionChunks(tasks...))
		return err
	})
	switch {
	case err == nil:
		return true
	case !final && (slackapi.IsDropped(err) || slackapi.IsRateLimited(err)):
		r.lossyOutcome(slackapi.PoolNative, err)
		requeue()
		return true
	}
	r.log.Info("bot: native stream append failed; finishing with edits", "err", err)
	r.nativeFallback(ctx, "")
	return false
}

// nativeFallback ends native streaming; the stream's message becomes the
// first piece of an edit-mode reply: edited with blocks like any other, so
// it carries the Stop button while it is the live piece, the feedback
// buttons when it ends the answer, and its tool calls as task_card blocks
// with their true status (cardblocks.go). rest is text the stream's
// message lacks, sent with its stop.
func (r *Reply) nativeFallback(ctx context.Context, rest string) {
	ns := &r.ns
	if ns.failed {
		return
	}
	ns.failed = true
	if ns.ts == "" {
		return
	}
	r.ensureStopped(ctx, rest)
	// (The first edit rewrites the whole message, whatever it showed.)
	r.posted = append(r.posted[:0], postedMsg{ts: ns.ts, rendered: "\x00stream"})
}

// ensureStopped ends the native stream before the edit path touches its
// message (chat.update on a streaming message is streaming_state_conflict),
// leaving the session in the turn's status (processing, or suspended on a
// person). A cancelled ctx leaves it for the final flush, which runs on a
// fresh one.
func (r *Reply) ensureStopped(ctx context.Context, rest string) {
	ns := &r.ns
	if ns.ts == "" || ns.stopped {
		return
	}
	r.mu.Lock()
	status, tasks := r.status, r.tasks
	r.tasks = nil
	r.mu.Unlock()
	err := r.stopStream(ctx, rest, sessionStatusOf(status), tasks, nil)
	var se slack.SlackErrorResponse
	if err == nil {
		return
	}
	if errors.As(err, &se) {
		// Slack says it is not streaming any more (it timed out, or the
		// person stopped it): Slack may have changed the session.
		ns.stopped = true
		r.streamEnded() // session.go
		return
	}
	r.log.Debug("bot: stopping the native stream failed", "err", err)
}
