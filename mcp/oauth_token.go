package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/bobbinbot/bobbin/agent/servers"
)

// oauthCore is the Manager's OAuth machinery: the stores, an in-memory
// cache of tokens, per-connection locks and prompt flights.
type oauthCore struct {
	opts OAuthOptions
	log  *slog.Logger

	mu      sync.Mutex
	cache   map[connKey]*tokenRecord
	locks   map[connKey]*sync.Mutex
	flights map[connKey]*flight
}

// flight is one Connect prompt in progress; concurrent calls needing the
// same connection wait for it instead of prompting again.
type flight struct {
	done chan struct{}
	err  error
}

func newOAuthCore(opts OAuthOptions, log *slog.Logger) *oauthCore {
	opts.ConnectTimeout = cmp.Or(opts.ConnectTimeout, 10*time.Minute)
	opts.StateTTL = min(cmp.Or(opts.StateTTL, 10*time.Minute), 10*time.Minute)
	opts.MaxStepUps = cmp.Or(opts.MaxStepUps, 3)
	return &oauthCore{opts: opts, log: log, cache: map[connKey]*tokenRecord{},
		locks: map[connKey]*sync.Mutex{}, flights: map[connKey]*flight{}}
}

func (o *oauthCore) clientName() string { return cmp.Or(o.opts.ClientName, "Bobbin") }

// ready reports whether OAuth can run at all.
func (o *oauthCore) ready() error {
	if o.opts.PublicURL == "" {
		return servers.ErrOAuthUnavailable
	}
	if o.opts.Tokens == nil || o.opts.States == nil {
		return errors.New("mcp: OAuth storage is not configured")
	}
	return nil
}

func (o *oauthCore) audit(ctx context.Context, e AuditEvent) {
	if o.opts.Audit != nil {
		o.opts.Audit(context.WithoutCancel(ctx), e)
	}
}

func (o *oauthCore) notify(ctx context.Context, key connKey, outcome string) {
	if o.opts.Waker == nil {
		return
	}
	if err := o.opts.Waker.NotifyOAuth(context.WithoutCancel(ctx), key.team, key.server, key.principal, outcome); err != nil {
		o.log.Warn("mcp oauth: waking waiters", "team", key.team, "server", key.server, "err", err)
	}
}

// load returns the stored connection of key (nil when none), refreshing
// the cache.
func (o *oauthCore) load(ctx context.Context, key connKey) (*tokenRecord, error) {
	if o.opts.Tokens == nil {
		return nil, nil
	}
	raw, err := o.opts.Tokens.OAuthConnection(ctx, key.team, key.server, key.principal)
	if err != nil {
		return nil, fmt.Errorf("reading the connection: %w", err)
	}
	var rec *tokenRecord
	if raw != nil {
		rec = &tokenRecord{}
		if err := json.Unmarshal(raw, rec); err != nil {
			return nil, fmt.Errorf("corrupt connection record of %s", key.server)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch cur := o.cache[key]; {
	case rec == nil:
		delete(o.cache, key)
	case cur != nil && cur.Gen > rec.Gen:
		return cur, nil // read before a newer save: keep the newer one
	default:
		o.cache[key] = rec
	}
	return rec, nil
}

func (o *oauthCore) cached(key connKey) *tokenRecord {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cache[key]
}

func (o *oauthCore) save(ctx context.Context, key connKey, rec *tokenRecord) error {
	rec.Gen = max(time.Now().UnixNano(), rec.Gen+1)
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := o.opts.Tokens.PutOAuthConnection(ctx, key.team, key.server, key.principal, b); err != nil {
		return err
	}
	o.mu.Lock()
	o.cache[key] = rec
	o.mu.Unlock()
	return nil
}

func (o *oauthCore) forget(key connKey) {
	o.mu.Lock()
	delete(o.cache, key)
	o.mu.Unlock()
}

// forgetTeam drops the cached tokens of team's connections: the next call
// reads the stored ones (another replica connected, renewed or dropped
// them).
func (o *oauthCore) forgetTeam(team string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range o.cache {
		if k.team == team {
			delete(o.cache, k)
		}
	}
}

func (o *oauthCore) localLock(key connKey) *sync.Mutex {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		o.locks[key] = l
	}
	return l
}

// errNeedsReconnect marks a refresh that failed for good.
var errNeedsReconnect = errors.New("the connection expired and must be renewed with Connect")

// refresh renews key's token unless another caller (on any replica)
// already did: under the local and the shared lock it re-reads the
// record, and refreshes only if the access token is still the stale one
// (or force and still the one the server refused). A refresh refused by
// the authorization server marks the connection as needing a new Connect.
func (o *oauthCore) refresh(ctx context.Context, key connKey, sa serverAuth, stale string) (*tokenRecord, error) {
	l := o.localLock(key)
	l.Lock()
	defer l.Unlock()
	if o.opts.Locker != nil {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		unlock, err := o.opts.Locker.LockOAuth(lctx, key.team, key.server, key.principal, 30*time.Second)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("refresh lock: %w", err)
		}
		defer unlock()
	}
	rec, err := o.load(ctx, key)
	if err != nil || rec == nil {
		return nil, cmp.Or(err, error(servers.ErrNotConnected))
	}
	if rec.NeedsReconnect {
		return nil, errNeedsReconnect
	}
	if rec.AccessToken != stale && rec.usable(time.Now()) {
		return rec, nil // someone else refreshed
	}
	if rec.RefreshToken == "" {
		return nil, servers.ErrNotConnected
	}
	// Records are shared through the cache: change a copy.
	cp := *rec
	rec = &cp
	hc, done := sa.httpClient()
	defer done()
	hc.Transport = &resourceOnRefresh{next: hc.Transport, tokenURL: rec.TokenURL, resource: rec.Resource}
	cfg := &oauth2.Config{ClientID: rec.ClientID, ClientSecret: rec.clientSecret(sa), Scopes: rec.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: rec.AuthURL, TokenURL: rec.TokenURL, AuthStyle: rec.AuthStyle}}
	if sa.clientID != "" && rec.ClientID == sa.clientID {
		rec.ClientSecret = "" // an earlier version's copy: never stored again
	}
	rctx := context.WithValue(ctx, oauth2.HTTPClient, hc)
	tok, err := cfg.TokenSource(rctx, &oauth2.Token{RefreshToken: rec.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) || (re.Response != nil && re.Response.StatusCode >= 500) {
			return nil, fmt.Errorf("token refresh: %s", tokenErrText(err)) // transient: keep the connection
		}
		if clientRefusal(re.ErrorCode) {
			// The bot's own client credentials were refused (a secret
			// rotated at the authorization server, and this replica not
			// yet configured with the new one): the person's grant is
			// fine, and a new Connect would fail the same way.
			o.log.Warn("mcp oauth: the authorization server refused the client's credentials; check the configured client secret",
				"team", key.team, "server", key.server, "error", re.ErrorCode)
			return nil, &clientRefusedError{server: sa.name, code: re.ErrorCode}
		}
		rec.NeedsReconnect, rec.Reason = true, "refresh refused: "+tokenErrText(err)
		rec.AccessToken, rec.RefreshToken = "", ""
		if err := o.save(ctx, key, rec); err != nil {
			o.log.Warn("mcp oauth: marking a connection for reconnect", "team", key.team, "server", key.server, "err", err)
		}
		o.audit(ctx, AuditEvent{Team: key.team, Server: key.server, User: key.principal, Principal: key.principal,
			Action: "oauth_refresh_failed", Detail: rec.Reason})
		o.log.Warn("mcp oauth refresh refused; the connection needs a new Connect", "team", key.team,
			"server", key.server, "principal", key.principal, "reason", rec.Reason)
		return nil, errNeedsReconnect
	}
	rec.AccessToken, rec.TokenType, rec.Expiry = tok.AccessToken, tok.TokenType, tok.Expiry
	if tok.RefreshToken != "" {
		rec.RefreshToken = tok.RefreshToken // rotated
	}
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		rec.Scopes = strings.Fields(s)
	}
	rec.RefreshedAt = time.Now().UTC()
	if err := o.save(ctx, key, rec); err != nil {
		// The old refresh token may be spent already; keep using the new
		// access token in memory and say so.
		o.log.Warn("mcp oauth: storing a refreshed token failed", "team", key.team, "server", key.server, "err", err)
	}
	return rec, nil
}

// clientRefusal reports whether a token endpoint's error code means the
// client's credentials were refused (RFC 6749 §5.2; Slack's own codes),
// not the person's grant.
func clientRefusal(code string) bool {
	switch code {
	case "invalid_client", "unauthorized_client", "invalid_client_id", "bad_client_secret":
		return true
	}
	return false
}

// clientRefusedError is a refresh refused for the bot's client
// credentials: the connection is kept, and nobody is asked to reconnect.
type clientRefusedError struct{ server, code string }

func (e *clientRefusedError) Error() string {
	return fmt.Sprintf("%s refused the bot's OAuth client credentials (%s): the client secret in the bot's configuration is probably out of date (an operator must update it); the connection is kept",
		e.server, e.code)
}

// markRefused records that the server refused token even after a refresh
// attempt, so status shows "reconnect needed" and the next call prompts.
func (o *oauthCore) markRefused(ctx context.Context, key connKey, token string) {
	l := o.localLock(key)
	l.Lock()
	defer l.Unlock()
	rec, err := o.load(ctx, key)
	if err != nil || rec == nil || rec.AccessToken != token || rec.NeedsReconnect {
		return
	}
	cp := *rec
	rec = &cp
	rec.NeedsReconnect, rec.Reason = true, "the server refused the token"
	if err := o.save(ctx, key, rec); err != nil {
		o.log.Warn("mcp oauth: marking a connection for reconnect", "team", key.team, "server", key.server, "err", err)
	}
}

// resourceOnRefresh adds the RFC 8707 resource parameter to refresh-token
// requests: golang.org/x/oauth2 sends only grant_type and refresh_token,
// while the MCP authorization spec wants resource on every token request.
type resourceOnRefresh struct {
	next               http.RoundTripper
	tokenURL, resource string
}

func (t *resourceOnRefresh) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.resource == "" || req.Method != http.MethodPost || req.Body == nil || req.URL.String() != t.tokenURL {
		return t.next.RoundTrip(req)
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<10))
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	if v, err := url.ParseQuery(string(body)); err == nil && v.Get("grant_type") == "refresh_token" && !v.Has("resource") {
		v.Set("resource", t.resource)
		body = []byte(v.Encode())
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return t.next.RoundTrip(r)
}

// token returns a usable access token for key: the cached one, else the
// stored one (another replica may have refreshed), else a refresh.
func (o *oauthCore) token(ctx context.Context, key connKey, sa serverAuth) (*tokenRecord, error) {
	now := time.Now()
	if rec := o.cached(key); rec.usable(now) {
		return rec, nil
	}
	rec, err := o.load(ctx, key)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, servers.ErrNotConnected
	}
	if rec.usable(now) {
		return rec, nil
	}
	if rec.NeedsReconnect {
		return nil, errNeedsReconnect
	}
	return o.refresh(ctx, key, sa, rec.AccessToken)
}

// oauthHandler is the auth.OAuthHandler of one connection (one server,
// one principal). It never waits for a person: a 401 it cannot fix by a
// refresh, and a 403 insufficient_scope, become a NeedsConnectError that
// the call layer turns into a Connect prompt.
type oauthHandler struct {
	o   *oauthCore
	key connKey
	sa  serverAuth

	mu sync.Mutex
	// fresh holds access tokens obtained by refreshing after a 401: one of
	// them refused again is not refreshed again.
	fresh   map[string]bool
	stepUps int
}

var _ auth.OAuthHandler = (*oauthHandler)(nil)

func (h *oauthHandler) TokenSource(context.Context) (oauth2.TokenSource, error) { return h, nil }

// Token implements oauth2.TokenSource. With no usable token it returns
// none, so the request goes out without Authorization and the server's
// 401 reaches Authorize.
func (h *oauthHandler) Token() (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec, err := h.o.token(ctx, h.key, h.sa)
	if err != nil {
		if errors.Is(err, servers.ErrNotConnected) || errors.Is(err, errNeedsReconnect) {
			return nil, nil
		}
		return nil, err
	}
	return &oauth2.Token{AccessToken: rec.AccessToken, TokenType: "Bearer", Expiry: rec.Expiry}, nil
}

// Authorize handles a 401 or 403 from the server.
func (h *oauthHandler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	wwwAuth := resp.Header.Values("WWW-Authenticate")
	chs, _ := oauthex.ParseWWWAuthenticate(wwwAuth)
	bearerErr := ""
	for _, c := range chs {
		if c.Scheme == "bearer" && c.Params["error"] != "" {
			bearerErr = c.Params["error"]
			break
		}
	}
	if resp.StatusCode == http.StatusForbidden {
		if bearerErr != "insufficient_scope" {
			return nil // not ours to fix: the retry fails normally
		}
		h.mu.Lock()
		h.stepUps++
		n := h.stepUps
		h.mu.Unlock()
		if n > h.o.opts.MaxStepUps {
			return fmt.Errorf("%s still refuses after %d re-authorizations for more scope", h.sa.name, n-1)
		}
		return &NeedsConnectError{Server: h.sa.name, Reason: "more permissions needed", Challenge: wwwAuth, StepUp: true}
	}
	sent := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
	if sent != "" {
		// A token we thought valid was refused. If another call (on any
		// replica) already replaced it, retry with the new one; otherwise
		// refresh once and retry once. A token that itself came from such a
		// refresh and is refused too means the person must reconnect.
		if rec, err := h.o.load(ctx, h.key); err == nil && rec.usable(time.Now()) && rec.AccessToken != sent {
			return nil
		}
		h.mu.Lock()
		again := h.fresh[sent]
		h.mu.Unlock()
		if !again {
			rec, err := h.o.refresh(ctx, h.key, h.sa, sent)
			if err == nil {
				h.mu.Lock()
				if h.fresh == nil || len(h.fresh) > 64 {
					h.fresh = map[string]bool{}
				}
				h.fresh[rec.AccessToken] = true
				h.mu.Unlock()
				return nil
			}
			var cr *clientRefusedError
			if errors.As(err, &cr) {
				return err
			}
		}
		h.o.markRefused(ctx, h.key, sent)
		return &NeedsConnectError{Server: h.sa.name, Reason: "reconnect needed", Challenge: wwwAuth}
	}
	rec := h.o.cached(h.key)
	reason := "not connected"
	if rec != nil && rec.NeedsReconnect {
		reason = "reconnect needed"
	}
	return &NeedsConnectError{Server: h.sa.name, Reason: reason, Challenge: wwwAuth}
}

// revoke asks the authorization server to revoke the connection's tokens
// (RFC 7009; x/oauth2 has no revocation call). It reports success; a
// server without a revocation endpoint, or one that fails, leaves the
// tokens to expire.
func (o *oauthCore) revoke(ctx context.Context, sa serverAuth, rec *tokenRecord) bool {
	if rec.RevocationURL == "" {
		return false
	}
	if err := checkEndpoint(rec.RevocationURL, sa); err != nil {
		return false
	}
	hc, done := sa.httpClient()
	defer done()
	ok := true
	for _, t := range []struct{ token, hint string }{{rec.RefreshToken, "refresh_token"}, {rec.AccessToken, "access_token"}} {
		if t.token == "" {
			continue
		}
		v := url.Values{"token": {t.token}, "token_type_hint": {t.hint}}
		secret := rec.clientSecret(sa)
		basic := secret != "" && rec.AuthStyle == oauth2.AuthStyleInHeader
		if !basic {
			v.Set("client_id", rec.ClientID)
			if secret != "" {
				v.Set("client_secret", secret)
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, rec.RevocationURL, strings.NewReader(v.Encode()))
		if err != nil {
			return false
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if basic {
			req.SetBasicAuth(url.QueryEscape(rec.ClientID), url.QueryEscape(secret))
		}
		resp, err := hc.Do(req)
		if err != nil {
			ok = false
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		ok = ok && resp.StatusCode == http.StatusOK
	}
	return ok
}

// checkEndpoint refuses non-https endpoints except on loopback (as go-sdk
// does for discovery).
func checkEndpoint(raw string, sa serverAuth) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme == "https" || (u.Scheme == "http" && (sa.allowPrivate || isLoopbackHost(u.Hostname()))) {
		return nil
	}
	return fmt.Errorf("endpoint %s must be https", RedactURL(raw))
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
