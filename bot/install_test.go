package bot_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/bot/install"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/provider/providertest"
	"github.com/bobbinbot/bobbin/session"
)

// TestInstallRefreshBeforeExpiryOnce: two replicas (two bots on one
// Redis) about to use an installation whose rotating token nears expiry
// spend its refresh token once, and both end up with the new token; the
// workspace's name comes from team.info with the new token.
func TestInstallRefreshBeforeExpiryOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	emu := slackemu.New(slackemu.Options{NoRateLimits: true,
		OAuth: slackemu.OAuthOptions{TokenRotation: true, TokenLifetime: 2 * time.Second, RefreshGrace: time.Minute}})
	defer emu.Close()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	open := func() *session.Store {
		s, err := session.Open(ctx, session.Options{URL: os.Getenv("REDIS_URL"), Prefix: "bi" + hex.EncodeToString(rnd[:]), SecretKey: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	store := open()
	// A second replica has its own connection to the same Redis (or, on
	// the embedded one, the same store).
	peer := store
	if os.Getenv("REDIS_URL") != "" {
		peer = open()
	}
	var bots []*bot.Bot
	for _, s := range []*session.Store{store, peer} {
		b, err := bot.New(bot.Options{AppToken: slackemu.AppToken, APIURL: emu.APIURL(), Store: s,
			Agent:    agent.New(providertest.New(), agent.Options{}),
			Installs: install.Options{ClientID: slackemu.ClientID, ClientSecret: slackemu.ClientSecret, RedirectURL: "https://bobbin.example.com/slack/oauth_redirect"}})
		if err != nil {
			t.Fatal(err)
		}
		bots = append(bots, b)
	}
	// Installed now: the token lives 2 s, refreshed in its last 0.5 s.
	ei, err := emu.Install(slackemu.InstallRequest{Team: slackemu.TeamID2, Scopes: install.Scopes()})
	if err != nil {
		t.Fatal(err)
	}
	issued := ei.ExpiresAt.Add(-2 * time.Second)
	if err := store.PutInstallation(ctx, session.Installation{TeamID: slackemu.TeamID2, BotToken: ei.BotToken, BotUserID: ei.BotUserID,
		BotID: ei.BotID, RefreshToken: ei.RefreshToken, ExpiresAt: ei.ExpiresAt, IssuedAt: issued}); err != nil {
		t.Fatal(err)
	}
	// Both hold the installation before it needs a refresh.
	for _, b := range bots {
		if tok, err := bot.PickClientToken(ctx, b, slackemu.TeamID2); err != nil || tok != ei.BotToken {
			t.Fatalf("token before = %q, %v; want %q (%v before expiry)", tok, err, ei.BotToken, time.Until(ei.ExpiresAt))
		}
	}
	// Into the last quarter of its life (the refresh margin).
	time.Sleep(time.Until(ei.ExpiresAt.Add(-400 * time.Millisecond)))
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			tok, err := bot.PickClientToken(ctx, bots[i%2], slackemu.TeamID2)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			got[tok]++
			mu.Unlock()
		})
	}
	wg.Wait()
	refreshes := 0
	for _, c := range emu.Journal() {
		if c.Method == "oauth.v2.access" && c.Params["grant_type"] == "refresh_token" {
			refreshes++
		}
	}
	if refreshes != 1 {
		t.Errorf("%d refresh grants, want 1", refreshes)
	}
	var now slackemu.Installation
	for _, in := range emu.Installations() {
		if in.TeamID == slackemu.TeamID2 && !in.Pinned {
			now = in
		}
	}
	if len(got) != 1 || got[now.BotToken] != 8 || now.BotToken == ei.BotToken {
		t.Errorf("tokens used = %v, want all 8 the new one", got)
	}
	stored, err := store.Installation(ctx, slackemu.TeamID2)
	if err != nil || stored.BotToken != now.BotToken || stored.RefreshToken != now.RefreshToken || !slices.Contains(now.BotTokens, stored.BotToken) {
		t.Errorf("stored installation not the refreshed one: %v", err)
	}
	if name := bot.TeamName(ctx, bots[1], slackemu.TeamID2); name != "Globex" {
		t.Errorf("team name = %q, want Globex", name)
	}
}
