package slackemu

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Installations: installing (Install, the end of the OAuth flow) and
// issuing tokens, and what installations change on the socket and the
// Web API: the authorizations of events_api payloads,
// apps.event.authorizations.list, uninstalling (tokens_revoked,
// app_uninstalled), apps.uninstall and auth.revoke.

// eventContext is what the emulator packs into an event_context: Slack's
// is opaque; apps.event.authorizations.list reads ours back.
type eventContext struct {
	Team    string `json:"t"`
	Channel string `json:"c,omitempty"`
	Event   string `json:"e"`
}

func encodeEventContext(c eventContext) string {
	b, _ := json.Marshal(c)
	return "4-" + base64.RawURLEncoding.EncodeToString(b)
}

func decodeEventContext(v string) (eventContext, bool) {
	var c eventContext
	rest, ok := strings.CutPrefix(v, "4-")
	if !ok {
		return c, false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || json.Unmarshal(b, &c) != nil || c.Team == "" {
		return c, false
	}
	return c, true
}

// authorizationLocked is the one authorization Slack puts in an event for
// team: the org-wide installation covering it, else the team's own.
func (s *Server) authorizationLocked(team string) map[string]any {
	t := s.teams[team]
	var ent any
	if t != nil && t.EnterpriseID != "" {
		ent = t.EnterpriseID
	}
	if t != nil {
		if in := s.orgInstallLocked(t.EnterpriseID); in != nil {
			return map[string]any{"enterprise_id": in.enterprise, "team_id": nil, "user_id": in.botUser, "is_bot": true, "is_enterprise_install": true}
		}
	}
	user, _, _ := s.botIdentityLocked(team)
	return map[string]any{"enterprise_id": ent, "team_id": team, "user_id": user, "is_bot": true, "is_enterprise_install": false}
}

// eventAuthorizationsList is apps.event.authorizations.list: every live
// installation that can see the event (the channel's host and the teams
// sharing it).
func (s *Server) eventAuthorizationsList(r *request) (map[string]any, error) {
	raw := r.str("event_context")
	if raw == "" {
		return nil, apiError("invalid_arguments")
	}
	ec, ok := decodeEventContext(raw)
	if !ok {
		return nil, apiError("invalid_event_context")
	}
	teams := []string{ec.Team}
	if c := s.channels[ec.Channel]; c != nil {
		teams = append([]string{c.team}, c.SharedTeams...)
	}
	var out []any
	seen := map[*install]bool{}
	for _, team := range teams {
		for _, in := range s.liveInstallsLocked(team) {
			if seen[in] {
				continue
			}
			seen[in] = true
			a := map[string]any{"enterprise_id": nilIfEmpty(in.enterprise), "team_id": nilIfEmpty(in.team), "user_id": in.botUser, "is_bot": true, "is_enterprise_install": in.orgWide}
			out = append(out, a)
		}
	}
	if out == nil {
		out = []any{}
	}
	return map[string]any{"authorizations": out}, nil
}

// Uninstall removes the app from a workspace (a team id) or an Enterprise
// Grid org (an enterprise id, for an org-wide install), as an admin does
// in Slack: every token of those installations answers token_revoked,
// refresh tokens stop working, and tokens_revoked and app_uninstalled are
// delivered in random order.
func (s *Server) Uninstall(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ins []*install
	for _, in := range s.installs {
		if !in.uninstalled && (in.team == id || (in.orgWide && in.enterprise == id)) {
			ins = append(ins, in)
		}
	}
	if len(ins) == 0 {
		return fmt.Errorf("slackemu: Uninstall: nothing installed in %s", id)
	}
	s.uninstallLocked(ins)
	return nil
}

func (s *Server) uninstallLocked(ins []*install) {
	var bots, users []string
	team, enterprise := "", ""
	for _, in := range ins {
		in.uninstalled = true
		for _, b := range in.bots {
			b.revoked = "token_revoked"
		}
		if in.user != nil {
			in.user.revoked = "token_revoked"
			users = append(users, in.installer)
		}
		if !slices.Contains(bots, in.botUser) {
			bots = append(bots, in.botUser)
		}
		for k, rt := range s.refreshes {
			if rt.inst == in {
				delete(s.refreshes, k)
			}
		}
		team, enterprise = in.team, in.enterprise
		if in.orgWide {
			if ts := s.enterpriseTeamsLocked(in.enterprise); len(ts) > 0 {
				team = ts[0].ID
			}
		}
	}
	if users == nil {
		users = []string{}
	}
	events := []map[string]any{
		{"type": "tokens_revoked", "tokens": map[string]any{"oauth": users, "bot": bots}, "event_ts": s.newTSLocked()},
		{"type": "app_uninstalled", "event_ts": s.newTSLocked()},
	}
	// Slack guarantees no order between the two.
	if s.rng.IntN(2) == 1 {
		events[0], events[1] = events[1], events[0]
	}
	for _, ev := range events {
		p, _ := s.eventCallbackLocked(team, ev)
		delete(p, "authorizations") // nobody is authorized any more
		if enterprise != "" {
			p["enterprise_id"] = enterprise
		}
		s.newEnvelopeLocked(TypeEventsAPI, team, p, false)
	}
	s.changedLocked()
}

// appsUninstall is apps.uninstall: the app removes itself from the
// token's workspace (client credentials required).
func (s *Server) appsUninstall(r *request) (map[string]any, error) {
	if r.str("client_id") != s.opts.OAuth.ClientID {
		return nil, apiError("invalid_client_id")
	}
	if r.str("client_secret") != s.opts.OAuth.ClientSecret {
		return nil, apiError("bad_client_secret")
	}
	if r.tok.inst == nil {
		return nil, apiError("invalid_auth")
	}
	s.uninstallLocked([]*install{r.tok.inst})
	return map[string]any{}, nil
}

// authRevoke is auth.revoke: the token dies (test=true only checks);
// with rotation the installation stays.
func (s *Server) authRevoke(r *request) (map[string]any, error) {
	if t := r.boolArg("test"); t != nil && *t {
		return map[string]any{"revoked": false}, nil
	}
	r.tok.revoked = "token_revoked"
	s.changedLocked()
	return map[string]any{"revoked": true}, nil
}

// TokenExpiry returns when an access token expires (zero: never) and
// whether the server knows it.
func (s *Server) TokenExpiry(token string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tokens[token]
	if t == nil {
		return time.Time{}, false
	}
	return t.expires, true
}

// Installation is one installation of the app, as tests see it.
type Installation struct {
	ID           string
	TeamID       string // "" for an org-wide install
	EnterpriseID string
	OrgWide      bool
	// Pinned is a Team.BotToken installation (no OAuth).
	Pinned     bool
	BotUserID  string
	BotID      string
	Scopes     []string
	UserScopes []string
	Installer  string
	// BotToken is the newest live bot token; BotTokens all live ones
	// (at most two with rotation).
	BotToken     string
	BotTokens    []string
	RefreshToken string // newest unused one (rotation only)
	ExpiresAt    time.Time
	UserToken    string
	Uninstalled  bool
}

// install is the server's record of an installation.
type install struct {
	id          string
	team        string // "" for org-wide
	enterprise  string
	orgWide     bool
	pinned      bool
	pkce        bool // installed by a public client (no secret)
	botUser     string
	botID       string
	scopes      []string
	userScopes  []string
	installer   string
	bots        []*tokenState // live bot tokens, oldest first
	user        *tokenState
	refresh     string // newest unused bot refresh token
	userRefresh string
	uninstalled bool
}

// InstallRequest installs the app without the browser (Install), as a
// completed authorize step would.
type InstallRequest struct {
	Team       string
	User       string // installer ("" = the team's first admin)
	OrgWide    bool   // the whole Enterprise Grid org of Team
	Scopes     []string
	UserScopes []string // a user token is issued when set
}

// Install installs the app into a workspace (or org) and returns the
// installation with its tokens. Installing again adds scopes; without
// rotation the bot token stays the same, as in Slack.
func (s *Server) Install(req InstallRequest) (Installation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.User == "" {
		req.User = s.defaultInstallerLocked(req.Team)
	}
	in, err := s.installLocked(req)
	if err != nil {
		return Installation{}, err
	}
	return s.installationLocked(in), nil
}

func (s *Server) installLocked(req InstallRequest) (*install, error) {
	t := s.teams[req.Team]
	if t == nil {
		return nil, fmt.Errorf("slackemu: install: unknown team %q", req.Team)
	}
	org := req.OrgWide && t.EnterpriseID != ""
	var in *install
	for _, o := range s.installs {
		if !o.pinned && !o.uninstalled && o.orgWide == org && ((org && o.enterprise == t.EnterpriseID) || (!org && o.team == t.ID)) {
			in = o
		}
	}
	fresh := in == nil
	if fresh {
		in = &install{id: s.newIDLocked("I"), enterprise: t.EnterpriseID, orgWide: org}
		if org {
			in.botUser, in.botID = s.newIDLocked("W0B"), s.newIDLocked("B0")
		} else {
			in.team = t.ID
			if t.BotUserID == "" {
				t.BotUserID, t.BotID = s.newIDLocked("U0B"), s.newIDLocked("B0")
				t.BotName = cmp.Or(t.BotName, "bobbin")
				s.addUserLocked(t.ID, User{ID: t.BotUserID, Name: t.BotName, RealName: t.BotName, DisplayName: t.BotName, IsBot: true})
			}
			in.botUser, in.botID = t.BotUserID, t.BotID
		}
		s.installs = append(s.installs, in)
	}
	in.installer = req.User
	for _, sc := range req.Scopes {
		if !slices.Contains(in.scopes, sc) {
			in.scopes = append(in.scopes, sc) // scopes only ever add up
		}
	}
	for _, sc := range req.UserScopes {
		if !slices.Contains(in.userScopes, sc) {
			in.userScopes = append(in.userScopes, sc)
		}
	}
	if in.scopes == nil {
		in.scopes = []string{}
	}
	rot := s.opts.OAuth.TokenRotation
	if fresh || rot {
		s.issueBotTokenLocked(in)
	}
	for _, b := range in.bots {
		b.scopes = in.scopes
	}
	if len(in.userScopes) > 0 && (in.user == nil || rot) {
		in.user = s.newTokenLocked(in, "user", req.User)
		if rot {
			in.userRefresh = s.newRefreshLocked(in, true)
		}
	}
	if in.user != nil {
		in.user.scopes = in.userScopes
	}
	if rot {
		in.refresh = s.newRefreshLocked(in, false)
	}
	s.changedLocked()
	return in, nil
}

// issueBotTokenLocked adds a bot token; with rotation at most two stay
// live, the oldest extra one is revoked.
func (s *Server) issueBotTokenLocked(in *install) {
	in.bots = append(in.bots, s.newTokenLocked(in, "bot", in.botUser))
	for len(in.bots) > 2 {
		in.bots[0].revoked = "token_revoked"
		in.bots = in.bots[1:]
	}
}

func (s *Server) newTokenLocked(in *install, kind, user string) *tokenState {
	secret := strings.ReplaceAll(s.newUUIDLocked(), "-", "")[:24]
	t := &tokenState{kind: kind, team: in.team, enterprise: in.enterprise, inst: in, user: user, created: time.Now()}
	prefix := map[string]string{"bot": "xoxb-", "user": "xoxp-"}[kind]
	if kind == "bot" {
		t.botID, t.scopes = in.botID, in.scopes
	} else {
		t.scopes = in.userScopes
	}
	if s.opts.OAuth.TokenRotation {
		t.value = "xoxe." + prefix + "1-" + secret
		t.expires = t.created.Add(s.opts.OAuth.TokenLifetime)
	} else {
		t.value = fmt.Sprintf("%s%s-%d-%s", prefix, cmp.Or(in.team, in.enterprise), s.idSeq, secret)
	}
	s.tokens[t.value] = t
	return t
}

func (s *Server) newRefreshLocked(in *install, user bool) string {
	v := "xoxe-1-" + strings.ReplaceAll(s.newUUIDLocked(), "-", "")
	s.refreshes[v] = &refreshToken{value: v, inst: in, user: user}
	return v
}

// Installations returns every installation (live and uninstalled), oldest
// first.
func (s *Server) Installations() []Installation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Installation, 0, len(s.installs))
	for _, in := range s.installs {
		out = append(out, s.installationLocked(in))
	}
	return out
}

func (s *Server) installationLocked(in *install) Installation {
	out := Installation{
		ID: in.id, TeamID: in.team, EnterpriseID: in.enterprise, OrgWide: in.orgWide, Pinned: in.pinned,
		BotUserID: in.botUser, BotID: in.botID, Scopes: slices.Clone(in.scopes), UserScopes: slices.Clone(in.userScopes),
		Installer: in.installer, RefreshToken: in.refresh, Uninstalled: in.uninstalled,
	}
	for _, b := range in.bots {
		if b.revoked == "" {
			out.BotTokens = append(out.BotTokens, b.value)
			out.BotToken, out.ExpiresAt = b.value, b.expires
		}
	}
	if in.user != nil && in.user.revoked == "" {
		out.UserToken = in.user.value
	}
	return out
}

// ExpireToken makes a token expired now: every method then answers
// token_expired.
func (s *Server) ExpireToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tokens[token]; t != nil {
		t.expires = time.Now().Add(-time.Second)
	}
}
