package mcp

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/agent/servers"
)

// authMode is the server's normalised auth mode.
func (mt *mount) authMode() string {
	switch mt.cfg.Auth {
	case AuthWorkspace, AuthUser:
		return mt.cfg.Auth
	}
	return AuthNone
}

func (mt *mount) isOAuth() bool { return mt.authMode() != AuthNone && mt.cfg.URL != "" }

// serverAuth describes the server for the OAuth flow; the config file's
// client_secret may reference ${VARS}.
func (mt *mount) serverAuth() (serverAuth, error) {
	if mt.cfg.Preset != "" {
		return mt.presetAuth()
	}
	secret := mt.cfg.ClientSecret
	if mt.source == sourceConfig && secret != "" {
		var err error
		if secret, err = expandVars(secret, mt.m.opts.Getenv); err != nil {
			return serverAuth{}, fmt.Errorf("client_secret: %w", err)
		}
	}
	return serverAuth{name: mt.cfg.Name, url: strings.TrimSpace(mt.cfg.URL), mode: mt.authMode(),
		clientID: mt.cfg.ClientID, secret: secret, clientIssuer: mt.cfg.ClientIssuer, scopes: mt.cfg.Scopes,
		checked: mt.source == sourceRegistered, allowPrivate: mt.m.opts.AllowPrivateNetworks,
		resolve: mt.m.opts.Resolver, registrar: mt.registrar}, nil
}

// principalFor is whose connection a person's call uses: their own in
// user mode, the workspace's otherwise.
func (mt *mount) principalFor(user string) string {
	if mt.authMode() == AuthUser {
		return user
	}
	return ""
}

// listPrincipal is whose connection lists the tools: the workspace's; for
// a user server the admin who registered it, else (a server from the
// config file) the requester when they have connected.
func (mt *mount) listPrincipal(ctx context.Context) (string, error) {
	if mt.authMode() != AuthUser {
		return "", nil
	}
	if mt.registrar != "" {
		return mt.registrar, nil
	}
	mt.mu.Lock()
	cur := mt.principal
	mt.mu.Unlock()
	if cur != "" {
		if ok, _, _ := mt.hasToken(ctx, cur); ok {
			return cur, nil
		}
	}
	if rec, _ := mt.m.oauth.load(ctx, connKey{mt.team, mt.cfg.Name, ""}); rec != nil && rec.ListAs != "" {
		if ok, _, _ := mt.hasToken(ctx, rec.ListAs); ok {
			return rec.ListAs, nil
		}
	}
	if r, ok := access.CallerFrom(ctx); ok {
		if rec, _ := mt.m.oauth.load(ctx, connKey{mt.team, mt.cfg.Name, r.User}); rec != nil && !rec.NeedsReconnect {
			return r.User, nil
		}
	}
	return "", fmt.Errorf("%w: nobody has connected %s yet", servers.ErrNotConnected, mt.cfg.Name)
}

// handlerFor returns the OAuth handler of the mount's connection, made
// once per principal so step-up counts survive reconnects.
func (mt *mount) handlerFor(principal string) (*oauthHandler, error) {
	sa, err := mt.serverAuth()
	if err != nil {
		return nil, err
	}
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if mt.handler == nil || mt.handler.key.principal != principal {
		mt.handler = &oauthHandler{o: mt.m.oauth, key: connKey{mt.team, mt.cfg.Name, principal}, sa: sa}
	}
	return mt.handler, nil
}

// userMount returns the per-person mount of a user server: it shares the
// parent's config and tool list but has its own connection and token.
func (mt *mount) userMount(user string) *mount {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if mt.users == nil {
		mt.users = map[string]*mount{}
	}
	sub := mt.users[user]
	if sub == nil {
		sub = newMount(mt.m, mt.team, mt.cfg, mt.source, mt.key)
		sub.parent, sub.principal, sub.registrar = mt, user, mt.registrar
		mt.users[user] = sub
	}
	return sub
}

func (mt *mount) subMounts() []*mount {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	out := make([]*mount, 0, len(mt.users))
	for _, s := range mt.users {
		out = append(out, s)
	}
	return out
}

// hasToken reports whether principal has a connection we may use.
func (mt *mount) hasToken(ctx context.Context, principal string) (bool, string, error) {
	rec, err := mt.m.oauth.load(ctx, connKey{mt.team, mt.cfg.Name, principal})
	if err != nil {
		return false, "", err
	}
	switch {
	case rec == nil:
		return false, "not connected", nil
	case rec.NeedsReconnect:
		return false, "reconnect needed", nil
	case rec.ServerURL != "" && rec.ServerURL != strings.TrimSpace(mt.cfg.URL):
		return false, "reconnect needed (the server's URL changed)", nil
	}
	return true, "", nil
}

// connectAndWait asks the requester to connect principal's account (or
// the workspace) and waits until a callback on any replica completes it,
// ctx ends (Stop) or ConnectTimeout passes. Concurrent calls needing the
// same connection share one prompt. The call's clock is paused meanwhile.
func (mt *mount) connectAndWait(ctx context.Context, principal, reason string, wwwAuth []string) error {
	o := mt.m.oauth
	if err := o.ready(); err != nil {
		return err
	}
	r, ok := access.CallerFrom(ctx)
	if !ok || o.opts.Prompter == nil {
		return fmt.Errorf("%w: %s (%s): connect it with `/bobbin mcp connect %s`", servers.ErrNotConnected, mt.cfg.Name, reason, mt.cfg.Name)
	}
	key := connKey{mt.team, mt.cfg.Name, principal}
	o.mu.Lock()
	if f := o.flights[key]; f != nil {
		o.mu.Unlock()
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	o.flights[key] = f
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		delete(o.flights, key)
		o.mu.Unlock()
		close(f.done)
	}()
	resume := pauseClock(ctx)
	defer resume()
	f.err = mt.promptAndWait(ctx, key, r, reason, wwwAuth)
	return f.err
}

func (mt *mount) promptAndWait(ctx context.Context, key connKey, r access.Caller, reason string, wwwAuth []string) error {
	o := mt.m.oauth
	sa, err := mt.serverAuth()
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, o.opts.ConnectTimeout)
	defer cancel()
	// What is stored now: the wait ends when a newer connection appears
	// (the prompter may complete it before it returns).
	start, _ := o.load(ctx, key)
	prompted := false
	release := func() {}
	defer func() { release() }()
	connected := func() bool {
		rec, err := o.load(wctx, key)
		return err == nil && rec != nil && !rec.NeedsReconnect &&
			(start == nil || rec.ConnectedAt.After(start.ConnectedAt) || start.NeedsReconnect) && rec.usable(time.Now())
	}
	for first := true; ; first = false {
		if !first && connected() {
			return nil
		}
		if !prompted {
			// Another replica's prompt for this connection may be out:
			// then wait for it, and ask only once it is over.
			var mine bool
			release, mine = o.claimPrompt(wctx, key)
			if mine {
				link, expires, err := o.startConnect(ctx, key, sa, r.User, wwwAuth)
				if err != nil {
					return err
				}
				if err := o.opts.Prompter.PromptConnect(wctx, ConnectPrompt{Caller: r, Server: mt.cfg.Name, Mode: mt.authMode(),
					URL: link, Reason: reason, Expires: expires}); err != nil {
					return fmt.Errorf("%s: %w", mt.cfg.Name, err)
				}
				prompted = true
				if connected() {
					return nil
				}
			}
		}
		if o.opts.Waker == nil {
			t := time.NewTimer(time.Second)
			select {
			case <-wctx.Done():
				t.Stop()
			case <-t.C:
			}
		} else {
			sctx, scancel := context.WithTimeout(wctx, 5*time.Second)
			outcome, err := o.opts.Waker.WaitOAuth(sctx, key.team, key.server, key.principal)
			scancel()
			if err == nil && strings.HasPrefix(outcome, "failed: ") {
				return fmt.Errorf("%s: connecting failed: %s", mt.cfg.Name, strings.TrimPrefix(outcome, "failed: "))
			}
		}
		if err := wctx.Err(); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: %s: nobody completed Connect within %s", servers.ErrNotConnected, mt.cfg.Name, o.opts.ConnectTimeout)
		}
	}
}

// claimPrompt claims key's Connect prompt across replicas; mine is false
// while another replica's prompt is out. Without a claimer, or when it
// fails, the prompt is ours: a second prompt beats none.
func (o *oauthCore) claimPrompt(ctx context.Context, key connKey) (release func(), mine bool) {
	if o.opts.Prompts == nil {
		return func() {}, true
	}
	release, claimed, err := o.opts.Prompts.ClaimOAuthPrompt(ctx, key.team, key.server, key.principal, o.opts.ConnectTimeout)
	if err != nil {
		o.log.Warn("mcp oauth: cannot claim the Connect prompt; asking anyway", "team", key.team, "server", key.server, "err", err)
		return func() {}, true
	}
	return release, claimed
}

// connected drops this replica's live connections of key so the next
// request uses the new token (other replicas read it from the store when
// theirs is refused or expires).
func (m *Manager) connected(key connKey) {
	for _, mt := range m.allMounts() {
		if mt.team != key.team || mt.cfg.Name != key.server {
			continue
		}
		for _, x := range append(mt.subMounts(), mt) {
			x.mu.Lock()
			match := x.principal == key.principal || (x.parent == nil && x.authMode() == AuthUser && x.principal == "")
			x.retryAt, x.failures = time.Time{}, 0
			if match {
				x.stale = true
			}
			x.mu.Unlock()
		}
	}
}

// ConnectionState reports an OAuth server's connection for user (the
// workspace's in workspace mode). ok is false for servers without OAuth.
func (m *Manager) ConnectionState(ctx context.Context, team, server, user string) (st servers.OAuth, ok bool, err error) {
	_, mt, err := m.findMount(ctx, team, server)
	if err != nil {
		return servers.OAuth{}, false, err
	}
	if !mt.isOAuth() {
		return servers.OAuth{}, false, nil
	}
	return m.oauthStatus(ctx, mt, user), true, nil
}

func (m *Manager) oauthStatus(ctx context.Context, mt *mount, user string) servers.OAuth {
	st := servers.OAuth{Mode: mt.authMode()}
	principal := mt.principalFor(user)
	if st.Mode == AuthUser && user == "" {
		st.Reason = "per-user"
		return st
	}
	ok, reason, err := mt.hasToken(ctx, principal)
	if err != nil {
		st.Reason = "connection state unavailable"
		return st
	}
	st.Connected, st.Reason = ok, reason
	if rec := m.oauth.cached(connKey{mt.team, mt.cfg.Name, principal}); rec != nil && ok {
		st.ConnectedBy, st.Scopes, st.ConnectedAt = rec.ConnectedBy, rec.Scopes, rec.ConnectedAt
		sort.Strings(st.Scopes)
	}
	return st
}

// StartConnect begins connecting user's account (user mode) or the
// workspace (workspace mode; the bot checks that user is an admin) to an
// OAuth server, and returns the authorization URL for the Connect button
// and when it expires. The callback, on any replica, completes it
// (CompleteCallback).
func (m *Manager) StartConnect(ctx context.Context, team, server, user string) (string, time.Time, error) {
	_, mt, err := m.findMount(ctx, team, server)
	if err != nil {
		return "", time.Time{}, err
	}
	if !mt.isOAuth() {
		return "", time.Time{}, fmt.Errorf("mcp: %s does not use OAuth (auth: none)", server)
	}
	sa, err := mt.serverAuth()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("mcp: %s: %w", server, err)
	}
	return m.oauth.startConnect(ctx, connKey{team, server, mt.principalFor(user)}, sa, user, nil)
}

// Disconnect removes user's connection (user mode) or the workspace's
// (workspace mode; the bot checks that user is an admin), revoking the
// token where the authorization server supports revocation (RFC 7009).
// The registration stays.
func (m *Manager) Disconnect(ctx context.Context, team, server, user string) error {
	_, mt, err := m.findMount(ctx, team, server)
	if err != nil {
		return err
	}
	if !mt.isOAuth() {
		return fmt.Errorf("mcp: %s does not use OAuth (auth: none)", server)
	}
	if err := m.oauth.ready(); err != nil {
		return err
	}
	key := connKey{team, server, mt.principalFor(user)}
	rec, err := m.oauth.load(ctx, key)
	if err != nil {
		return fmt.Errorf("mcp: %s: %w", server, err)
	}
	if rec == nil {
		return fmt.Errorf("%w: %s", servers.ErrNotConnected, server)
	}
	sa, _ := mt.serverAuth()
	revoked := m.oauth.revoke(ctx, sa, rec)
	if err := m.oauth.opts.Tokens.DeleteOAuthConnection(ctx, key.team, key.server, key.principal); err != nil {
		return fmt.Errorf("mcp: %s: removing the connection: %w", server, err)
	}
	m.oauth.forget(key)
	if key.principal != "" {
		lk := connKey{team, server, ""}
		if l, _ := m.oauth.load(ctx, lk); l != nil && l.ListAs == key.principal {
			_ = m.oauth.opts.Tokens.DeleteOAuthConnection(ctx, team, server, "")
			m.oauth.forget(lk)
		}
	}
	// Close live connections that carry the token.
	for _, x := range append(mt.subMounts(), mt) {
		x.mu.Lock()
		c := x.conn
		mine := x.principal == key.principal || (x.parent == nil && x.authMode() != AuthUser)
		if mine {
			x.conn, x.stale = nil, true
		}
		x.mu.Unlock()
		if mine && c != nil {
			c.close()
		}
	}
	detail := "token not revoked (no revocation endpoint)"
	if revoked {
		detail = "token revoked"
	}
	m.oauth.audit(ctx, AuditEvent{Team: team, Server: server, User: user, Principal: key.principal, Action: "oauth_disconnect", Detail: detail})
	return nil
}

// errNoRequester is returned by a user-mode call without a requester.
var errNoRequester = errors.New("this server acts as the person who asked, and the call carries no requester")

// needsOAuth reports whether url answers an unauthenticated request with
// 401 and its authorization can be discovered.
func (m *Manager) needsOAuth(ctx context.Context, name, rawURL string) bool {
	sa := serverAuth{name: name, url: rawURL, checked: true, allowPrivate: m.opts.AllowPrivateNetworks, resolve: m.opts.Resolver}
	hc, done := sa.httpClient()
	defer done()
	ctx, cancel := context.WithTimeout(ctx, m.opts.ProbeTimeout)
	defer cancel()
	www := challenge(ctx, hc, rawURL)
	if len(www) == 0 {
		return false
	}
	d, err := discover(ctx, hc, rawURL, www)
	return err == nil && d.asm != nil && d.asm.AuthorizationEndpoint != ""
}

// ProbeAuth tells whether a URL an admin wants to register needs OAuth:
// nil when it does not, servers.ErrNeedsOAuth when it does and OAuth is set up,
// servers.ErrOAuthUnavailable when it does and PUBLIC_URL is missing.
func (m *Manager) ProbeAuth(ctx context.Context, name, rawURL string) error {
	if err := ValidateRegistrationURL(rawURL, m.opts.AllowPrivateNetworks); err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	if !m.needsOAuth(ctx, name, strings.TrimSpace(rawURL)) {
		return nil
	}
	if err := m.oauth.ready(); err != nil {
		return err
	}
	return servers.ErrNeedsOAuth
}
