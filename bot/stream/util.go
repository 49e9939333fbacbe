package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"
)

// threadAttrs are the attributes every log line about a thread carries.
func threadAttrs(team, channel, thread string) []any {
	return []any{slog.String("team", team), slog.String("channel", channel), slog.String("thread", thread)}
}

// newID is a random id (a reply's name in the live pools).
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
