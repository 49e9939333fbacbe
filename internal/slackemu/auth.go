package slackemu

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// Tokens, scopes and what a token may see.
//
// Every credential the server accepts is a tokenState: the bot token of a
// Team (a "pinned" installation made by AddTeam), the bot and user tokens
// an OAuth install issues, and their rotated successors. The app token
// (Options.AppToken) is checked separately: it serves every installation.

// tokenState is one access token.
type tokenState struct {
	value      string
	kind       string // "bot" or "user"
	team       string // workspace; "" for the tokens of an org-wide install
	enterprise string
	inst       *install
	user       string   // the bot user or the person
	botID      string   // bot tokens
	scopes     []string // nil: every scope (pinned tokens without Team.Scopes)
	expires    time.Time
	revoked    string // error code once revoked ("token_revoked")
	created    time.Time
}

// Method classes by the token they take.
var (
	// appTokenMethods take the app-level (xapp-) token.
	appTokenMethods = map[string]bool{"apps.connections.open": true, "apps.event.authorizations.list": true}
	// tokenlessMethods authenticate the client (id and secret), not a token.
	tokenlessMethods = map[string]bool{"oauth.v2.access": true}
	// userTokenMethods accept a user (xoxp-) token; the emulator models
	// user tokens for reading only.
	userTokenMethods = map[string]bool{
		"auth.test": true, "auth.revoke": true, "team.info": true, "users.info": true, "conversations.info": true,
		"conversations.replies": true, "files.info": true, "usergroups.users.list": true,
		"conversations.history": true, "assistant.search.context": true, "assistant.search.info": true,
	}
)

// methodScopes are the scopes a method needs whatever its arguments (any
// one of them). conversations.* check theirs by channel type.
var methodScopes = map[string][]string{
	"chat.postMessage": {"chat:write"}, "chat.update": {"chat:write"}, "chat.delete": {"chat:write"},
	"chat.postEphemeral": {"chat:write"}, "chat.startStream": {"chat:write"}, "chat.appendStream": {"chat:write"},
	"chat.stopStream": {"chat:write"}, "reactions.add": {"reactions:write"}, "reactions.remove": {"reactions:write"},
	"assistant.threads.setStatus": {"assistant:write"}, "assistant.threads.setSuggestedPrompts": {"assistant:write"},
	"assistant.threads.setTitle": {"assistant:write"}, "users.info": {"users:read"}, "team.info": {"team:read"},
	"files.info": {"files:read"}, "usergroups.users.list": {"usergroups:read"},
	"files.getUploadURLExternal": {"files:write"}, "files.completeUploadExternal": {"files:write"},
	"agents.sessions.setStatus": {"chat:write"}, "agents.sessions.rename": {"chat:write"},
	"assistant.search.context": {"search:read.public"}, "assistant.search.info": {"search:read.public"},
}

// scopeError is Slack's missing_scope answer, which names the scope needed
// and the scopes the token has.
type scopeError struct {
	needed   string
	provided []string
}

func (e *scopeError) Error() string { return "missing_scope" }

func (e *scopeError) fields() map[string]any {
	return map[string]any{"needed": e.needed, "provided": strings.Join(e.provided, ",")}
}

// needScope fails with missing_scope unless the request's token carries
// one of scopes. Tokens without a scope list carry every scope.
func (r *request) needScope(scopes ...string) error {
	if r.tok == nil || r.tok.scopes == nil || len(scopes) == 0 {
		return nil
	}
	for _, sc := range scopes {
		if slices.Contains(r.tok.scopes, sc) {
			return nil
		}
	}
	return &scopeError{needed: strings.Join(scopes, ","), provided: r.tok.scopes}
}

// botUser and botID are the identity the request's bot token acts as.
func (r *request) botUser() string {
	if r.tok != nil && r.tok.kind == "bot" && r.tok.user != "" {
		return r.tok.user
	}
	return r.team.BotUserID
}

func (r *request) botID() string {
	if r.tok != nil && r.tok.kind == "bot" && r.tok.botID != "" {
		return r.tok.botID
	}
	return r.team.BotID
}

// orgWide reports whether the request carries an org-wide install's token.
func (r *request) orgWide() bool { return r.tok != nil && r.tok.team == "" && r.tok.enterprise != "" }

// authLocked checks the token: xapp- only for the app-token methods, a
// known, live bot (or, for reading, user) token everywhere else; it sets
// r.tok and r.team.
func (s *Server) authLocked(r *request) error {
	if tokenlessMethods[r.method] {
		return nil // the handler authenticates the client
	}
	if r.token == "" {
		return apiError("not_authed")
	}
	if s.revoked[r.token] {
		return apiError("token_revoked")
	}
	if appTokenMethods[r.method] {
		if tokenKind(r.token) != "xapp" {
			return apiError("not_allowed_token_type")
		}
		if r.token != s.opts.AppToken {
			return apiError("invalid_auth")
		}
		return nil
	}
	if tokenKind(r.token) == "xapp" {
		return apiError("not_allowed_token_type")
	}
	t := s.tokens[r.token]
	if t == nil {
		return apiError("invalid_auth")
	}
	if t.revoked != "" {
		return apiError(t.revoked)
	}
	if !t.expires.IsZero() && time.Now().After(t.expires) {
		return apiError("token_expired")
	}
	if t.kind == "user" && !userTokenMethods[r.method] {
		return apiError("not_allowed_token_type")
	}
	r.tok = t
	r.team = s.teamForTokenLocked(r, t)
	if r.team == nil {
		return apiError("team_access_not_granted")
	}
	return nil
}

// teamForTokenLocked resolves the workspace a call acts in. A workspace
// token has one; an org-wide token acts in the team the call names
// (team_id, team, or the team of its channel or user) or else the first
// team of its enterprise.
func (s *Server) teamForTokenLocked(r *request, t *tokenState) *teamState {
	if t.team != "" {
		return s.teams[t.team]
	}
	covered := s.enterpriseTeamsLocked(t.enterprise)
	if len(covered) == 0 {
		return nil
	}
	var named []string
	for _, k := range []string{"team_id", "team"} {
		named = append(named, r.str(k))
	}
	for _, k := range []string{"channel", "channel_id"} {
		if c := s.channels[r.str(k)]; c != nil {
			named = append(named, c.team)
		}
	}
	if u := s.users[r.str("user")]; u != nil {
		named = append(named, u.TeamID)
	}
	for _, id := range named {
		if id == "" {
			continue
		}
		if i := slices.IndexFunc(covered, func(c *teamState) bool { return c.ID == id }); i >= 0 {
			return covered[i]
		}
	}
	return covered[0]
}

// enterpriseTeamsLocked returns the workspaces of an enterprise, by id.
func (s *Server) enterpriseTeamsLocked(enterprise string) []*teamState {
	var out []*teamState
	for _, t := range s.teams {
		if enterprise != "" && t.EnterpriseID == enterprise {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// resolveTeamLocked sets r.team from the token, for journaling calls that
// fail before authentication.
func (s *Server) resolveTeamLocked(r *request) {
	if r.team != nil {
		return
	}
	if t := s.tokens[r.token]; t != nil {
		r.team = s.teamForTokenLocked(r, t)
	}
}

// seesChannel reports whether the tokens of team may use the channel: it
// is the team's own, or a Slack Connect channel shared with it.
func seesChannel(c *channelState, team string) bool {
	return c != nil && (c.team == team || slices.Contains(c.SharedTeams, team))
}

// channelOfLocked returns the channel named by argument key if the
// request's team may use it.
func (s *Server) channelOfLocked(r *request, key string) *channelState {
	c := s.channels[r.str(key)]
	if !seesChannel(c, r.team.ID) {
		return nil
	}
	return c
}

// seesUserLocked reports whether team's tokens can look up user: a member
// of the team (guests and external people added to it included), of its
// enterprise, or of a team it shares a channel with.
func (s *Server) seesUserLocked(team string, u *User) bool {
	if u.TeamID == team || s.rosters[team][u.ID] {
		return true
	}
	if t, ut := s.teams[team], s.teams[u.TeamID]; t != nil && ut != nil && t.EnterpriseID != "" && t.EnterpriseID == ut.EnterpriseID {
		return true
	}
	for _, c := range s.channels {
		if seesChannel(c, team) && seesChannel(c, u.TeamID) {
			return true
		}
	}
	return false
}

// botIdentityLocked is the app's bot user and bot id in team: those of an
// org-wide installation covering the team, else the team's own.
func (s *Server) botIdentityLocked(team string) (user, botID, name string) {
	t := s.teams[team]
	if t == nil {
		return "", "", ""
	}
	if in := s.orgInstallLocked(t.EnterpriseID); in != nil {
		return in.botUser, in.botID, t.BotName
	}
	return t.BotUserID, t.BotID, t.BotName
}
