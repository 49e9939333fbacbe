package main

import (
	"context"
	"io"
)

// run is the whole program: load the configuration, build every component,
// serve until ctx ends, then shut down in reverse order.
func run(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := newLogger(stdout, cfg.LogFormat, cfg.logLevel)
	log.Info("bobbin: configuration loaded")
	<-ctx.Done()
	return nil
}
