package bot

import (
	"context"
	"time"

	"github.com/bobbinbot/bobbin/session"
)

// A Stop click may reach a replica that does not run the turn. That replica
// records a stop request in Redis (naming the turn, so a late click never
// stops the next one); the lease holder looks for one every stopPoll while
// it holds the thread and cancels the turn exactly like a local Stop.

// stopPoll is how often a lease holder looks for a stop request: one GET
// per held thread, cheap next to the turn's own traffic, and prompt enough
// for a person watching the answer.
const stopPoll = 400 * time.Millisecond

// stopStore carries Stop clicks between replicas (*session.Store).
type stopStore interface {
	RequestStop(ctx context.Context, k session.ThreadKey, turnID, by string) error
	StopRequest(ctx context.Context, k session.ThreadKey) (by string, err error)
	ClearStop(ctx context.Context, k session.ThreadKey) error
}

// requestStop asks the replica running thread k's current turn (per meta)
// to stop it on behalf of by. No turn running is not an error.
func (b *Bot) requestStop(ctx context.Context, k session.ThreadKey, meta session.Meta, by string) error {
	if meta.TurnID == "" || meta.Phase == phaseDone {
		return nil
	}
	return b.store.RequestStop(ctx, k, meta.TurnID, by)
}

// watchStops runs while this replica holds thread k's lease and stops the
// running turn when a click on another replica asked for it.
func (b *Bot) watchStops(ctx context.Context, k session.ThreadKey) {
	t := time.NewTicker(stopPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		by, err := b.store.StopRequest(ctx, k)
		if err != nil || by == "" {
			continue // Redis trouble is the lease renewal's to report
		}
		if b.cancels.cancel(k, stopCause{user: by}) {
			if err := b.store.ClearStop(ctx, k); err != nil {
				b.log.Debug("bot: clearing a stop request failed", "err", err)
			}
		}
	}
}

// metaReader reads a thread's metadata without its transcript
// (*session.Store).
type metaReader interface {
	LoadMeta(ctx context.Context, k session.ThreadKey) (session.Meta, error)
}
