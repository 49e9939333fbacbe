package install

import (
	"cmp"
	"encoding/json"
)

// What envelopes say about their installation.

// Authorization is one element of an events_api payload's
// authorizations (Slack sends one: an installation that can see the
// event).
type Authorization struct {
	EnterpriseID        string `json:"enterprise_id"`
	TeamID              string `json:"team_id"`
	IsEnterpriseInstall bool   `json:"is_enterprise_install"`
}

// EventRef is the Ref of an event: the thread's team (the top-level
// team_id the bot keys sessions by), with the installation kind and
// enterprise from authorizations[0] as Slack advises, else the top level
// (enterprise).
func EventRef(team, enterprise string, auths []Authorization) Ref {
	ref := Ref{Team: team, Enterprise: enterprise}
	if len(auths) > 0 {
		a := auths[0]
		ref.Org = a.IsEnterpriseInstall
		ref.Enterprise = cmp.Or(a.EnterpriseID, ref.Enterprise)
	}
	return ref
}

// InteractiveRef reads the installation fields of an interactive payload:
// team can be null on org-wide installs, then the user's team (or the
// view's) says which workspace (as Bolt does).
func InteractiveRef(raw json.RawMessage) Ref {
	var p struct {
		Team struct {
			ID string `json:"id"`
		} `json:"team"`
		User struct {
			TeamID string `json:"team_id"`
		} `json:"user"`
		Enterprise struct {
			ID string `json:"id"`
		} `json:"enterprise"`
		IsEnterpriseInstall bool `json:"is_enterprise_install"`
		View                struct {
			TeamID             string `json:"team_id"`
			AppInstalledTeamID string `json:"app_installed_team_id"`
		} `json:"view"`
	}
	_ = json.Unmarshal(raw, &p) // a payload that does not decode is refused later
	return Ref{Team: cmp.Or(p.Team.ID, p.User.TeamID, p.View.AppInstalledTeamID, p.View.TeamID),
		Enterprise: p.Enterprise.ID, Org: p.IsEnterpriseInstall}
}

// SlashRef reads the installation fields of a slash command (form values
// as JSON strings: is_enterprise_install is "true" or "false").
func SlashRef(raw json.RawMessage) Ref {
	var p struct {
		TeamID              string `json:"team_id"`
		EnterpriseID        string `json:"enterprise_id"`
		IsEnterpriseInstall any    `json:"is_enterprise_install"`
	}
	_ = json.Unmarshal(raw, &p)
	org := p.IsEnterpriseInstall == true || p.IsEnterpriseInstall == "true"
	return Ref{Team: p.TeamID, Enterprise: p.EnterpriseID, Org: org}
}
