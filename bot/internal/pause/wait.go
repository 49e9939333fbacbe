// Package pause holds the one way the Slack side pauses: for a while, or
// until the context ends, whichever comes first. It imports nothing of
// the module, so every package under bot/ may use it (the platform layer
// included).
package pause

import (
	"context"
	"time"
)

// Sleep waits d or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
