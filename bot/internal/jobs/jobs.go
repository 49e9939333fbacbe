// Package jobs runs the bot's work after an ack: a slash command answered
// later, a click whose prompt update waits on the chat.update budget, a Home
// button's disconnect. Each job gets a context that outlives the request
// (Slack cancels nothing, but the envelope handler returns) bounded by a
// timeout; a panic is logged, never crashes the replica; and shutdown waits
// for the jobs under way, refusing new ones atomically with that wait.
//
// It imports nothing of this module.
package jobs

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// Runner owns the jobs it starts. The zero value is not usable; use New.
type Runner struct {
	log     *slog.Logger
	timeout time.Duration

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// New returns a Runner whose jobs each get at most timeout and whose panics
// and failures go to log.
func New(log *slog.Logger, timeout time.Duration) *Runner {
	return &Runner{log: log, timeout: timeout}
}

// Go runs fn in a goroutine of its own with a context that keeps ctx's
// values but not its cancellation, limited to the Runner's timeout. name
// says what the job is in the log ("a slash command"). Go reports false,
// and runs nothing, once Close has begun: the caller may then do the work
// inline (see Do).
func (r *Runner) Go(ctx context.Context, name string, fn func(ctx context.Context)) bool {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		r.run(ctx, name, fn)
	}()
	return true
}

// Do runs fn as a job in the background, or inline (with the same context,
// timeout and panic recovery) when the Runner is closing, so the work is
// never lost to shutdown.
func (r *Runner) Do(ctx context.Context, name string, fn func(ctx context.Context)) {
	if !r.Go(ctx, name, fn) {
		r.run(ctx, name, fn)
	}
}

func (r *Runner) run(ctx context.Context, name string, fn func(ctx context.Context)) {
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("bot: panic in "+name, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	fn(jctx)
}

// Close refuses new jobs and waits for those under way. It may be called
// more than once.
func (r *Runner) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
}
