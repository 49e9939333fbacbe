// Package testlog holds a log sink for tests that run code logging from
// several goroutines. It is imported only from tests.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer safe for concurrent writers, for slog handlers in
// tests that later search the output (for example for leaked secrets).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
