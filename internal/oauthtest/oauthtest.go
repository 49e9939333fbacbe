// Package oauthtest runs an OAuth-protected MCP server for tests: a small
// authorization server (RFC 8414 metadata, dynamic client registration,
// authorization code with PKCE S256, refresh-token rotation with reuse
// detection, revocation) and, on the same origin, a go-sdk MCP server
// behind go-sdk's bearer-token middleware with protected resource
// metadata. Tokens start with "canary-" so tests can check they never
// appear in logs, Redis or Slack in clear.
//
// The /authorize endpoint approves at once as the account named by the
// test_user query parameter (a test's stand-in for logging in) and
// redirects with code, state and iss.
//
// Options.Slack makes it behave like Slack's MCP server
// (mcp.slack.com, reference slack-agents-2026.md §7) instead: no dynamic
// client registration (no registration_endpoint, /register answers 404),
// one pre-registered confidential client (Options.ClientID and
// ClientSecret, client_secret_post only), PKCE S256, an explicit scope
// required at /oauth/v2_user/authorize, user tokens ("xoxp-canary-…")
// from /api/oauth.v2.user.access with Slack's {"ok":…} answers, and the
// discovery quirk: the path-aware
// /.well-known/oauth-protected-resource/mcp answers 302 (to an HTML
// page), while the bare-origin /.well-known/oauth-protected-resource and
// the resource_metadata of the 401's WWW-Authenticate header work.
// SetMCPEnabled(false) makes every MCP call answer Slack's -32600 "App is
// not enabled for Slack MCP server access" after a successful OAuth.
//
// It is imported only from tests (mcp, bot).
package oauthtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Options configure a Server. Zero values mean the defaults in brackets.
type Options struct {
	// AccessTTL is the access tokens' lifetime [1h].
	AccessTTL time.Duration
	// Scopes are the resource's scopes_supported [mcp:read].
	Scopes []string
	// NoRevocation leaves the revocation endpoint out of the metadata.
	NoRevocation bool
	// Tools adds tools to the MCP server besides whoami.
	Tools func(s *mcp.Server)

	// Slack behaves like Slack's MCP server (see the package doc).
	Slack bool
	// ClientID and ClientSecret are the pre-registered client with Slack
	// [client id "1111.2222", secret "canary-client-secret"];
	// RedirectURIs its Redirect URLs (empty: any).
	ClientID, ClientSecret string
	RedirectURIs           []string
}

// Server is a running authorization server plus protected MCP server.
type Server struct {
	// URL is the MCP endpoint; Issuer the authorization server.
	URL, Issuer string
	srv         *httptest.Server
	opts        Options

	mu       sync.Mutex
	clients  map[string]client
	codes    map[string]grant
	access   map[string]token
	refresh  map[string]refreshToken
	stats    Stats
	requests []url.Values
	// mcpOff: Slack's MCP toggle is off for the app.
	mcpOff bool
}

// Stats counts what the authorization server saw.
type Stats struct {
	Registrations, Authorizations, CodeExchanges, Refreshes, RefreshReuse, Revocations int
	// PathAwareDiscoveries counts requests to the path-aware protected
	// resource metadata URL (Slack mode answers them 302); AuthorizeRefusals
	// counts authorization requests refused (Slack mode: no scope, unknown
	// client, no PKCE).
	PathAwareDiscoveries, AuthorizeRefusals int
	// RefreshResources lists the resource parameter of each refresh.
	RefreshResources []string
}

type client struct {
	id, secret   string
	redirectURIs []string
}

type grant struct {
	client, redirect, challenge, resource, subject, scope string
	expires                                               time.Time
}

type token struct {
	subject, scope, resource string
	expires                  time.Time
	family                   string
}

type refreshToken struct {
	client, subject, scope, resource, family string
	used, revoked                            bool
}

// New starts a Server; it stops when the test ends.
func New(t interface {
	Cleanup(func())
	Helper()
}, opts Options) *Server {
	t.Helper()
	if opts.AccessTTL == 0 {
		opts.AccessTTL = time.Hour
	}
	if len(opts.Scopes) == 0 {
		opts.Scopes = []string{"mcp:read"}
	}
	s := &Server{opts: opts, clients: map[string]client{}, codes: map[string]grant{},
		access: map[string]token{}, refresh: map[string]refreshToken{}}
	mux := http.NewServeMux()
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	s.Issuer = s.srv.URL
	s.URL = s.srv.URL + "/mcp"

	if opts.Slack {
		s.slackRoutes(mux)
		s.mountMCP(t, mux, s.srv.URL+"/.well-known/oauth-protected-resource")
		return s
	}
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.metadata)
	mux.HandleFunc("POST /register", s.register)
	mux.HandleFunc("GET /authorize", s.authorize)
	mux.HandleFunc("POST /token", s.token)
	mux.HandleFunc("POST /revoke", s.revoke)
	prm := &oauthex.ProtectedResourceMetadata{Resource: s.URL, AuthorizationServers: []string{s.Issuer},
		ScopesSupported: opts.Scopes, BearerMethodsSupported: []string{"header"}}
	mux.Handle("GET /.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(prm))

	s.mountMCP(t, mux, s.srv.URL+"/.well-known/oauth-protected-resource/mcp")
	return s
}

// mountMCP serves the MCP server at /mcp behind the bearer check.
func (s *Server) mountMCP(t interface{ Cleanup(func()) }, mux *http.ServeMux, resourceMetadata string) {
	opts := s.opts
	ms := mcp.NewServer(&mcp.Implementation{Name: "oauthtest", Version: "0.0.1"}, nil)
	mcp.AddTool(ms, &mcp.Tool{Name: "whoami", Description: "Say whose token this is"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			ti := req.Extra.TokenInfo
			who := "nobody"
			if ti != nil {
				who = ti.UserID
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: who}}}, nil, nil
		})
	if opts.Tools != nil {
		opts.Tools(ms)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil)
	// Sessions whose client could not end them (its token was revoked, so
	// even its DELETE got a 401) end with the test.
	t.Cleanup(func() {
		for ss := range ms.Sessions() {
			_ = ss.Close()
		}
	})
	var inner http.Handler = h
	if opts.Slack {
		inner = s.slackGate(h)
	}
	mux.Handle("/mcp", auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: resourceMetadata})(inner))
}

func random(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, code int, e, desc string) {
	writeJSON(w, code, map[string]string{"error": e, "error_description": desc})
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	m := map[string]any{
		"issuer": s.Issuer, "authorization_endpoint": s.Issuer + "/authorize", "token_endpoint": s.Issuer + "/token",
		"registration_endpoint": s.Issuer + "/register", "response_types_supported": []string{"code"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"client_secret_post", "client_secret_basic", "none"},
		"scopes_supported":                               append(slices.Clone(s.opts.Scopes), "offline_access"),
		"authorization_response_iss_parameter_supported": true,
	}
	if !s.opts.NoRevocation {
		m["revocation_endpoint"] = s.Issuer + "/revoke"
	}
	writeJSON(w, 200, m)
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var meta oauthex.ClientRegistrationMetadata
	if err := json.NewDecoder(r.Body).Decode(&meta); err != nil || len(meta.RedirectURIs) == 0 {
		oauthError(w, 400, "invalid_client_metadata", "redirect_uris required")
		return
	}
	c := client{id: random("client-"), secret: random("canary-secret-"), redirectURIs: meta.RedirectURIs}
	s.mu.Lock()
	s.clients[c.id] = c
	s.stats.Registrations++
	s.mu.Unlock()
	writeJSON(w, 201, map[string]any{"client_id": c.id, "client_secret": c.secret, "redirect_uris": c.redirectURIs,
		"token_endpoint_auth_method": "client_secret_post", "grant_types": []string{"authorization_code", "refresh_token"}})
}

// authorize approves at once as test_user (default "user") and redirects.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	c, ok := s.clients[q.Get("client_id")]
	s.mu.Unlock()
	switch {
	case !ok:
		http.Error(w, "unknown client", 400)
		return
	case !slices.Contains(c.redirectURIs, q.Get("redirect_uri")):
		http.Error(w, "redirect_uri not registered", 400)
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "PKCE S256 required", 400)
		return
	case q.Get("resource") != s.URL:
		http.Error(w, "wrong resource", 400)
		return
	}
	subject := q.Get("test_user")
	if subject == "" {
		subject = "user"
	}
	code := random("code-")
	s.mu.Lock()
	s.codes[code] = grant{client: c.id, redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge"),
		resource: q.Get("resource"), subject: subject, scope: q.Get("scope"), expires: time.Now().Add(time.Minute)}
	s.stats.Authorizations++
	s.mu.Unlock()
	u, _ := url.Parse(q.Get("redirect_uri"))
	v := u.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	v.Set("iss", s.Issuer)
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func (s *Server) clientAuth(r *http.Request) (client, bool) {
	id, secret, basic := r.BasicAuth()
	if !basic {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	c, ok := s.clients[id]
	return c, ok && (c.secret == "" || c.secret == secret)
}

func (s *Server) issue(w http.ResponseWriter, clientID, subject, scope, resource, family string) {
	at := random("canary-at-")
	rt := random("canary-rt-")
	s.access[at] = token{subject: subject, scope: scope, resource: resource, expires: time.Now().Add(s.opts.AccessTTL), family: family}
	s.refresh[rt] = refreshToken{client: clientID, subject: subject, scope: scope, resource: resource, family: family}
	writeJSON(w, 200, map[string]any{"access_token": at, "token_type": "Bearer", "refresh_token": rt,
		"expires_in": int(s.opts.AccessTTL.Seconds()), "scope": scope})
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, 400, "invalid_request", "bad form")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.PostForm)
	c, ok := s.clientAuth(r)
	if !ok {
		oauthError(w, 401, "invalid_client", "client authentication failed")
		return
	}
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		g, ok := s.codes[r.PostForm.Get("code")]
		delete(s.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		switch {
		case !ok || time.Now().After(g.expires) || g.client != c.id:
			oauthError(w, 400, "invalid_grant", "unknown or used code")
			return
		case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
			oauthError(w, 400, "invalid_grant", "PKCE verification failed")
			return
		case r.PostForm.Get("redirect_uri") != g.redirect || r.PostForm.Get("resource") != g.resource:
			oauthError(w, 400, "invalid_grant", "redirect_uri or resource mismatch")
			return
		}
		s.stats.CodeExchanges++
		s.issue(w, c.id, g.subject, g.scope, g.resource, random("family-"))
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		old, ok := s.refresh[rt]
		if !ok || old.client != c.id || old.revoked {
			oauthError(w, 400, "invalid_grant", "unknown or revoked refresh token")
			return
		}
		if old.used {
			// Reuse of a rotated token: revoke the whole family.
			s.stats.RefreshReuse++
			s.revokeFamily(old.family)
			oauthError(w, 400, "invalid_grant", "refresh token reused")
			return
		}
		old.used = true
		s.refresh[rt] = old
		s.stats.Refreshes++
		s.stats.RefreshResources = append(s.stats.RefreshResources, r.PostForm.Get("resource"))
		s.issue(w, c.id, old.subject, old.scope, old.resource, old.family)
	default:
		oauthError(w, 400, "unsupported_grant_type", "")
	}
}

func (s *Server) revokeFamily(family string) {
	for k, v := range s.refresh {
		if v.family == family {
			v.revoked = true
			s.refresh[k] = v
		}
	}
	for k, v := range s.access {
		if v.family == family {
			delete(s.access, k)
		}
	}
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", 400)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clientAuth(r); !ok {
		oauthError(w, 401, "invalid_client", "")
		return
	}
	t := r.PostForm.Get("token")
	if rt, ok := s.refresh[t]; ok {
		s.revokeFamily(rt.family)
	}
	if at, ok := s.access[t]; ok {
		s.revokeFamily(at.family)
	}
	s.stats.Revocations++
	w.WriteHeader(200)
}

func (s *Server) verify(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.access[tok]
	if !ok || time.Now().After(t.expires) || t.resource != s.URL {
		return nil, fmt.Errorf("%w: unknown or expired token", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{UserID: t.subject, Scopes: strings.Fields(t.scope), Expiration: t.expires}, nil
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.RefreshResources = slices.Clone(st.RefreshResources)
	return st
}

// TokenRequests returns the form of every token endpoint request so far
// (client_id, client_secret when posted, grant_type, …), oldest first.
func (s *Server) TokenRequests() []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]url.Values, len(s.requests))
	for i, r := range s.requests {
		out[i] = url.Values(maps.Clone(r))
	}
	return out
}

// ExpireAccessTokens makes every issued access token expired (the
// resource server then answers 401).
func (s *Server) ExpireAccessTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.access {
		v.expires = time.Now().Add(-time.Second)
		s.access[k] = v
	}
}

// RevokeAll revokes every access and refresh token (the person revoked
// the app on the provider's side).
func (s *Server) RevokeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.refresh {
		v.revoked = true
		s.refresh[k] = v
	}
	s.access = map[string]token{}
}

// Authorize plays the person's browser: it opens the authorization URL as
// account user and returns the redirect's query (code, state, iss), for
// the bot's callback.
func Authorize(ctx context.Context, link, user string) (url.Values, error) {
	u, err := url.Parse(link)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("test_user", user)
	u.RawQuery = q.Encode()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return nil, fmt.Errorf("authorize: HTTP %d", resp.StatusCode)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return nil, err
	}
	return loc.Query(), nil
}
