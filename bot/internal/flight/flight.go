// Package flight shares one call among the callers that ask for the same
// thing at once (golang.org/x/sync/singleflight), with the Slack side's
// rule for contexts: the shared call runs under the first caller's values
// but not its cancellation, bounded by its own timeout, and each caller
// stops waiting when its own context ends. It imports nothing of the
// module.
package flight

import (
	"context"
	"time"

	"golang.org/x/sync/singleflight"
)

// Do runs fn once for every concurrent caller of g with key; each caller
// stops waiting when its own ctx ends (one caller giving up does not fail
// the others). fn runs for at most timeout.
func Do[T any](ctx context.Context, g *singleflight.Group, key string, timeout time.Duration, fn func(ctx context.Context) (T, error)) (T, error) {
	ch := g.DoChan(key, func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		return fn(fctx)
	})
	select {
	case r := <-ch:
		v, _ := r.Val.(T)
		return v, r.Err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
