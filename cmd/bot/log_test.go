package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLoggerRedacts(t *testing.T) {
	canaries := []string{
		"xoxb-111-222-CANARYbot",
		"xapp-1-A1-333-CANARYapp",
		"xoxe.xoxp-1-CANARYrefresh",
		"sk-CANARYabcdefghijklmnop",
		"CANARYbearer",
		"CANARYticket",
		"CANARYpass",
		"CANARYheader",
		"CANARYkey",
		"CANARYsig",
		"CANARYcode",
		"CANARYuser",
		"CANARYaccess",
		"CANARYamz",
	}
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			log := newLogger(&buf, format, slog.LevelDebug)
			log.Info("connecting with xoxb-111-222-CANARYbot")
			log.Debug("open", "url", "wss://wss-primary.slack.com/link/?ticket=CANARYticket&app_id=A1")
			log.Warn("call failed", "err", errors.New("post: Authorization: Bearer CANARYbearer"),
				"redis", "redis://user:CANARYpass@db:6379/0")
			log.With("token", "anything").Info("with", "app", "xapp-1-A1-333-CANARYapp")
			log.Info("grouped", slog.Group("mcp", slog.String("api_key", "CANARYheader"), slog.String("key", "sk-CANARYabcdefghijklmnop")))
			log.Info("stringer", "v", fmt.Stringer(stringer("refresh xoxe.xoxp-1-CANARYrefresh")))
			log.Error("obj", "v", struct{ Authorization string }{"Bearer CANARYbearer"})
			log.Warn("mcp server unavailable", "err", errors.New(`Post "https://mcp.example.com/mcp?key=CANARYkey&x=1": refused`),
				"reason", "GET https://h/f?X-Amz-Signature=CANARYamz;sig=CANARYsig&code=CANARYcode",
				"url", "https://CANARYuser@h/mcp", "other", "wss://h/?access_token=CANARYaccess")
			out := buf.String()
			for _, c := range canaries {
				if strings.Contains(out, c) {
					t.Errorf("log output contains canary %s:\n%s", c, out)
				}
			}
			if !strings.Contains(out, "connecting with") || !strings.Contains(out, redacted) {
				t.Errorf("log output lost the message or the marker:\n%s", out)
			}
		})
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

// TestLoggerDurations: durations read as "1.5s" in both formats, not as
// nanoseconds.
func TestLoggerDurations(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		log := newLogger(&buf, format, slog.LevelInfo)
		log.With("ttl", 20*time.Second).Info("backing off", "backoff", 1500*time.Millisecond,
			slog.Group("g", slog.Duration("wait", time.Minute)))
		out := buf.String()
		for _, want := range []string{"1.5s", "20s", "1m0s"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: log lacks %q:\n%s", format, want, out)
			}
		}
		if strings.Contains(out, "1500000000") {
			t.Errorf("%s: duration logged as nanoseconds:\n%s", format, out)
		}
	}
}
