package bot

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/internal/pause"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// Takeover of orphaned turns. A replica that dies mid-turn (kill -9, node
// loss) stops renewing its thread lease; the thread stays in the store's
// active-turns index. Every replica scans that index; the first to acquire
// an orphan's lease (with a new, larger fencing token, so the dead or
// paused holder's writes are refused from then on) resumes the turn from
// the transcript: it marks the half-streamed Slack message as interrupted
// and posts the resumed answer below it. A graceful shutdown hands its
// turns over the same way, without waiting for the lease to expire.

// orphanScanEvery is the period of the orphan scan; takeover happens at
// most about this long after a dead holder's lease expired.
const orphanScanEvery = 2 * time.Second

// Turn phases kept in session.Meta.Phase.
const (
	phaseModel       = "model"       // a turn is running (set by runTurn)
	phaseDone        = "done"        // the last turn ended and its reply was delivered
	phaseInterrupted = "interrupted" // handed over at shutdown: resume it
)

// interruptedNote replaces the half-streamed message of a turn another
// replica resumes.
const interruptedNote = "_This answer was interrupted (a bot replica stopped). It continues below._"

// takeoverStore is what takeover needs of the session store (part of
// Store).
type takeoverStore interface {
	Orphans(ctx context.Context) ([]session.ThreadKey, error)
	SaveReply(ctx context.Context, k session.ThreadKey, fence int64, turnID, ts string) error
	ReplyOf(ctx context.Context, k session.ThreadKey, turnID string) (string, error)
}

// scanOrphans starts a worker for every orphaned thread until ctx ends.
// Workers run under turnCtx, like those started by events.
func (b *Bot) scanOrphans(ctx, turnCtx context.Context) {
	ts := b.store
	for {
		// Jitter spreads the replicas' scans.
		wait := orphanScanEvery/2 + rand.N(orphanScanEvery)
		if !pause.Sleep(ctx, wait) {
			return
		}
		if b.draining.Load() {
			return
		}
		orphans, err := ts.Orphans(ctx)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Debug("bot: orphan scan failed", "err", err)
			}
			continue
		}
		for _, k := range orphans {
			b.startWorker(turnCtx, k)
		}
	}
}

// resumeInterrupted runs once after a worker acquired a thread: if the
// last turn did not finish (its replica died or handed it over), it is
// resumed from the transcript before queued messages are served.
func (b *Bot) resumeInterrupted(ctx context.Context, lease *session.Lease) {
	k := lease.Key()
	// Most acquisitions follow a finished turn: check the metadata alone
	// before reading the transcript.
	if m, err := b.store.LoadMeta(ctx, k); err == nil && (m.Phase == "" || m.Phase == phaseDone) || errors.Is(err, session.ErrNotFound) {
		return
	}
	meta, history, err := b.store.Load(ctx, k)
	if err != nil || meta.Phase == "" || meta.Phase == phaseDone || len(history) == 0 {
		if err != nil && !errors.Is(err, session.ErrNotFound) {
			b.log.Warn("bot: loading the session to check for an interrupted turn failed", append(threadAttrs(k.Team, k.Channel, k.ThreadTS), "err", err)...)
		}
		return
	}
	log := b.log.With(threadAttrs(k.Team, k.Channel, k.ThreadTS)...)
	log.Info("bot: resuming an interrupted turn", "phase", meta.Phase, "turn", meta.TurnID, "token", lease.Token())
	fence := lease.Token()

	old := ""
	old, _ = b.store.ReplyOf(ctx, k, meta.TurnID)
	last := history[len(history)-1]
	if last.Role == provider.RoleAssistant && !last.Interrupted && len(last.ToolCalls) == 0 {
		// The answer was complete; only its delivery (or the record of
		// it) was cut short. Finish the same message: editing it with the
		// same text is harmless, posting it again would be a duplicate.
		r := b.newReply(lease, meta.TurnID, inbound{User: meta.RequesterID}, nil, old) // reply.go
		r.Finish(ctx, last.Content, "")
		b.endTurn(ctx, lease, meta, phaseDone, r.TS())
		return
	}
	// The half-streamed message: mark it, the answer follows below.
	if old != "" {
		err := b.slack.Do(ctx, slackapi.Call{Team: k.Team, Method: slackapi.ChatUpdate}, func(ctx context.Context, api *slack.Client) error {
			_, _, _, err := api.UpdateMessageContext(ctx, k.Channel, old,
				slack.MsgOptionText(interruptedNote, false), slack.MsgOptionBlocks(),
				slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl())
			return err
		})
		if err != nil {
			log.Warn("bot: marking the interrupted reply failed", "err", err)
		}
	}
	if last.Role == provider.RoleAssistant && last.Interrupted && len(last.ToolCalls) == 0 {
		// A partial answer saved at shutdown: answer again in full.
		history = history[:len(history)-1]
		if err := b.store.Replace(ctx, k, fence, history); err != nil {
			log.Warn("bot: dropping the partial answer failed", "err", err)
			return
		}
	}
	b.resumeTurn(ctx, lease, meta, history)
}

// endTurn records how the turn ended (phase) and the reply it left.
func (b *Bot) endTurn(ctx context.Context, lease *session.Lease, meta session.Meta, phase, replyTS string) {
	k := lease.Key()
	meta.Phase = phase
	meta.ReplyTS = replyTS
	meta.Updated = b.opts.Now()
	if err := b.store.SaveMeta(context.WithoutCancel(ctx), k, lease.Token(), meta); err != nil && !errors.Is(err, session.ErrStaleFence) {
		b.log.Warn("bot: saving session metadata failed", append(threadAttrs(k.Team, k.Channel, k.ThreadTS), "err", err)...)
	}
}

// resumeTurn runs the agent on the transcript as it stands (the person's
// message is already in it) and streams the answer as a new reply.
func (b *Bot) resumeTurn(ctx context.Context, lease *session.Lease, meta session.Meta, history []provider.Message) {
	k := lease.Key()
	fence := lease.Token()
	log := b.log.With(threadAttrs(k.Team, k.Channel, k.ThreadTS)...)
	b.m.ActiveTurns.Inc()
	defer b.m.ActiveTurns.Dec()
	start := time.Now()

	meta.TurnID = newID()
	meta.ReplyTS = ""
	meta.Phase = phaseModel
	meta.Updated = b.opts.Now()
	if err := b.store.SaveMeta(ctx, k, fence, meta); err != nil {
		log.Warn("bot: saving session metadata failed", "err", err)
		return
	}
	b.driveTurn(ctx, lease, meta, history, inbound{User: meta.RequesterID}, start)
}

// markedEnqueuer is session.Store's EnqueueMarked.
type markedEnqueuer interface {
	EnqueueMarked(ctx context.Context, k session.ThreadKey, payload []byte) (bool, error)
}

// enqueue queues a message for thread k and marks the thread in the active-turns index in the same round trip: if this
// replica dies before a worker acquires the thread (turn slots may all be
// busy), another replica's orphan scan still finds the message.
func (b *Bot) enqueue(ctx context.Context, k session.ThreadKey, payload []byte) (leased bool, err error) {
	return b.store.EnqueueMarked(ctx, k, payload)
}
