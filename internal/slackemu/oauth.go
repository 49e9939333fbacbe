package slackemu

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// The OAuth v2 install flow of a distributed app: GET /oauth/v2/authorize
// (the browser step, approved at once as Consent says), oauth.v2.access
// (code and refresh grants, with token rotation), installations per
// workspace or Enterprise Grid org, and uninstalling.

// Client credentials of the emulated app (OAuthOptions defaults).
const (
	ClientID     = "111.222"
	ClientSecret = "emu-client-secret"
)

// OAuthOptions are the app's distribution settings.
type OAuthOptions struct {
	ClientID     string // default ClientID
	ClientSecret string // default ClientSecret
	// RedirectURLs are the app's configured Redirect URLs. A redirect_uri
	// must equal one of them or lie under it; only these may be plain
	// http (Slack demands https). With none configured any https
	// redirect_uri is accepted and one must be sent.
	RedirectURLs []string
	// TokenRotation issues expiring xoxe.xoxb- tokens with refresh tokens.
	TokenRotation bool
	// TokenLifetime is a rotating token's life (default 12 h ×
	// TimeScale). expires_in reports it in whole seconds, at least 1
	// (Slack's is always 43200).
	TokenLifetime time.Duration
	// RefreshGrace is how long a used refresh token keeps working
	// (default 2 min × TimeScale; Slack's grace is not published).
	RefreshGrace time.Duration
	// CodeTTL is an authorization code's life (default 10 min × TimeScale).
	CodeTTL time.Duration
}

// Consent is what the person in the browser does at /oauth/v2/authorize.
type Consent struct {
	// Team is the workspace they install into when the URL names none
	// (a `team` parameter naming a known workspace wins: the person is
	// signed in everywhere). "" = the first workspace by id.
	Team string
	// User is the installing person ("" = the team's first admin, else
	// its first user).
	User string
	// OrgWide installs on the whole Enterprise Grid org of the team.
	OrgWide bool
	// Deny cancels: the browser is sent back with error=access_denied.
	Deny bool
}

// SetConsent sets how later authorize visits are answered.
func (s *Server) SetConsent(c Consent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.consent = c
}

// AuthorizeURL is the emulator's authorize endpoint (for
// SLACK_OAUTH_AUTHORIZE_URL).
func (s *Server) AuthorizeURL() string { return s.base + "/oauth/v2/authorize" }

// refreshToken is a rotation refresh token.
type refreshToken struct {
	value  string
	inst   *install
	user   bool // renews the user token
	usedAt time.Time
	next   string // the refresh token issued when it was used
}

// oauthCode is an authorization code waiting for oauth.v2.access.
type oauthCode struct {
	redirect    string // redirect_uri as sent to authorize ("" = omitted)
	team        string
	user        string
	orgWide     bool
	scopes      []string
	userScopes  []string
	challenge   string
	challengeS2 bool
	expires     time.Time
	used        bool
}

func (o OAuthOptions) withDefaults(scale func(time.Duration) time.Duration) OAuthOptions {
	o.ClientID = cmp.Or(o.ClientID, ClientID)
	o.ClientSecret = cmp.Or(o.ClientSecret, ClientSecret)
	o.TokenLifetime = cmp.Or(o.TokenLifetime, scale(12*time.Hour))
	o.RefreshGrace = cmp.Or(o.RefreshGrace, scale(2*time.Minute))
	o.CodeTTL = cmp.Or(o.CodeTTL, scale(10*time.Minute))
	o.RedirectURLs = slices.Clone(o.RedirectURLs)
	return o
}

// pinInstallLocked records a Team.BotToken as an installation.
func (s *Server) pinInstallLocked(t *teamState) {
	in := &install{id: s.newIDLocked("I"), team: t.ID, enterprise: t.EnterpriseID, pinned: true, botUser: t.BotUserID, botID: t.BotID, scopes: slices.Clone(t.Scopes)}
	tok := &tokenState{value: t.BotToken, kind: "bot", team: t.ID, enterprise: t.EnterpriseID, inst: in, user: t.BotUserID, botID: t.BotID, scopes: in.scopes, created: time.Now()}
	in.bots = []*tokenState{tok}
	s.tokens[tok.value] = tok
	s.installs = slices.DeleteFunc(s.installs, func(o *install) bool { return o.pinned && o.team == t.ID })
	s.installs = append(s.installs, in)
}

// orgInstallLocked returns the live org-wide installation of enterprise.
func (s *Server) orgInstallLocked(enterprise string) *install {
	if enterprise == "" {
		return nil
	}
	for _, in := range s.installs {
		if in.orgWide && in.enterprise == enterprise && !in.uninstalled {
			return in
		}
	}
	return nil
}

// liveInstallsLocked returns the live installations that cover team.
func (s *Server) liveInstallsLocked(team string) []*install {
	t := s.teams[team]
	var out []*install
	for _, in := range s.installs {
		if in.uninstalled {
			continue
		}
		if in.team == team || (in.orgWide && t != nil && t.EnterpriseID == in.enterprise) {
			out = append(out, in)
		}
	}
	return out
}

var scopeRE = regexp.MustCompile(`^[a-z][a-z_.]*(:[a-z_.]+)*$`)

func splitScopes(v string) ([]string, bool) {
	var out []string
	for _, sc := range strings.Split(v, ",") {
		sc = strings.TrimSpace(sc)
		if sc == "" {
			continue
		}
		if !scopeRE.MatchString(sc) {
			return nil, false
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, true
}

// checkRedirectLocked validates an authorize redirect_uri and returns the
// URL to send the browser back to.
func (s *Server) checkRedirectLocked(ru string) (string, bool) {
	conf := s.opts.OAuth.RedirectURLs
	if ru == "" {
		if len(conf) == 0 {
			return "", false
		}
		return conf[0], true
	}
	u, err := url.Parse(ru)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Fragment != "" || strings.Contains(ru, "#") {
		return "", false
	}
	for _, c := range conf {
		if cu, err := url.Parse(c); err == nil && under(u, cu) {
			return ru, true
		}
	}
	if len(conf) > 0 || u.Scheme != "https" {
		return "", false
	}
	return ru, true
}

// under reports whether u equals base or is a subdirectory of it (same
// scheme, host and port).
func under(u, base *url.URL) bool {
	if !strings.EqualFold(u.Scheme, base.Scheme) || !strings.EqualFold(u.Host, base.Host) {
		return false
	}
	bp := strings.TrimSuffix(base.Path, "/")
	return u.Path == base.Path || u.Path == bp || strings.HasPrefix(u.Path, bp+"/")
}

// handleAuthorize is GET /oauth/v2/authorize: the consent screen, answered
// at once as the Consent says.
func (s *Server) handleAuthorize(w http.ResponseWriter, hr *http.Request) {
	if !s.enter() {
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	defer s.tasks.Done()
	q := hr.URL.Query()
	s.mu.Lock()
	target, team, problem := s.authorizeLocked(q)
	status := http.StatusFound
	if target == "" {
		status = http.StatusBadRequest
	}
	// Journaled like a Web API call so tests see the browser step.
	s.journalLocked(Call{Time: time.Now(), Method: "oauth/v2/authorize", Team: team, Params: authorizeParams(q), Status: status, OK: problem == "", Error: problem})
	s.changedLocked()
	s.mu.Unlock()
	if problem != "" && target == "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "<!doctype html><title>Slack</title><h1>Something went wrong when authorizing this app.</h1><p>Error: %s</p>\n", html.EscapeString(problem))
		return
	}
	http.Redirect(w, hr, target, http.StatusFound)
}

func authorizeParams(q url.Values) map[string]any {
	out := map[string]any{}
	for k := range q {
		out[k] = q.Get(k)
	}
	return out
}

// authorizeLocked returns where to send the browser (with code or error),
// the team installed into, and the problem when it went wrong; no target
// means an error page.
func (s *Server) authorizeLocked(q url.Values) (target, team, problem string) {
	if q.Get("client_id") != s.opts.OAuth.ClientID {
		return "", "", "invalid_client_id"
	}
	back, ok := s.checkRedirectLocked(q.Get("redirect_uri"))
	if !ok {
		return "", "", "bad_redirect_uri"
	}
	scopes, ok1 := splitScopes(q.Get("scope"))
	userScopes, ok2 := splitScopes(q.Get("user_scope"))
	if !ok1 || !ok2 || len(scopes)+len(userScopes) == 0 {
		return "", "", "invalid_scope"
	}
	state := q.Get("state")
	reply := func(v url.Values) string {
		u, _ := url.Parse(back)
		rq := u.Query()
		for k, vs := range v {
			rq[k] = vs
		}
		if state != "" {
			rq.Set("state", state)
		}
		u.RawQuery = rq.Encode()
		return u.String()
	}
	c := s.consent
	if c.Deny {
		return reply(url.Values{"error": {"access_denied"}}), "", "access_denied"
	}
	team = q.Get("team")
	if s.teams[team] == nil {
		team = c.Team
	}
	if s.teams[team] == nil {
		ids := make([]string, 0, len(s.teams))
		for id := range s.teams {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		if len(ids) == 0 {
			return "", "", "invalid_team"
		}
		team = ids[0]
	}
	t := s.teams[team]
	user := c.User
	if user == "" {
		user = s.defaultInstallerLocked(team)
	}
	s.sweepCodesLocked()
	id := fmt.Sprintf("%d.%d.%s", time.Now().Unix(), s.rng.Uint64N(1e12), strings.ReplaceAll(s.newUUIDLocked(), "-", ""))
	oc := &oauthCode{
		redirect: q.Get("redirect_uri"), team: team, user: user, orgWide: c.OrgWide && t.EnterpriseID != "",
		scopes: scopes, userScopes: userScopes, challenge: q.Get("code_challenge"),
		challengeS2: strings.EqualFold(q.Get("code_challenge_method"), "S256"),
		expires:     time.Now().Add(s.opts.OAuth.CodeTTL),
	}
	s.codes[id] = oc
	return reply(url.Values{"code": {id}}), team, ""
}

func (s *Server) defaultInstallerLocked(team string) string {
	var first, admin string
	ids := make([]string, 0, len(s.rosters[team]))
	for id := range s.rosters[team] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		u := s.users[id]
		if u == nil || u.IsBot || u.Deleted || u.TeamID != team {
			continue
		}
		if first == "" {
			first = id
		}
		if admin == "" && u.IsAdmin {
			admin = id
		}
	}
	return cmp.Or(admin, first)
}

// sweepCodesLocked forgets used and expired codes.
func (s *Server) sweepCodesLocked() {
	now := time.Now()
	for k, c := range s.codes {
		if c.used || now.After(c.expires) {
			delete(s.codes, k)
		}
	}
}

// oauthAccess is oauth.v2.access: the code grant (an install) and the
// refresh grant (token rotation).
func (s *Server) oauthAccess(r *request) (map[string]any, error) {
	id, secret := r.str("client_id"), r.str("client_secret")
	if r.hasBasic {
		id, secret = r.basicUser, r.basicPass // Slack prefers HTTP Basic
	}
	cfg := s.opts.OAuth
	if id == "" || id != cfg.ClientID {
		return nil, apiError("invalid_client_id")
	}
	if secret != "" && secret != cfg.ClientSecret {
		return nil, apiError("bad_client_secret")
	}
	switch r.str("grant_type") {
	case "", "authorization_code":
		return s.codeGrantLocked(r, secret != "")
	case "refresh_token":
		return s.refreshGrantLocked(r, secret != "")
	}
	return nil, apiError("invalid_grant_type")
}

func (s *Server) codeGrantLocked(r *request, hasSecret bool) (map[string]any, error) {
	c := s.codes[r.str("code")]
	if c == nil || c.used || time.Now().After(c.expires) {
		return nil, apiError("invalid_code")
	}
	if !hasSecret && c.challenge == "" {
		return nil, apiError("bad_client_secret")
	}
	ru := r.str("redirect_uri")
	switch {
	case c.redirect != "" && ru != c.redirect:
		return nil, apiError("bad_redirect_uri")
	case c.redirect == "" && ru != "" && (len(s.opts.OAuth.RedirectURLs) == 0 || ru != s.opts.OAuth.RedirectURLs[0]):
		return nil, apiError("bad_redirect_uri")
	}
	if c.challenge != "" {
		v := r.str("code_verifier")
		want := v
		if c.challengeS2 {
			sum := sha256.Sum256([]byte(v))
			want = base64.RawURLEncoding.EncodeToString(sum[:])
		}
		if v == "" || want != c.challenge {
			return nil, apiError("invalid_code_verifier")
		}
	}
	c.used = true
	in, err := s.installLocked(InstallRequest{Team: c.team, User: c.user, OrgWide: c.orgWide, Scopes: c.scopes, UserScopes: c.userScopes})
	if err != nil {
		return nil, err
	}
	in.pkce = in.pkce || !hasSecret
	return s.accessReplyLocked(in, false), nil
}

func (s *Server) refreshGrantLocked(r *request, hasSecret bool) (map[string]any, error) {
	rt := s.refreshes[r.str("refresh_token")]
	if rt == nil || rt.inst.uninstalled {
		return nil, apiError("invalid_refresh_token")
	}
	if !hasSecret && !rt.inst.pkce {
		return nil, apiError("bad_client_secret")
	}
	now := time.Now()
	if !rt.usedAt.IsZero() {
		if now.After(rt.usedAt.Add(s.opts.OAuth.RefreshGrace)) {
			delete(s.refreshes, rt.value)
			return nil, apiError("invalid_refresh_token")
		}
	} else {
		rt.usedAt = now
		rt.next = s.newRefreshLocked(rt.inst, rt.user)
	}
	in := rt.inst
	if rt.user {
		in.user = s.newTokenLocked(in, "user", in.installer)
		in.userRefresh = rt.next
		return s.userReplyLocked(in), nil
	}
	s.issueBotTokenLocked(in)
	in.refresh = rt.next
	return s.accessReplyLocked(in, true), nil
}

// accessReplyLocked renders oauth.v2.access's answer for an installation
// (workspace or org-wide shape; refresh answers omit the user token).
func (s *Server) accessReplyLocked(in *install, refresh bool) map[string]any {
	bot := in.bots[len(in.bots)-1]
	out := map[string]any{
		"access_token": bot.value, "token_type": "bot", "scope": strings.Join(in.scopes, ","),
		"bot_user_id": in.botUser, "app_id": s.opts.AppID, "is_enterprise_install": in.orgWide,
		"team": nil, "enterprise": nil,
	}
	if t := s.teams[in.team]; t != nil && !in.orgWide {
		out["team"] = map[string]any{"id": t.ID, "name": t.Name}
	}
	if in.enterprise != "" {
		name := ""
		if ts := s.enterpriseTeamsLocked(in.enterprise); len(ts) > 0 {
			name = ts[0].EnterpriseName
		}
		out["enterprise"] = map[string]any{"id": in.enterprise, "name": name}
	}
	if s.opts.OAuth.TokenRotation {
		out["refresh_token"] = in.refresh
		out["expires_in"] = s.expiresInLocked()
	}
	au := map[string]any{"id": in.installer}
	if in.user != nil && !refresh {
		au = s.userReplyLocked(in)
		delete(au, "ok")
	}
	out["authed_user"] = au
	return out
}

// userReplyLocked is the authed_user object (also the answer to a user
// token's refresh).
func (s *Server) userReplyLocked(in *install) map[string]any {
	out := map[string]any{"id": in.installer, "scope": strings.Join(in.userScopes, ","), "access_token": in.user.value, "token_type": "user"}
	if s.opts.OAuth.TokenRotation {
		out["refresh_token"] = in.userRefresh
		out["expires_in"] = s.expiresInLocked()
	}
	return out
}

func (s *Server) expiresInLocked() int {
	return max(1, int((s.opts.OAuth.TokenLifetime+time.Second-1)/time.Second))
}
