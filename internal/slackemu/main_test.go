package slackemu_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: the
// emulator's Close must reap every socket, timer and handler.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
