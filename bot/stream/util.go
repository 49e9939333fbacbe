package stream

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
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
