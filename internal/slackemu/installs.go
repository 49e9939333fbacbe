package slackemu

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// What installations change on the socket and the Web API: the
// authorizations of events_api payloads, apps.event.authorizations.list,
// uninstalling (tokens_revoked, app_uninstalled), apps.uninstall and
// auth.revoke.

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

// tokenExpiresLocked is used by tests through TokenExpiry.
func (s *Server) tokenExpiresLocked(token string) (time.Time, bool) {
	t := s.tokens[token]
	if t == nil {
		return time.Time{}, false
	}
	return t.expires, true
}

// TokenExpiry returns when a token expires (zero: never) and whether the
// server knows it.
func (s *Server) TokenExpiry(token string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokenExpiresLocked(token)
}
