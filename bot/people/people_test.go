package people

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// memStore is an in-process Store.
type memStore struct {
	mu     sync.Mutex
	groups map[string][]string
	ttls   map[string]time.Duration
}

func (s *memStore) CachedUsergroup(_ context.Context, team, group string) ([]string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.groups[team+"/"+group]
	return slices.Clone(m), ok, nil
}

func (s *memStore) CacheUsergroup(_ context.Context, team, group string, members []string, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups == nil {
		s.groups, s.ttls = map[string][]string{}, map[string]time.Duration{}
	}
	s.groups[team+"/"+group] = slices.Clone(members)
	s.ttls[team+"/"+group] = ttl
	return nil
}

// newEmu is a Slack emulator without rate limits.
func newEmu(t *testing.T) *slackemu.Server {
	t.Helper()
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	t.Cleanup(emu.Close)
	return emu
}

// newDir is a Directory on emu's bot token.
func newDir(emu *slackemu.Server, store Store, admins ...string) *Directory {
	log := slog.New(slog.DiscardHandler)
	api := slack.New(slackemu.BotToken, slack.OptionAPIURL(emu.APIURL()))
	// No budgets: the emulator has no rate limits either.
	gov := slackapi.NewGovernor(nil, map[string]slackapi.RateLimit{"*": {Off: true}}, slackapi.NewMetrics(), log, time.Minute)
	if store == nil {
		store = &memStore{}
	}
	return New(Options{API: slackapi.New(gov, slackapi.Static{API: api}, log), Store: store, Admins: admins, Logger: log})
}
