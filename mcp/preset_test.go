package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/internal/oauthtest"
)

// TestSlackPresetConnectsPerUser: a server registered with the Slack
// preset signs each person in with the app's pre-registered client
// against an authorization server that behaves like Slack's (no dynamic
// registration, client_secret_post, S256, a 302 on the path-aware
// discovery URL): the authorize URL carries the client id and the
// preset's scopes, the token request the client secret (posted), the
// record only the preset's name; calls act as the person.
func TestSlackPresetConnectsPerUser(t *testing.T) {
	const secret = "canary-slack-app-secret"
	srv := oauthtest.New(t, oauthtest.Options{Slack: true, Scopes: SlackScopes, ClientID: "1111.2222", ClientSecret: secret,
		RedirectURIs: []string{"https://bobbin.test" + CallbackPath}})
	r := newReplicas(t, 1, nil, nil, func(o *Options) {
		o.AllowPrivateNetworks = true
		o.Presets = map[string]Preset{servers.PresetSlack: SlackPreset("1111.2222", secret)}
	})
	m := r.mgrs[0]
	alice := reqCtx(t, "UALICE")
	if err := m.Register(alice, "T1", Registered{Name: "slack", URL: srv.URL, Auth: AuthUser, Preset: servers.PresetSlack, CreatedBy: "UALICE"}); err != nil {
		t.Fatal(err)
	}
	rec := string(r.regs[0].regs["T1"][0].Record)
	if !strings.Contains(rec, `"preset":"slack"`) || strings.Contains(rec, "1111.2222") || strings.Contains(rec, "canary") {
		t.Fatalf("record %s: want the preset's name, not its client", rec)
	}

	link, _, err := m.StartConnect(alice, "T1", "slack", "UALICE")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Path != "/oauth/v2_user/authorize" || q.Get("client_id") != "1111.2222" || q.Get("code_challenge_method") != "S256" {
		t.Fatalf("authorize URL %s", link)
	}
	if got := strings.Fields(q.Get("scope")); !slices.Equal(got, SlackScopes) {
		t.Fatalf("scope %q, want %q", got, SlackScopes)
	}
	if strings.Contains(link, secret) {
		t.Fatal("the client secret is in the authorize URL")
	}
	if page := r.connect(0, link, "alice"); page.Code != 200 {
		t.Fatalf("callback: %d %s", page.Code, page.Body)
	}
	reqs := srv.TokenRequests()
	if len(reqs) != 1 || reqs[0].Get("client_id") != "1111.2222" || reqs[0].Get("client_secret") != secret || reqs[0].Get("code_verifier") == "" {
		t.Fatalf("token requests %v", reqs)
	}
	if st := srv.Stats(); st.AuthorizeRefusals != 0 || st.Registrations != 0 || st.CodeExchanges != 1 {
		t.Fatalf("authorization server saw %+v", st)
	}

	tools, err := m.Tools(alice, "T1")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := toolByName(t, tools, "slack__whoami").Call(alice, nil); err != nil || out != "alice" {
		t.Fatalf("whoami: %q %v", out, err)
	}
	r.noCanary()
}

// TestSlackPresetNotConfigured: a registration naming the preset on a bot
// without the app's client id and secret says what is missing.
func TestSlackPresetNotConfigured(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{Slack: true})
	r := newReplicas(t, 1, nil, nil, func(o *Options) {
		o.AllowPrivateNetworks = true
		o.Presets = map[string]Preset{servers.PresetSlack: SlackPreset("", "")}
	})
	m := r.mgrs[0]
	ctx := reqCtx(t, "UALICE")
	if err := m.Register(ctx, "T1", Registered{Name: "slack", URL: srv.URL, Auth: AuthUser, Preset: servers.PresetSlack, CreatedBy: "UALICE"}); err != nil {
		t.Fatal(err)
	}
	_, _, err := m.StartConnect(ctx, "T1", "slack", "UALICE")
	if err == nil || !strings.Contains(err.Error(), "SLACK_CLIENT_ID and SLACK_CLIENT_SECRET") {
		t.Fatalf("StartConnect: %v", err)
	}
}

// TestSlackMCPDisabledExplained: Slack's -32600 "App is not enabled for
// Slack MCP server access" becomes words telling the admin where to turn
// MCP on.
func TestSlackMCPDisabledExplained(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{Slack: true, Scopes: SlackScopes})
	srv.SetMCPEnabled(false)
	r := newReplicas(t, 1, nil, nil, func(o *Options) {
		o.AllowPrivateNetworks = true
		o.Presets = map[string]Preset{servers.PresetSlack: SlackPreset("1111.2222", "canary-client-secret")}
	})
	m := r.mgrs[0]
	alice := reqCtx(t, "UALICE")
	if err := m.Register(alice, "T1", Registered{Name: "slack", URL: srv.URL, Auth: AuthUser, Preset: servers.PresetSlack, CreatedBy: "UALICE"}); err != nil {
		t.Fatal(err)
	}
	link, _, err := m.StartConnect(alice, "T1", "slack", "UALICE")
	if err != nil {
		t.Fatal(err)
	}
	if page := r.connect(0, link, "alice"); page.Code != 200 {
		t.Fatalf("callback: %d %s", page.Code, page.Body)
	}
	_, _ = m.Tools(alice, "T1")
	st := m.StatusFor(alice, "T1", "UALICE")
	if len(st) != 1 || !strings.Contains(st[0].Error, "Model Context Protocol") {
		t.Fatalf("status %+v, want the MCP toggle explained", st)
	}
	if !errors.Is(explainErr(errors.New(`calling "initialize": App is not enabled for Slack MCP server access. Please enable it here`)), errSlackMCPOff) {
		t.Fatal("explainErr did not recognise Slack's answer")
	}
}

// TestDiscoverySlackQuirk: without resource_metadata in the challenge,
// the path-aware URL answers 302 and the bare-origin document (which
// describes the MCP endpoint) still gives the authorization server and
// the scopes.
func TestDiscoverySlackQuirk(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{Slack: true, Scopes: SlackScopes})
	sa := serverAuth{name: "slack", url: srv.URL, allowPrivate: true}
	hc, done := sa.httpClient()
	defer done()
	d, err := discover(t.Context(), hc, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.prm.Resource != srv.URL || !slices.Equal(d.prm.ScopesSupported, SlackScopes) || d.asm.Issuer != srv.Issuer || d.asm.RegistrationEndpoint != "" {
		t.Fatalf("discovered %+v / %+v", d.prm, d.asm)
	}
	if n := srv.Stats().PathAwareDiscoveries; n != 1 {
		t.Fatalf("%d path-aware discoveries, want 1 (tried, then passed over)", n)
	}
}

// TestSlackPresetRotatedSecret: the app's client secret is rotated at
// Slack and the bot restarted with the new SLACK_CLIENT_SECRET. A
// connection made before keeps working: its refresh authenticates with
// the secret configured now, also for a record an earlier version
// stored with the secret in it (which loses it at that save). A replica
// still on the old secret fails its call but leaves the connection
// alone. Stored connections and pending authorizations never hold the
// secret, and a new Connect redeems its code with the secret configured
// now.
func TestSlackPresetRotatedSecret(t *testing.T) {
	const oldSecret, newSecret = "canary-old-app-secret", "canary-new-app-secret"
	srv := oauthtest.New(t, oauthtest.Options{Slack: true, Scopes: SlackScopes, ClientID: "1111.2222", ClientSecret: oldSecret,
		RedirectURIs: []string{"https://bobbin.test" + CallbackPath}})
	// Replica 0 runs with the old secret; replica 1 is the bot restarted
	// with the new one (same Redis).
	secrets := []string{oldSecret, newSecret}
	built := 0
	r := newReplicas(t, 2, nil, nil, func(o *Options) {
		o.AllowPrivateNetworks = true
		o.Presets = map[string]Preset{servers.PresetSlack: SlackPreset("1111.2222", secrets[built])}
		built++
	})
	reg := Registered{Name: "slack", URL: srv.URL, Auth: AuthUser, Preset: servers.PresetSlack, CreatedBy: "UALICE"}
	alice := reqCtx(t, "UALICE")
	if err := r.mgrs[0].Register(alice, "T1", reg); err != nil {
		t.Fatal(err)
	}
	r.regs[1].set("T1", reg)
	link, _, err := r.mgrs[0].StartConnect(alice, "T1", "slack", "UALICE")
	if err != nil {
		t.Fatal(err)
	}
	if page := r.connect(0, link, "alice"); page.Code != 200 {
		t.Fatalf("callback: %d %s", page.Code, page.Body)
	}
	stored := func(user string) string {
		t.Helper()
		raw, err := r.stores[0].OAuthConnection(alice, "T1", "slack", user)
		if err != nil || raw == nil {
			t.Fatalf("reading %s's connection: %v", user, err)
		}
		return string(raw)
	}
	if rec := stored("UALICE"); strings.Contains(rec, oldSecret) || strings.Contains(rec, "client_secret") {
		t.Errorf("the connection record holds the client secret: %s", rec)
	}
	whoami := func(i int, ctx context.Context, want string) {
		t.Helper()
		tools, err := r.mgrs[i].Tools(ctx, "T1")
		if err != nil {
			t.Fatal(err)
		}
		if out, err := toolByName(t, tools, "slack__whoami").Call(ctx, nil); err != nil || out != want {
			t.Fatalf("replica %d: whoami = %q, %v; want %q", i, out, err, want)
		}
	}
	whoami(0, alice, "alice")

	// A record as an earlier version stored it: with the secret.
	var legacy map[string]any
	if err := json.Unmarshal([]byte(stored("UALICE")), &legacy); err != nil {
		t.Fatal(err)
	}
	legacy["client_secret"] = oldSecret
	b, _ := json.Marshal(legacy)
	if err := r.stores[0].PutOAuthConnection(alice, "T1", "slack", "UALICE", b); err != nil {
		t.Fatal(err)
	}

	// The app's secret is rotated and the access token expires. A replica
	// not yet restarted fails the call, but keeps the connection (the
	// person's grant is fine): nobody is asked to reconnect.
	srv.SetClientSecret("1111.2222", newSecret)
	srv.ExpireAccessTokens()
	prompts := r.prompts.count()
	tools, err := r.mgrs[0].Tools(alice, "T1")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := toolByName(t, tools, "slack__whoami").Call(alice, nil); err == nil || !strings.Contains(err.Error(), "client credentials") {
		t.Errorf("replica with the old secret: whoami = %q, %v; want the client's credentials refused", out, err)
	}
	if rec := stored("UALICE"); strings.Contains(rec, "needs_reconnect") || !strings.Contains(rec, `"refresh_token":"xoxe-1-canary-`) {
		t.Errorf("a refresh refused for the client's credentials dropped the connection: %s", rec)
	}
	if n := r.prompts.count(); n != prompts {
		t.Errorf("%d Connect prompts after the refusal, want none", n-prompts)
	}
	// The restarted bot refreshes with the new secret.
	whoami(1, alice, "alice")
	reqs := srv.TokenRequests()
	last := reqs[len(reqs)-1]
	if last.Get("grant_type") != "refresh_token" || last.Get("client_secret") != newSecret {
		t.Errorf("last token request: grant %q with the %s secret; want a refresh with the new one",
			last.Get("grant_type"), map[bool]string{true: "new", false: "old (or no)"}[last.Get("client_secret") == newSecret])
	}
	if st := srv.Stats(); st.Refreshes != 1 {
		t.Errorf("%d refreshes, want 1", st.Refreshes)
	}
	if rec := stored("UALICE"); strings.Contains(rec, "client_secret") {
		t.Errorf("the refreshed record still holds a client secret: %s", rec)
	}

	// A pending authorization holds no secret either, and a new Connect on
	// the restarted bot redeems its code with the new secret.
	bob := reqCtx(t, "UBOB")
	peek, _, err := r.mgrs[1].StartConnect(bob, "T1", "slack", "UBOB")
	if err != nil {
		t.Fatal(err)
	}
	pu, _ := url.Parse(peek)
	_, st, err := r.stores[1].TakeOAuthState(bob, pu.Query().Get("state"))
	if err != nil || st == nil {
		t.Fatalf("reading the pending authorization: %v", err)
	}
	if strings.Contains(string(st), "canary-") || strings.Contains(string(st), "client_secret") {
		t.Errorf("the pending authorization holds the client secret: %s", st)
	}
	link, _, err = r.mgrs[1].StartConnect(bob, "T1", "slack", "UBOB")
	if err != nil {
		t.Fatal(err)
	}
	if page := r.connect(1, link, "bob"); page.Code != 200 {
		t.Fatalf("callback: %d %s", page.Code, page.Body)
	}
	if rec := stored("UBOB"); strings.Contains(rec, "client_secret") {
		t.Errorf("bob's connection record holds the client secret: %s", rec)
	}
	whoami(1, bob, "bob")
	r.noCanary()
}
