package main

import (
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/session"
)

// threadCache is the bot's thread cache: on with SECRET_KEY (messages are
// sealed with it), off without (imports then read Slack only).
func threadCache(store *session.Store, cfg config) bot.ThreadCache {
	if len(cfg.secretKey) == 0 {
		return nil
	}
	return store.ThreadCache(session.ThreadCacheOptions{TTL: cfg.SessionTTL})
}
