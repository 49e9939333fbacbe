package stream

import (
	"context"
	"errors"
	"time"

	"github.com/bobbinbot/bobbin/session"
)

// The lease guard (the root's takeover.go): a replica that lost the
// thread (paused past its TTL, partitioned) stops writing at its first
// attempt, and the next holder finds the message to finish (OnPost
// records it as soon as it is posted).

// allowed reports whether the reply may write to Slack: not once the
// lease is known lost. Other failures (Redis briefly away) do not stop the
// reply: the fencing token still guards the transcript.
//
// A renewal that succeeded is trusted for guardFresh: the lease then runs
// for at least LEASE_TTL (≥ 1 s) from it, and no other replica can take
// it before it expires, so a stream of edits costs one Redis round trip
// each (the budget), not two.
func (r *Reply) allowed(ctx context.Context) bool {
	if r.lost {
		return false
	}
	if r.o.Guard == nil || (!r.guardOK.IsZero() && time.Since(r.guardOK) < guardFresh) {
		return true
	}
	err := r.o.Guard(ctx)
	if errors.Is(err, session.ErrLeaseLost) {
		r.lost = true
		r.log.Info("bot: thread lease lost; not writing to Slack", threadAttrs(r.k.Team, r.k.Channel, r.k.ThreadTS)...)
		return false
	}
	if err == nil {
		r.guardOK = time.Now()
	}
	return true
}

// guardFresh is how long a successful lease renewal vouches for writes
// (half the shortest LEASE_TTL).
const guardFresh = 500 * time.Millisecond

// recordPost reports the first message of the reply to OnPost.
func (r *Reply) recordPost(ctx context.Context, ts string) {
	if r.o.OnPost != nil && !r.reported {
		r.reported = true
		r.o.OnPost(ctx, ts)
	}
}
