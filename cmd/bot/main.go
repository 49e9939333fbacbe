// Command bot runs Bobbin: the Slack socket-mode frontend, the agent, the
// session store and the MCP manager, configured from the environment (see
// README.md, "Configuration"); `bot playground` runs it against a local
// Slack-like page instead (playground.go).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// defaultGCPercent is the garbage collector's target when GOGC is unset:
// the heap may grow by half of what is live before a collection, not by
// all of it (Go's default). Bobbin's live heap is small (3-7 MiB), so
// collecting more often costs little CPU and keeps the peak about 2 MiB
// lower (docs/operations.md, "Memory and start-up"). GOGC, when set,
// wins; GOMEMLIMIT works as usual.
const defaultGCPercent = 50

// embeddedGCPercent is the target when GOGC is unset and REDIS_URL is
// empty: the embedded Redis (miniredis) builds a new Lua interpreter for
// every script call, about 190 KB of garbage each, so the heap reaches
// its target far more often and the target, not the live heap, sets the
// peak. A quarter keeps the peak about 1 MiB lower for about 35 more
// collections over 10 turns (docs/operations.md, "Memory and start-up").
const embeddedGCPercent = 25

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent(os.Getenv("REDIS_URL")))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := command(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bobbin:", err)
		os.Exit(1)
	}
}

// gcPercent is the garbage collector's target when GOGC is unset.
func gcPercent(redisURL string) int {
	if redisURL == "" {
		return embeddedGCPercent
	}
	return defaultGCPercent
}
