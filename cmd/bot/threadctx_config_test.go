package main

import (
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/bot"
)

// TestThreadContextConfig: THREAD_FOLLOWUPS and THREAD_CONTEXT_MESSAGES
// defaults, bad values named without echoing them, and 0 meaning off.
func TestThreadContextConfig(t *testing.T) {
	c, err := loadConfig(envFunc(goodEnv()))
	if err != nil {
		t.Fatal(err)
	}
	if c.ThreadFollowups != bot.FollowupsAll || c.ThreadContextMessages != bot.DefaultThreadContextMessages {
		t.Errorf("defaults: %q %d", c.ThreadFollowups, c.ThreadContextMessages)
	}
	e := goodEnv()
	e["THREAD_FOLLOWUPS"] = "mentions-canary"
	e["THREAD_CONTEXT_MESSAGES"] = "5000"
	_, err = loadConfig(envFunc(e))
	if err == nil || !strings.Contains(err.Error(), "THREAD_FOLLOWUPS must be all or mention") ||
		!strings.Contains(err.Error(), "THREAD_CONTEXT_MESSAGES must be between 0 (off) and 1000") || strings.Contains(err.Error(), "canary") {
		t.Errorf("err = %v", err)
	}
	e = goodEnv()
	e["THREAD_FOLLOWUPS"] = "mention"
	e["THREAD_CONTEXT_MESSAGES"] = "0"
	c, err = loadConfig(envFunc(e))
	if err != nil || c.ThreadFollowups != bot.FollowupsMention || threadContextMessages(c.ThreadContextMessages) >= 0 {
		t.Errorf("mention, off: %v %q %d", err, c.ThreadFollowups, c.ThreadContextMessages)
	}
	if threadContextMessages(30) != 30 {
		t.Error("30 is not passed on")
	}
}
