package oauthtest

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Slack's MCP server, as the reference describes it (Options.Slack).

// slackMCPDisabled is Slack's answer to every MCP call when the app's
// MCP toggle is off.
const slackMCPDisabled = "App is not enabled for Slack MCP server access. Please enable it here: https://api.slack.com/apps/A111/app-assistant"

func (s *Server) slackRoutes(mux *http.ServeMux) {
	s.opts.ClientID = cmp.Or(s.opts.ClientID, "1111.2222")
	s.opts.ClientSecret = cmp.Or(s.opts.ClientSecret, "canary-client-secret")
	s.clients[s.opts.ClientID] = client{id: s.opts.ClientID, secret: s.opts.ClientSecret, redirectURIs: s.opts.RedirectURIs}
	if len(s.opts.Scopes) == 1 && s.opts.Scopes[0] == "mcp:read" {
		s.opts.Scopes = []string{"search:read.public", "search:read.private", "channels:history", "groups:history", "users:read", "chat:write"}
	}

	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, map[string]any{
			"issuer": s.Issuer, "authorization_endpoint": s.Issuer + "/oauth/v2_user/authorize",
			"token_endpoint": s.Issuer + "/api/oauth.v2.user.access", "response_types_supported": []string{"code"},
			"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_post"},
			"scopes_supported":                      s.opts.Scopes,
		})
	})
	// The path-aware discovery URL answers 302 (clients that only fall
	// back on 4xx trip over it); the bare-origin one works.
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.stats.PathAwareDiscoveries++
		s.mu.Unlock()
		http.Redirect(w, r, s.Issuer+"/docs/mcp", http.StatusFound)
	})
	mux.HandleFunc("GET /docs/mcp", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!doctype html><title>Slack MCP server</title><p>Documentation</p>")
	})
	prm := &oauthex.ProtectedResourceMetadata{Resource: s.URL, AuthorizationServers: []string{s.Issuer},
		ScopesSupported: s.opts.Scopes, BearerMethodsSupported: []string{"header"}}
	mux.Handle("GET /.well-known/oauth-protected-resource", auth.ProtectedResourceMetadataHandler(prm))
	mux.HandleFunc("GET /oauth/v2_user/authorize", s.slackAuthorize)
	mux.HandleFunc("POST /api/oauth.v2.user.access", s.slackToken)
}

// SetClientSecret replaces the secret of a pre-registered client (an
// app's secret rotated): token requests with the old one are refused
// from now on.
func (s *Server) SetClientSecret(id, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[id]
	c.id, c.secret = id, secret
	s.clients[id] = c
}

// SetMCPEnabled turns Slack's MCP toggle for the app on or off (Slack
// mode; on by default).
func (s *Server) SetMCPEnabled(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mcpOff = !on
}

// slackGate answers every MCP call with Slack's -32600 while the toggle
// is off.
func (s *Server) slackGate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		off := s.mcpOff
		s.mu.Unlock()
		if !off || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &req)
		id := req.ID
		if len(bytes.TrimSpace(id)) == 0 {
			id = json.RawMessage("null")
		}
		writeJSON(w, 200, map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32600, "message": slackMCPDisabled}})
	})
}

// slackAuthorize is /oauth/v2_user/authorize: the pre-registered client,
// a registered redirect, an explicit scope and PKCE S256; it approves at
// once as test_user.
func (s *Server) slackAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	c, ok := s.clients[q.Get("client_id")]
	s.mu.Unlock()
	refuse := func(msg string) {
		s.mu.Lock()
		s.stats.AuthorizeRefusals++
		s.mu.Unlock()
		http.Error(w, msg, http.StatusBadRequest)
	}
	switch {
	case !ok:
		refuse("invalid_client_id")
		return
	case len(c.redirectURIs) > 0 && !slices.Contains(c.redirectURIs, q.Get("redirect_uri")):
		refuse("bad_redirect_uri")
		return
	case strings.TrimSpace(q.Get("scope")) == "":
		refuse("invalid_scope: no scopes requested")
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		refuse("PKCE S256 required")
		return
	}
	for _, sc := range strings.FieldsFunc(q.Get("scope"), func(r rune) bool { return r == ',' || r == ' ' }) {
		if !slices.Contains(s.opts.Scopes, sc) {
			refuse("invalid_scope: " + sc)
			return
		}
	}
	subject := cmp.Or(q.Get("test_user"), "user")
	code := random("code-")
	s.mu.Lock()
	s.codes[code] = grant{client: c.id, redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge"),
		resource: s.URL, subject: subject, scope: q.Get("scope"), expires: time.Now().Add(10 * time.Minute)}
	s.stats.Authorizations++
	s.mu.Unlock()
	u, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		refuse("bad_redirect_uri")
		return
	}
	v := u.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// slackError is Slack's Web API error: HTTP 200 {"ok":false,"error":…}.
func slackError(w http.ResponseWriter, code string) {
	writeJSON(w, 200, map[string]any{"ok": false, "error": code})
}

// slackToken is /api/oauth.v2.user.access: client_secret_post only,
// code (with PKCE) and refresh grants, user tokens.
func (s *Server) slackToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		slackError(w, "invalid_form_data")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.PostForm)
	if _, _, basic := r.BasicAuth(); basic {
		slackError(w, "invalid_client_id") // client_secret_post only
		return
	}
	c, ok := s.clients[r.PostForm.Get("client_id")]
	if !ok || c.secret != r.PostForm.Get("client_secret") {
		slackError(w, "invalid_client_id")
		return
	}
	switch r.PostForm.Get("grant_type") {
	case "authorization_code", "":
		g, ok := s.codes[r.PostForm.Get("code")]
		delete(s.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		switch {
		case !ok || time.Now().After(g.expires) || g.client != c.id:
			slackError(w, "invalid_code")
			return
		case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
			slackError(w, "invalid_code_verifier")
			return
		case r.PostForm.Get("redirect_uri") != g.redirect:
			slackError(w, "bad_redirect_uri")
			return
		}
		s.stats.CodeExchanges++
		s.slackIssue(w, c.id, g.subject, g.scope, random("family-"))
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		old, ok := s.refresh[rt]
		if !ok || old.client != c.id || old.revoked || old.used {
			slackError(w, "invalid_refresh_token")
			return
		}
		old.used = true
		s.refresh[rt] = old
		s.stats.Refreshes++
		s.slackIssue(w, c.id, old.subject, old.scope, old.family)
	default:
		slackError(w, "unsupported_grant_type")
	}
}

func (s *Server) slackIssue(w http.ResponseWriter, clientID, subject, scope, family string) {
	at := random("xoxp-canary-")
	rt := random("xoxe-1-canary-")
	s.access[at] = token{subject: subject, scope: scope, resource: s.URL, expires: time.Now().Add(s.opts.AccessTTL), family: family}
	s.refresh[rt] = refreshToken{client: clientID, subject: subject, scope: scope, resource: s.URL, family: family}
	writeJSON(w, 200, map[string]any{
		"ok": true, "access_token": at, "token_type": "Bearer", "scope": scope, "refresh_token": rt,
		"expires_in": int(s.opts.AccessTTL.Seconds()), "authed_user": map[string]any{"id": subject},
		"team": map[string]any{"id": "T111"},
	})
}
