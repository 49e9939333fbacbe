package mcp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// errCallTimeout is the cause of a tool call's context when its clock runs
// out; it wraps context.DeadlineExceeded so callers testing for a deadline
// see one.
var errCallTimeout = fmt.Errorf("tool call timed out: %w", context.DeadlineExceeded)

// callClock bounds a tool call's own time but not the time a person spends
// answering it (a Connect prompt, an elicitation form): pause stops it,
// resume restarts it with what was left. Pauses nest.
type callClock struct {
	mu      sync.Mutex
	cancel  context.CancelCauseFunc
	timer   *time.Timer
	left    time.Duration
	started time.Time
	paused  int
	done    bool
}

type clockKey struct{}

// withCallClock returns a context cancelled (cause errCallTimeout) once d
// of unpaused time has passed; stop releases it.
func withCallClock(parent context.Context, d time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	c := &callClock{cancel: cancel, left: d, started: time.Now()}
	c.timer = time.AfterFunc(d, func() { cancel(errCallTimeout) })
	ctx = context.WithValue(ctx, clockKey{}, c)
	return ctx, func() {
		c.mu.Lock()
		c.done = true
		c.timer.Stop()
		c.mu.Unlock()
		cancel(context.Canceled)
	}
}

// pauseClock pauses the call clock of ctx, if any, until the returned
// function is called.
func pauseClock(ctx context.Context) func() {
	c, _ := ctx.Value(clockKey{}).(*callClock)
	if c == nil {
		return func() {}
	}
	c.pause()
	var once sync.Once
	return func() { once.Do(c.resume) }
}

func (c *callClock) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused++
	if c.paused == 1 && !c.done && c.timer.Stop() {
		c.left -= time.Since(c.started)
	}
}

func (c *callClock) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused--
	if c.paused == 0 && !c.done {
		c.started = time.Now()
		c.timer.Reset(max(c.left, time.Millisecond))
	}
}

// timedOut reports whether ctx ended because its call clock ran out.
func timedOut(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), errCallTimeout)
}
