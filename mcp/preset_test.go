package mcp

import (
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
