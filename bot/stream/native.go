package stream

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// nativeLifetime is how long a native stream is used before the reply
// continues with edits.
const nativeLifetime = 4 * time.Minute

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
	if len(mrkdwn.Split(text, mrkdwn.SplitLimit)) > 1 || (!ns.started.IsZero() && time.Since(ns.started) > nativeLifetime) || r.waitsOnPerson() {
		// Streams die about 5 minutes after they start
		// (message_not_in_streaming_state): finish with edits before that,
		// and before a wait on a person (streamlife.go).
		r.nativeFallback(ctx)
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
			r.nativeFallback(ctx)
			return false
		}
	}
	if final && !ns.stopped {
		if !r.allowed(ctx) {
			return true
		}
		err := r.api.Do(ctx, slackapi.Call{Team: r.k.Team, Method: slackapi.ChatStopStream}, func(ctx context.Context, api *slack.Client) error {
			var opts []slack.MsgOption
			if r.o.Feedback != nil {
				opts = append(opts, slack.MsgOptionBlocks(r.o.Feedback))
			}
			_, _, err := api.StopStreamContext(ctx, r.k.Channel, ns.ts, opts...)
			return err
		})
		if err != nil {
			r.nativeFallback(ctx)
			return false
		}
		ns.stopped = true
	}
	return true
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
	r.nativeFallback(ctx)
	return false
}

// nativeFallback ends native streaming; the stream's message becomes the
// first piece of an edit-mode reply (edited with markdown_text).
func (r *Reply) nativeFallback(ctx context.Context) {
	ns := &r.ns
	if ns.failed {
		return
	}
	ns.failed = true
	if ns.ts == "" {
		return
	}
	r.ensureStopped(ctx)
	r.streamEnded() // session.go
	r.posted = append(r.posted[:0], postedMsg{ts: ns.ts, markdownText: true, rendered: "\x00stream"})
}

// ensureStopped ends the native stream before the edit path touches its
// message (chat.update on a streaming message is streaming_state_conflict).
// A cancelled ctx leaves it for the final flush, which runs on a fresh one.
func (r *Reply) ensureStopped(ctx context.Context) {
	ns := &r.ns
	if ns.ts == "" || ns.stopped {
		return
	}
	err := r.api.Do(ctx, slackapi.Call{Team: r.k.Team, Method: slackapi.ChatStopStream}, func(ctx context.Context, api *slack.Client) error {
		_, _, err := api.StopStreamContext(ctx, r.k.Channel, ns.ts)
		return err
	})
	var se slack.SlackErrorResponse
	if err == nil || errors.As(err, &se) {
		// Stopped now, or Slack says it is not streaming any more.
		ns.stopped = true
		return
	}
	r.log.Debug("bot: stopping the native stream failed", "err", err)
}
