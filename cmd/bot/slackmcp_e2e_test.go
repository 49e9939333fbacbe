package main

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/internal/oauthtest"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/mcp"
)

// TestSlackMCPPreset: `/bobbin mcp add slack` registers Slack's MCP
// server (SLACK_MCP_URL, here internal/oauthtest behaving like Slack's:
// no dynamic registration, client_secret_post, a 302 on the path-aware
// discovery URL) as a per-user server signing in with the app's own
// SLACK_CLIENT_ID and SLACK_CLIENT_SECRET; Connect works as for any
// per-user server and calls act as the person; the secret is in no log,
// Slack message or Redis value.
func TestSlackMCPPreset(t *testing.T) {
	const clientID, secret = "1111.2222", "canary-slack-app-secret"
	sl := oauthtest.New(t, oauthtest.Options{Slack: true, Scopes: mcp.SlackScopes, ClientID: clientID, ClientSecret: secret,
		RedirectURIs: []string{"https://bobbin.test/oauth/callback"}})
	rs := newReplicaSet(t, map[string]string{"PUBLIC_URL": "https://bobbin.test", "SLACK_CLIENT_ID": clientID,
		"SLACK_CLIENT_SECRET": secret, "SLACK_MCP_URL": sl.URL})
	rs.start(1)
	admin, bob := slackemu.UserAdmin, slackemu.UserBob

	e := rs.slash(admin, "mcp add slack", "bobbin_connect_link")
	if got := ephemeralText(e); !strings.Contains(got, "OAuth (per-user)") || !strings.Contains(got, "Model Context Protocol") {
		t.Errorf("add answered %s", got)
	}
	link := buttonURL(t, e.Blocks, "bobbin_connect_link")
	u, _ := url.Parse(link)
	q := u.Query()
	if !strings.HasPrefix(link, sl.Issuer+"/oauth/v2_user/authorize?") || q.Get("client_id") != clientID ||
		!slices.Equal(strings.Fields(q.Get("scope")), mcp.SlackScopes) || q.Get("code_challenge_method") != "S256" {
		t.Fatalf("Connect url = %s", link)
	}
	if code, page, _ := rs.connectVia(rs.reps[0], link, "acct-admin"); code != 200 {
		t.Fatalf("callback = %d %s", code, page)
	}
	if reqs := sl.TokenRequests(); len(reqs) != 1 || reqs[0].Get("client_secret") != secret {
		t.Fatalf("token requests %v", reqs)
	}
	if l := ephemeralText(rs.slash(admin, "mcp list", "MCP servers")); !strings.Contains(l, "`slack`") || !strings.Contains(l, "OAuth, per-user: connected for you") {
		t.Errorf("admin's list:\n%s", l)
	}

	// Bob's first call: his own Connect prompt, then his own token.
	nb := len(rs.emu.Ephemerals(bob))
	th := rs.mention(bob, "call slack__whoami")
	rs.allow(bob, th)
	prompt := rs.ephemeral(bob, nb, "bobbin_connect_link", "bob's Connect prompt")
	if code, page, _ := rs.connectVia(rs.reps[0], buttonURL(t, prompt.Blocks, "bobbin_connect_link"), "acct-bob"); code != 200 {
		t.Fatalf("bob's callback = %d %s", code, page)
	}
	rs.waitThread(th, "RESULT: acct-bob")
	if st := sl.Stats(); st.AuthorizeRefusals != 0 || st.Registrations != 0 {
		t.Errorf("the authorization server saw %+v", st)
	}
	// The name is taken now.
	rs.slash(admin, "mcp add slack", "already registered")
	if where := rs.leaks("canary-"); len(where) > 0 {
		t.Errorf("a token or the client secret appears in %v", where)
	}
}

// TestSlackMCPPresetNeedsClient: without the app's client id and secret,
// `/bobbin mcp add slack` says what is missing and registers nothing.
func TestSlackMCPPresetNeedsClient(t *testing.T) {
	rs := newReplicaSet(t, map[string]string{"PUBLIC_URL": "https://bobbin.test"})
	rs.start(1)
	rs.slash(slackemu.UserAdmin, "mcp add slack", "has not set SLACK_CLIENT_ID and SLACK_CLIENT_SECRET. Nothing was saved.")
	if l := ephemeralText(rs.slash(slackemu.UserAdmin, "mcp list", "MCP servers")); strings.Contains(l, "`slack`") {
		t.Errorf("list after a refused add:\n%s", l)
	}
}
