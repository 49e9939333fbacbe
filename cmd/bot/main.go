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
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := command(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bobbin:", err)
		os.Exit(1)
	}
}
