// Command bot runs Bobbin: the Slack socket-mode frontend, the agent, the
// session store and the MCP manager, configured from the environment (see
// README.md, "Configuration").
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
	err := run(ctx, os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bobbin:", err)
		os.Exit(1)
	}
}
