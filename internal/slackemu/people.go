package slackemu

import (
	"fmt"
	"slices"
	"sort"
)

// People and workspaces: auth.test, team.info, users.info,
// conversations.info and user groups (usergroups.users.list).

// Usergroup is a user group ("S…", mentioned as <!subteam^S…>).
type Usergroup struct {
	ID       string // "S…"; AddUsergroup assigns one when empty
	Team     string
	Handle   string
	Name     string
	Users    []string
	Disabled bool
}

// AddUsergroup adds (or replaces) a user group and returns its id.
func (s *Server) AddUsergroup(g Usergroup) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g.ID == "" {
		g.ID = s.newIDLocked("S")
	}
	g.Users = slices.Clone(g.Users)
	s.usergroups[g.ID] = &g
	s.changedLocked()
	return g.ID
}

// SetUsergroupMembers replaces a group's members (as an admin editing it
// in Slack would; no event is sent).
func (s *Server) SetUsergroupMembers(id string, users ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.usergroups[id]
	if g == nil {
		return fmt.Errorf("slackemu: no user group %s", id)
	}
	g.Users = slices.Clone(users)
	s.changedLocked()
	return nil
}

// SetUsergroupDisabled disables (or enables again) a user group.
func (s *Server) SetUsergroupDisabled(id string, disabled bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.usergroups[id]
	if g == nil {
		return fmt.Errorf("slackemu: no user group %s", id)
	}
	g.Disabled = disabled
	return nil
}

// SetFreePlan puts a workspace on (or off) a plan without user groups:
// usergroups.users.list then answers plan_upgrade_required.
func (s *Server) SetFreePlan(team string, free bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.freePlan[team] = free
}

// Usergroups returns the user groups of team, by id.
func (s *Server) Usergroups(team string) []Usergroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Usergroup
	for _, g := range s.usergroups {
		if g.Team == team {
			c := *g
			c.Users = slices.Clone(g.Users)
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *Server) usergroupsUsersList(r *request) (map[string]any, error) {
	// Org-wide tokens must say which workspace (Slack: missing_argument).
	if r.orgWide() {
		id := r.str("team_id")
		if id == "" {
			return nil, apiError("missing_argument")
		}
		if t := s.teams[id]; t == nil || t.EnterpriseID != r.tok.enterprise {
			return nil, apiError("team_access_not_granted")
		}
	}
	if s.freePlan[r.team.ID] {
		return nil, apiError("plan_upgrade_required")
	}
	id := r.str("usergroup")
	if id == "" {
		return nil, apiError("invalid_arguments")
	}
	g := s.usergroups[id]
	includeDisabled := r.boolArg("include_disabled")
	if g == nil || g.Team != r.team.ID || (g.Disabled && (includeDisabled == nil || !*includeDisabled)) {
		return nil, apiError("no_such_subteam")
	}
	users := slices.Clone(g.Users)
	if users == nil {
		users = []string{}
	}
	return map[string]any{"users": users}, nil
}

func (s *Server) authTest(r *request) (map[string]any, error) {
	t := r.team
	out := map[string]any{
		"url":                   "https://" + t.Domain + ".slack.com/",
		"team":                  t.Name,
		"team_id":               t.ID,
		"is_enterprise_install": r.orgWide(),
	}
	if t.EnterpriseID != "" {
		out["enterprise_id"] = t.EnterpriseID
	}
	if r.tok != nil && r.tok.kind == "user" {
		out["user_id"] = r.tok.user
		if u := s.users[r.tok.user]; u != nil {
			out["user"] = u.Name
		}
		return out, nil
	}
	out["user"] = t.BotName
	out["user_id"] = r.botUser()
	out["bot_id"] = r.botID()
	return out, nil
}

// teamInfo answers for the token's team, a team of its enterprise or a
// team it shares a channel with; others are team_not_found.
func (s *Server) teamInfo(r *request) (map[string]any, error) {
	id := r.str("team")
	if id == "" {
		id = r.team.ID
	}
	t := s.teams[id]
	if t == nil || !s.seesTeamLocked(r.team, t) {
		return nil, apiError("team_not_found")
	}
	out := map[string]any{
		"id": t.ID, "name": t.Name, "domain": t.Domain, "email_domain": "",
		"icon": map[string]any{"image_default": true},
	}
	if t.EnterpriseID != "" {
		out["enterprise_id"], out["enterprise_name"] = t.EnterpriseID, t.EnterpriseName
	}
	return map[string]any{"team": out}, nil
}

// seesTeamLocked reports whether from's tokens may look up team to.
func (s *Server) seesTeamLocked(from, to *teamState) bool {
	if from.ID == to.ID || (from.EnterpriseID != "" && from.EnterpriseID == to.EnterpriseID) {
		return true
	}
	for _, c := range s.channels {
		if seesChannel(c, from.ID) && seesChannel(c, to.ID) {
			return true
		}
	}
	return false
}

func (s *Server) usersInfo(r *request) (map[string]any, error) {
	id := r.str("user")
	if id == "" {
		return nil, apiError("user_not_found")
	}
	u := s.users[id]
	if u == nil || !s.seesUserLocked(r.team.ID, u) {
		return nil, apiError("user_not_found")
	}
	return map[string]any{"user": s.userJSONLocked(u)}, nil
}

func (s *Server) userJSONLocked(u *User) map[string]any {
	out := map[string]any{
		"id": u.ID, "team_id": u.TeamID, "name": u.Name, "real_name": u.RealName, "deleted": u.Deleted,
		"is_admin": u.IsAdmin, "is_owner": u.IsOwner, "is_primary_owner": u.IsPrimaryOwner,
		"is_restricted": u.IsRestricted, "is_ultra_restricted": u.IsUltraRestricted,
		"is_stranger": u.IsStranger, "is_bot": u.IsBot, "is_app_user": false,
		"profile": map[string]any{
			"real_name": u.RealName, "display_name": u.DisplayName,
			"real_name_normalized": u.RealName, "display_name_normalized": u.DisplayName,
			"team": u.TeamID,
		},
	}
	if u.EnterpriseID != "" {
		var teams []string
		name := ""
		for _, t := range s.enterpriseTeamsLocked(u.EnterpriseID) {
			if s.rosters[t.ID][u.ID] || u.TeamID == t.ID {
				teams = append(teams, t.ID)
			}
			name = t.EnterpriseName
		}
		out["enterprise_user"] = map[string]any{
			"id": u.ID, "enterprise_id": u.EnterpriseID, "enterprise_name": name,
			"is_admin": u.IsAdmin, "is_owner": u.IsOwner, "is_primary_owner": u.IsPrimaryOwner, "teams": teams,
		}
	}
	return out
}

func (s *Server) conversationsInfo(r *request) (map[string]any, error) {
	c := s.channelOfLocked(r, "channel")
	if c == nil {
		return nil, apiError("channel_not_found")
	}
	if err := r.needScope(readScope(c)); err != nil {
		return nil, err
	}
	ch := map[string]any{
		"id": c.ID, "name": c.Name, "is_channel": !c.IsIM() && !c.Private, "is_group": c.Private,
		"is_im": c.IsIM(), "is_private": c.Private || c.IsIM(), "is_member": c.BotMember || c.IsIM(),
		"context_team_id": c.team, "is_ext_shared": len(c.SharedTeams) > 0, "is_shared": len(c.SharedTeams) > 0,
	}
	if len(c.SharedTeams) > 0 {
		ch["shared_team_ids"] = append([]string{c.team}, c.SharedTeams...)
	}
	if c.IsIM() {
		ch["user"] = c.IMUser
	}
	return map[string]any{"channel": ch}, nil
}

// readScope / historyScope are the scopes conversations.info and
// conversations.replies need for a channel's type.
func readScope(c *channelState) string {
	switch {
	case c.IsIM():
		return "im:read"
	case c.Private:
		return "groups:read"
	}
	return "channels:read"
}

func historyScope(c *channelState) string {
	switch {
	case c.IsIM():
		return "im:history"
	case c.Private:
		return "groups:history"
	}
	return "channels:history"
}
