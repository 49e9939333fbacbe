package bot_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/bot/install"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/internal/testlog"
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

// TestTokensRevoked: a tokens_revoked whose auth.test shows the token
// dead retires the workspace without a refresh that cannot help and
// without a warning; a rotating token gets the one refresh that tells an
// uninstall (its refresh token is revoked too) from a token revoked alone
// (auth.revoke keeps a rotating installation) or expired, and the
// installation stays in those two cases.
func TestTokensRevoked(t *testing.T) {
	const team = slackemu.TeamID2
	for _, tc := range []struct {
		name      string
		rotation  bool
		slack     func(t *testing.T, emu *slackemu.Server, token string) // what happened in Slack
		kept      bool
		refreshes int
	}{
		{"uninstalled, token does not rotate", false, uninstallIn(team), false, 0},
		{"uninstalled, rotating token", true, uninstallIn(team), false, 1},
		{"revoked alone, token does not rotate", false, revokeAlone(team), false, 0},
		{"revoked alone, rotating token", true, revokeAlone(team), true, 1},
		{"rotating token expired", true, func(t *testing.T, emu *slackemu.Server, token string) {
			emu.ExpireToken(token)
			emu.DeliverEvent(team, tokensRevoked)
		}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			emu := slackemu.New(slackemu.Options{NoRateLimits: true,
				OAuth: slackemu.OAuthOptions{TokenRotation: tc.rotation, TokenLifetime: time.Hour, RefreshGrace: time.Minute}})
			defer emu.Close()
			var rnd [6]byte
			_, _ = rand.Read(rnd[:])
			key := make([]byte, 32)
			_, _ = rand.Read(key)
			store, err := session.Open(ctx, session.Options{URL: os.Getenv("REDIS_URL"), Prefix: "tr" + hex.EncodeToString(rnd[:]), SecretKey: key})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			logs := &testlog.Buffer{}
			m := bot.NewMetrics(nil)
			b, err := bot.New(bot.Options{AppToken: slackemu.AppToken, APIURL: emu.APIURL(), Store: store, Metrics: m,
				Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				Agent:  agent.New(providertest.New(), agent.Options{}),
				Installs: install.Options{ClientID: slackemu.ClientID, ClientSecret: slackemu.ClientSecret,
					RedirectURL: "https://bobbin.example.com/slack/oauth_redirect"}})
			if err != nil {
				t.Fatal(err)
			}
			ei, err := emu.Install(slackemu.InstallRequest{Team: team, Scopes: install.Scopes()})
			if err != nil {
				t.Fatal(err)
			}
			inst := session.Installation{TeamID: team, BotToken: ei.BotToken, BotUserID: ei.BotUserID, BotID: ei.BotID}
			if tc.rotation {
				inst.RefreshToken, inst.ExpiresAt, inst.IssuedAt = ei.RefreshToken, ei.ExpiresAt, ei.ExpiresAt.Add(-time.Hour)
			}
			if err := store.PutInstallation(ctx, inst); err != nil {
				t.Fatal(err)
			}
			if tok, err := bot.PickClientToken(ctx, b, team); err != nil || tok != ei.BotToken {
				t.Fatalf("token before = %q, %v", tok, err)
			}

			tc.slack(t, emu, ei.BotToken)
			var payload json.RawMessage
			for _, e := range emu.Envelopes() {
				if e.EventType == "tokens_revoked" && e.Team == team {
					payload = e.Payload
				}
			}
			if payload == nil {
				t.Fatal("Slack sent no tokens_revoked")
			}
			// The tokens_revoked first (after an uninstall, app_uninstalled
			// may come before or after it).
			if !bot.AdmitEvent(ctx, b, payload) {
				t.Fatal("tokens_revoked not acked")
			}

			stored, err := store.Installation(ctx, team)
			switch {
			case tc.kept && err != nil:
				t.Errorf("installation after tokens_revoked: %v, want it kept", err)
			case tc.kept && stored.BotToken == ei.BotToken:
				t.Error("the installation kept the dead token, want a refreshed one")
			case !tc.kept && !errors.Is(err, session.ErrNotFound):
				t.Errorf("installation after tokens_revoked: %v, want it deleted", err)
			}
			refreshes := 0
			for _, c := range emu.Journal() {
				if c.Method == "oauth.v2.access" && c.Params["grant_type"] == "refresh_token" {
					refreshes++
				}
			}
			if refreshes != tc.refreshes {
				t.Errorf("%d refresh grants, want %d", refreshes, tc.refreshes)
			}
			out := logs.String()
			if strings.Contains(out, `"level":"WARN"`) || strings.Contains(out, `"level":"ERROR"`) {
				t.Errorf("warnings logged:\n%s", out)
			}
			if n := counterValue(m.InstallEvents.WithLabelValues("token_refresh_failed")); n != 0 {
				t.Errorf("token_refresh_failed counted %v times, want 0", n)
			}
		})
	}
}

// tokensRevoked is the inner event of a bot token revoked.
var tokensRevoked = map[string]any{"type": "tokens_revoked", "tokens": map[string]any{"oauth": []string{}, "bot": []string{"U0BOT"}}}

// uninstallIn removes the app from team in Slack.
func uninstallIn(team string) func(*testing.T, *slackemu.Server, string) {
	return func(t *testing.T, emu *slackemu.Server, _ string) {
		if err := emu.Uninstall(team); err != nil {
			t.Fatal(err)
		}
	}
}

// revokeAlone revokes the bot token with auth.revoke (the app stays
// installed) and delivers Slack's tokens_revoked.
func revokeAlone(team string) func(*testing.T, *slackemu.Server, string) {
	return func(t *testing.T, emu *slackemu.Server, token string) {
		api := slack.New(token, slack.OptionAPIURL(emu.APIURL()))
		if res, err := api.SendAuthRevokeContext(context.Background(), token); err != nil || !res.Revoked {
			t.Fatalf("auth.revoke = %+v, %v", res, err)
		}
		emu.DeliverEvent(team, tokensRevoked)
	}
}
