package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// tokenRecord is one stored connection (sealed by the TokenStore).
// ClientSecret is kept for a client registered dynamically only: the
// operator's client (serverAuth.clientID) authenticates with the secret
// configured at the time of each request (see clientSecret), so a
// rotated secret works at the next refresh, and records written before
// that rule lose theirs at their next save.
type tokenRecord struct {
	V             int              `json:"v"`
	ServerURL     string           `json:"server_url"`
	Issuer        string           `json:"issuer"`
	ClientID      string           `json:"client_id"`
	ClientSecret  string           `json:"client_secret,omitempty"`
	AuthStyle     oauth2.AuthStyle `json:"auth_style"`
	AuthURL       string           `json:"auth_url"`
	TokenURL      string           `json:"token_url"`
	RevocationURL string           `json:"revocation_url,omitempty"`
	Resource      string           `json:"resource"`
	Scopes        []string         `json:"scopes,omitempty"`
	AccessToken   string           `json:"access_token"`
	TokenType     string           `json:"token_type,omitempty"`
	RefreshToken  string           `json:"refresh_token,omitempty"`
	Expiry        time.Time        `json:"expiry,omitzero"`
	// NeedsReconnect is set when a refresh failed for good.
	NeedsReconnect bool   `json:"needs_reconnect,omitempty"`
	Reason         string `json:"reason,omitempty"`
	// Gen orders versions of the record (set on every save), so a slow
	// read never replaces a newer cached token with an older one.
	// ListAs, only in the workspace slot of a user server from the config
	// file (no registering admin), names the person whose connection lists
	// its tools: the first who connected.
	ListAs      string    `json:"list_as,omitempty"`
	Gen         int64     `json:"gen"`
	ConnectedBy string    `json:"connected_by,omitempty"`
	ConnectedAt time.Time `json:"connected_at"`
	RefreshedAt time.Time `json:"refreshed_at,omitzero"`
}

// clientSecret is the secret rec's client authenticates with: the one
// configured now when rec's client is the operator's, else the one the
// authorization server gave at dynamic registration.
func (r *tokenRecord) clientSecret(sa serverAuth) string {
	if sa.clientID != "" && r.ClientID == sa.clientID {
		return sa.secret
	}
	return r.ClientSecret
}

// usable reports whether the access token may be sent (expiry unknown
// counts as usable until the server says otherwise).
func (r *tokenRecord) usable(now time.Time) bool {
	return r != nil && !r.NeedsReconnect && r.AccessToken != "" &&
		(r.Expiry.IsZero() || now.Add(30*time.Second).Before(r.Expiry))
}

// stateRecord is a pending authorization, bound to its state.
type stateRecord struct {
	V            int    `json:"v"`
	Team         string `json:"team"`
	User         string `json:"user"`
	Server       string `json:"server"`
	Principal    string `json:"principal"`
	Mode         string `json:"mode"`
	ServerURL    string `json:"server_url"`
	Checked      bool   `json:"checked"`
	Verifier     string `json:"verifier"`
	Issuer       string `json:"issuer"`
	IssSupported bool   `json:"iss_supported"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	// Configured: the client is the operator's (a preset, or client_id
	// of the config file). Its secret is not stored: the callback takes
	// the one configured then.
	Configured    bool             `json:"configured,omitempty"`
	AuthStyle     oauth2.AuthStyle `json:"auth_style"`
	AuthURL       string           `json:"auth_url"`
	TokenURL      string           `json:"token_url"`
	RevocationURL string           `json:"revocation_url,omitempty"`
	Resource      string           `json:"resource"`
	Scopes        []string         `json:"scopes,omitempty"`
	RedirectURL   string           `json:"redirect_url"`
	Created       time.Time        `json:"created"`
}

// clientRecord is a client we registered dynamically with one issuer.
type clientRecord struct {
	ClientID     string    `json:"client_id"`
	ClientSecret string    `json:"client_secret,omitempty"`
	AuthMethod   string    `json:"auth_method,omitempty"`
	RedirectURIs []string  `json:"redirect_uris"`
	Expires      time.Time `json:"expires,omitzero"`
}

// serverAuth is what the OAuth flow needs to know about a server.
type serverAuth struct {
	name, url, mode  string
	clientID, secret string
	clientIssuer     string
	scopes           []string
	checked          bool
	allowPrivate     bool
	resolve          Resolver
	registrar        string // registered servers: the admin who added it
}

// httpClient returns a client for OAuth requests about this server:
// SSRF-checked like the server itself, 1 MiB bodies, bounded time.
func (sa serverAuth) httpClient() (*http.Client, func()) {
	u, err := url.Parse(sa.url)
	if err != nil {
		u = &url.URL{}
	}
	env := newHTTPEnv(u, nil, sa.checked, sa.allowPrivate, sa.resolve, 1<<20)
	c := *env.client
	c.Timeout = 30 * time.Second
	return &c, env.close
}

// discovery is what the resource and its authorization server told us.
type discovery struct {
	prm             *oauthex.ProtectedResourceMetadata
	asm             *oauthex.AuthServerMeta
	challengeScopes []string
}

// challenge sends one unauthenticated JSON-RPC request to learn the
// server's WWW-Authenticate (resource_metadata, scope) when we have no 401
// at hand (a Connect started from Slack).
func challenge(ctx context.Context, hc *http.Client, mcpURL string) []string {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, mcpURL, bytes.NewReader(body))
	if err != nil {
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return nil
	}
	return resp.Header.Values("WWW-Authenticate")
}

// discover finds the protected resource metadata and the authorization
// server's metadata, with the spec's fallbacks: resource_metadata from the
// challenge, then the path-based and root well-known URLs (each PRM's
// resource must match the URL it was fetched for; the root one's may
// also be the MCP endpoint), then the 2025-03-26
// convention (the MCP origin is the authorization server); RFC 8414 and
// OIDC well-knowns (issuer checked by oauthex), else the 2025-03-26
// default endpoints.
func discover(ctx context.Context, hc *http.Client, mcpURL string, wwwAuth []string) (*discovery, error) {
	chs, _ := oauthex.ParseWWWAuthenticate(wwwAuth)
	d := &discovery{}
	var metaURL string
	for _, c := range chs {
		if c.Scheme != "bearer" {
			continue
		}
		if v := c.Params["resource_metadata"]; v != "" && metaURL == "" {
			metaURL = v
		}
		if v := c.Params["scope"]; v != "" && d.challengeScopes == nil {
			d.challengeScopes = strings.Fields(v)
		}
	}
	ru, err := url.Parse(mcpURL)
	if err != nil {
		return nil, fmt.Errorf("server URL: %w", err)
	}
	type candidate struct{ meta, resource string }
	var cands []candidate
	if metaURL != "" {
		cands = append(cands, candidate{metaURL, mcpURL})
	}
	pathBased := *ru
	pathBased.RawQuery, pathBased.Fragment = "", ""
	pathBased.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(ru.Path, "/")
	root := pathBased
	root.Path = "/.well-known/oauth-protected-resource"
	origin := *ru
	origin.Path, origin.RawPath, origin.RawQuery, origin.Fragment = "", "", "", ""
	// The bare-origin document may describe the MCP endpoint itself
	// rather than the origin (Slack's does, while its path-aware URL
	// answers 302): accept either there, so its scopes are not lost.
	cands = append(cands, candidate{pathBased.String(), mcpURL}, candidate{root.String(), origin.String()})
	if mcpURL != origin.String() {
		cands = append(cands, candidate{root.String(), mcpURL})
	}
	for _, c := range cands {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, c.meta, c.resource, hc)
		if err != nil || prm == nil {
			continue
		}
		if len(prm.AuthorizationServers) == 0 {
			return nil, errors.New("protected resource metadata lists no authorization server")
		}
		d.prm = prm
		break
	}
	if d.prm == nil {
		// 2025-03-26: no metadata; the MCP server's origin is the
		// authorization server.
		d.prm = &oauthex.ProtectedResourceMetadata{Resource: mcpURL, AuthorizationServers: []string{origin.String()}}
	}
	issuer := d.prm.AuthorizationServers[0]
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, hc)
	if err != nil {
		return nil, fmt.Errorf("authorization server metadata: %w", redactErr(err))
	}
	if asm == nil {
		base := strings.TrimRight(issuer, "/")
		asm = &oauthex.AuthServerMeta{Issuer: issuer, AuthorizationEndpoint: base + "/authorize",
			TokenEndpoint: base + "/token", RegistrationEndpoint: base + "/register"}
	}
	d.asm = asm
	return d, nil
}

// tokenAuthStyle picks how a client with a secret authenticates at the
// token endpoint: client_secret_post is preferred (OAuth 2.1), then basic.
func tokenAuthStyle(supported []string) oauth2.AuthStyle {
	switch {
	case slices.Contains(supported, "client_secret_post"):
		return oauth2.AuthStyleInParams
	case slices.Contains(supported, "client_secret_basic"):
		return oauth2.AuthStyleInHeader
	}
	return oauth2.AuthStyleAutoDetect
}

func styleForMethod(method string) oauth2.AuthStyle {
	switch method {
	case "client_secret_post", "none":
		return oauth2.AuthStyleInParams
	default: // RFC 7591's default is client_secret_basic
		return oauth2.AuthStyleInHeader
	}
}

// applicationType follows SEP-837: native for loopback redirects, web
// otherwise.
func applicationType(redirect string) string {
	u, err := url.Parse(redirect)
	if err == nil {
		h := u.Hostname()
		if h == "localhost" {
			return "native"
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
			return "native"
		}
	}
	return "web"
}

type resolvedClient struct {
	id, secret string
	style      oauth2.AuthStyle
	// configured: the operator's client (serverAuth.clientID), whose
	// secret is read from the configuration whenever it is needed and
	// never stored.
	configured bool
}

// registerClient picks the client in the spec's order: a pre-registered
// client from the operator's config, then a Client ID Metadata Document
// when the authorization server supports it, then dynamic registration —
// reusing the client this workspace registered with this issuer before
// (clients are keyed by issuer, so an authorization server that changes
// gets a new registration and never sees another's client id).
func (o *oauthCore) registerClient(ctx context.Context, hc *http.Client, team string, sa serverAuth, asm *oauthex.AuthServerMeta) (resolvedClient, error) {
	if sa.clientID != "" {
		if sa.clientIssuer != "" && strings.TrimSuffix(sa.clientIssuer, "/") != strings.TrimSuffix(asm.Issuer, "/") {
			return resolvedClient{}, fmt.Errorf("the configured client_id belongs to %s, but the server now uses the authorization server %s: update client_id and client_issuer",
				sa.clientIssuer, asm.Issuer)
		}
		style := tokenAuthStyle(asm.TokenEndpointAuthMethodsSupported)
		if sa.secret == "" {
			style = oauth2.AuthStyleInParams
		}
		return resolvedClient{sa.clientID, sa.secret, style, true}, nil
	}
	if cimd := o.opts.MetadataURL(); cimd != "" && asm.ClientIDMetadataDocumentSupported {
		return resolvedClient{id: cimd, style: oauth2.AuthStyleInParams}, nil
	}
	if asm.RegistrationEndpoint == "" {
		return resolvedClient{}, errors.New("the authorization server supports neither Client ID Metadata Documents nor dynamic registration: configure client_id (and client_secret) for this server")
	}
	redirect := o.opts.RedirectURL()
	if raw, err := o.opts.Tokens.OAuthClient(ctx, team, asm.Issuer); err != nil {
		return resolvedClient{}, fmt.Errorf("reading the registered client: %w", err)
	} else if raw != nil {
		var c clientRecord
		if json.Unmarshal(raw, &c) == nil && c.ClientID != "" && slices.Contains(c.RedirectURIs, redirect) &&
			(c.Expires.IsZero() || time.Now().Before(c.Expires)) {
			return resolvedClient{id: c.ClientID, secret: c.ClientSecret, style: styleForMethod(c.AuthMethod)}, nil
		}
	}
	meta := &oauthex.ClientRegistrationMetadata{
		RedirectURIs:    []string{redirect},
		GrantTypes:      []string{"authorization_code", "refresh_token"},
		ResponseTypes:   []string{"code"},
		ClientName:      o.clientName(),
		ApplicationType: applicationType(redirect),
	}
	resp, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, meta, hc)
	if err != nil {
		return resolvedClient{}, fmt.Errorf("dynamic client registration: %w", redactErr(err))
	}
	c := clientRecord{ClientID: resp.ClientID, ClientSecret: resp.ClientSecret, AuthMethod: resp.TokenEndpointAuthMethod,
		RedirectURIs: []string{redirect}, Expires: resp.ClientSecretExpiresAt}
	if c.Expires.Unix() <= 0 {
		c.Expires = time.Time{}
	}
	b, _ := json.Marshal(c)
	if err := o.opts.Tokens.PutOAuthClient(ctx, team, asm.Issuer, b); err != nil {
		return resolvedClient{}, fmt.Errorf("storing the registered client: %w", err)
	}
	o.log.Info("mcp oauth client registered", "team", team, "server", sa.name, "issuer", asm.Issuer)
	return resolvedClient{id: c.ClientID, secret: c.ClientSecret, style: styleForMethod(c.AuthMethod)}, nil
}

// scopesFor picks what to ask for: the challenge's scope (authoritative
// for this operation), else the operator's configured scopes, else the
// resource's scopes_supported; offline_access when the authorization
// server offers it (we store refresh tokens); unioned with what was
// requested before from the same issuer, so a step-up keeps earlier grants
// (SEP-2350).
func scopesFor(d *discovery, sa serverAuth, previous []string) []string {
	s := d.challengeScopes
	if len(s) == 0 {
		s = sa.scopes
	}
	if len(s) == 0 {
		s = d.prm.ScopesSupported
	}
	out := slices.Clone(previous)
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	if slices.Contains(d.asm.ScopesSupported, "offline_access") && !slices.Contains(out, "offline_access") {
		out = append(out, "offline_access")
	}
	return out
}

// startConnect begins an authorization for key on behalf of requester
// and returns the authorization URL (the Connect link).
func (o *oauthCore) startConnect(ctx context.Context, key connKey, sa serverAuth, requester string, wwwAuth []string) (string, time.Time, error) {
	if err := o.ready(); err != nil {
		return "", time.Time{}, err
	}
	hc, done := sa.httpClient()
	defer done()
	if len(wwwAuth) == 0 {
		wwwAuth = challenge(ctx, hc, sa.url)
	}
	d, err := discover(ctx, hc, sa.url, wwwAuth)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%s: OAuth discovery: %w", sa.name, err)
	}
	client, err := o.registerClient(ctx, hc, key.team, sa, d.asm)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%s: %w", sa.name, err)
	}
	var previous []string
	if rec, _ := o.load(ctx, key); rec != nil && rec.Issuer == d.asm.Issuer {
		previous = rec.Scopes
	}
	scopes := scopesFor(d, sa, previous)
	secret := client.secret
	if client.configured {
		secret = "" // the operator's: read again at the callback
	}
	st := stateRecord{V: 1, Team: key.team, User: requester, Server: key.server, Principal: key.principal, Mode: sa.mode,
		ServerURL: sa.url, Checked: sa.checked, Verifier: oauth2.GenerateVerifier(), Issuer: d.asm.Issuer,
		IssSupported: d.asm.AuthorizationResponseIssParameterSupported, ClientID: client.id, ClientSecret: secret,
		Configured: client.configured, AuthStyle: client.style, AuthURL: d.asm.AuthorizationEndpoint, TokenURL: d.asm.TokenEndpoint,
		RevocationURL: d.asm.RevocationEndpoint, Resource: d.prm.Resource, Scopes: scopes,
		RedirectURL: o.opts.RedirectURL(), Created: time.Now().UTC()}
	state := rand.Text()
	b, _ := json.Marshal(st)
	ttl := o.opts.StateTTL
	if err := o.opts.States.PutOAuthState(ctx, state, key.team, b, ttl); err != nil {
		return "", time.Time{}, fmt.Errorf("%s: storing the authorization state: %w", sa.name, err)
	}
	cfg := st.oauthConfig()
	link := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(st.Verifier), oauth2.SetAuthURLParam("resource", st.Resource))
	return link, st.Created.Add(ttl), nil
}

func (st *stateRecord) oauthConfig() *oauth2.Config {
	return &oauth2.Config{ClientID: st.ClientID, ClientSecret: st.ClientSecret, RedirectURL: st.RedirectURL, Scopes: st.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: st.AuthURL, TokenURL: st.TokenURL, AuthStyle: st.AuthStyle}}
}

// checkIss applies RFC 9207 as the 2026-07-28 table says: advertised ⇒
// iss required and equal; not advertised ⇒ compared when present (go-sdk's
// AcceptUnadvertisedIss semantics), proceed when absent. Plain string
// comparison, no normalisation.
func checkIss(iss, issuer string, advertised bool) error {
	switch {
	case iss == "" && advertised:
		return errors.New("the authorization server advertises the iss parameter but the response has none")
	case iss == "":
		return nil
	case iss != issuer:
		return errors.New("the authorization response comes from another issuer than the one we asked")
	}
	return nil
}

// CallbackResult says whose connection a callback completed.
type CallbackResult struct {
	Team, User, Server, Mode string
}

// CallbackError is a refusal the callback page may show as it is (no
// secrets in it); Result names the connection when the state was valid.
type CallbackError struct {
	Result CallbackResult
	Msg    string
}

func (e *CallbackError) Error() string { return e.Msg }

// CompleteCallback finishes an authorization on whichever replica the
// browser reached: it takes the state's binding (once), checks iss, redeems
// the code with the PKCE verifier and resource, stores the sealed token and
// wakes the waiting turn. errCode/errDesc are the redirect's error and
// error_description, if any. Every failure is an error whose text is safe
// to show; an unknown, used, expired or foreign state is ErrBadState.
func (m *Manager) CompleteCallback(ctx context.Context, state, code, iss, errCode, errDesc string) (CallbackResult, error) {
	o := m.oauth
	if err := o.ready(); err != nil {
		return CallbackResult{}, err
	}
	if state == "" {
		return CallbackResult{}, ErrBadState
	}
	team, raw, err := o.opts.States.TakeOAuthState(ctx, state)
	if err != nil {
		return CallbackResult{}, fmt.Errorf("mcp: reading the authorization state: %w", err)
	}
	var st stateRecord
	if raw == nil || json.Unmarshal(raw, &st) != nil || st.Team != team || time.Since(st.Created) > o.opts.StateTTL {
		return CallbackResult{}, ErrBadState
	}
	res := CallbackResult{Team: st.Team, User: st.User, Server: st.Server, Mode: st.Mode}
	key := connKey{st.Team, st.Server, st.Principal}
	fail := func(msg string) (CallbackResult, error) {
		o.notify(ctx, key, "failed: "+msg)
		o.audit(ctx, AuditEvent{Team: st.Team, Server: st.Server, User: st.User, Principal: st.Principal, Action: "oauth_connect_failed", Detail: msg})
		return res, &CallbackError{Result: res, Msg: msg}
	}
	// A mismatched iss means the response may not come from our
	// authorization server: ignore everything in it, error included.
	if err := checkIss(iss, st.Issuer, st.IssSupported); err != nil {
		return fail(err.Error())
	}
	if errCode != "" {
		msg := "the authorization server refused: " + errCode
		if errDesc != "" {
			msg += " (" + errDesc + ")"
		}
		return fail(msg)
	}
	if code == "" {
		return fail("the authorization response has no code")
	}
	if st.Configured {
		// The operator's client: its secret as configured now (it may
		// have been rotated since the link was made).
		secret, err := m.configuredSecret(ctx, st.Team, st.Server, st.ClientID)
		if err != nil {
			return fail(err.Error())
		}
		st.ClientSecret = secret
	}
	sa := serverAuth{name: st.Server, url: st.ServerURL, checked: st.Checked, allowPrivate: m.opts.AllowPrivateNetworks, resolve: m.opts.Resolver}
	hc, done := sa.httpClient()
	defer done()
	xctx := context.WithValue(ctx, oauth2.HTTPClient, hc)
	tok, err := st.oauthConfig().Exchange(xctx, code, oauth2.VerifierOption(st.Verifier), oauth2.SetAuthURLParam("resource", st.Resource))
	if err != nil {
		return fail("the token exchange failed: " + tokenErrText(err))
	}
	granted := st.Scopes
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		granted = strings.Fields(s)
	}
	keptSecret := st.ClientSecret
	if st.Configured {
		keptSecret = "" // refreshes read the configured one
	}
	rec := &tokenRecord{V: 1, ServerURL: st.ServerURL, Issuer: st.Issuer, ClientID: st.ClientID, ClientSecret: keptSecret,
		AuthStyle: st.AuthStyle, AuthURL: st.AuthURL, TokenURL: st.TokenURL, RevocationURL: st.RevocationURL,
		Resource: st.Resource, Scopes: granted, AccessToken: tok.AccessToken, TokenType: tok.TokenType,
		RefreshToken: tok.RefreshToken, Expiry: tok.Expiry, ConnectedBy: st.User, ConnectedAt: time.Now().UTC()}
	if err := o.save(ctx, key, rec); err != nil {
		return fail("storing the connection failed")
	}
	if st.Mode == AuthUser && st.Principal != "" {
		lk := connKey{st.Team, st.Server, ""}
		if cur, err := o.load(ctx, lk); err == nil && (cur == nil || cur.ListAs == "") {
			if err := o.save(ctx, lk, &tokenRecord{V: 1, ListAs: st.Principal, ConnectedAt: time.Now().UTC()}); err != nil {
				m.log.Warn("mcp oauth: recording who lists the tools", "team", st.Team, "server", st.Server, "err", err)
			}
		}
	}
	m.connected(key)
	o.notify(ctx, key, outcomeConnected)
	o.audit(ctx, AuditEvent{Team: st.Team, Server: st.Server, User: st.User, Principal: st.Principal, Action: "oauth_connect"})
	m.log.Info("mcp oauth connected", "team", st.Team, "server", st.Server, "user", st.User, "mode", st.Mode)
	return res, nil
}

const outcomeConnected = "connected"

// configuredSecret is the secret of the operator's client clientID for a
// server, as configured now (a preset, or client_secret of the config
// file). The server must still use that client.
func (m *Manager) configuredSecret(ctx context.Context, team, server, clientID string) (string, error) {
	_, mt, err := m.findMount(ctx, team, server)
	if err != nil {
		return "", errors.New("the server is no longer registered")
	}
	sa, err := mt.serverAuth()
	if err != nil {
		return "", err
	}
	if sa.clientID != clientID {
		return "", errors.New("the server's OAuth client changed since the Connect link was made: use Connect again")
	}
	return sa.secret, nil
}

// tokenErrText describes a token endpoint failure without echoing the
// response body (it may hold anything).
func tokenErrText(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			return re.ErrorCode
		}
		if re.Response != nil {
			return fmt.Sprintf("HTTP %d", re.Response.StatusCode)
		}
	}
	return redactURLs(err.Error())
}
