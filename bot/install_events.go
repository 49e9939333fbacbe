package bot

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// What envelopes say about their installation, and the app_uninstalled /
// tokens_revoked clean-up.

// authorization is one element of an events_api payload's
// authorizations (Slack sends one: an installation that can see the
// event).
type authorization struct {
	EnterpriseID        string `json:"enterprise_id"`
	TeamID              string `json:"team_id"`
	IsEnterpriseInstall bool   `json:"is_enterprise_install"`
}

// installRef of an event: the thread's team (the top-level team_id the
// bot keys sessions by), with the installation kind and enterprise from
// authorizations[0] as Slack advises, else the top level.
func (cb eventCallback) installRef(team string) installRef {
	ref := installRef{team: team, enterprise: cb.EnterpriseID}
	if len(cb.Authorizations) > 0 {
		a := cb.Authorizations[0]
		ref.org = a.IsEnterpriseInstall
		ref.enterprise = cmpOr(a.EnterpriseID, ref.enterprise)
	}
	return ref
}

// interactiveRef reads the installation fields of an interactive payload:
// team can be null on org-wide installs, then the user's team (or the
// view's) says which workspace (as Bolt does).
func interactiveRef(raw json.RawMessage) installRef {
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
	return installRef{team: cmpOr(p.Team.ID, cmpOr(p.User.TeamID, cmpOr(p.View.AppInstalledTeamID, p.View.TeamID))),
		enterprise: p.Enterprise.ID, org: p.IsEnterpriseInstall}
}

// slashRef reads the installation fields of a slash command (form values
// as JSON strings: is_enterprise_install is "true" or "false").
func slashRef(raw json.RawMessage) installRef {
	var p struct {
		TeamID              string `json:"team_id"`
		EnterpriseID        string `json:"enterprise_id"`
		IsEnterpriseInstall any    `json:"is_enterprise_install"`
	}
	_ = json.Unmarshal(raw, &p)
	org := p.IsEnterpriseInstall == true || p.IsEnterpriseInstall == "true"
	return installRef{team: p.TeamID, enterprise: p.EnterpriseID, org: org}
}

// admitEnvelope reports whether an interactive or slash envelope is for a
// workspace the bot serves; the others are acked and ignored.
func (b *Bot) admitEnvelope(ctx context.Context, ref installRef) bool {
	ok, err := b.admitInstall(ctx, ref)
	if err != nil {
		// Slack does not redeliver interactions: ack, say why in the log.
		b.log.Warn("bot: cannot look up the workspace's installation; ignoring the interaction", "team", ref.team, "err", err)
		return false
	}
	return ok
}

// lifecycleEvent is the inner event of app_uninstalled and tokens_revoked.
type lifecycleEvent struct {
	Type   string `json:"type"`
	Tokens struct {
		OAuth []string `json:"oauth"`
		Bot   []string `json:"bot"`
	} `json:"tokens"`
}

// uninstallGrace bounds the clean-up of one uninstall event.
const uninstallGrace = 10 * time.Second

// uninstalled handles app_uninstalled and tokens_revoked (with bot
// tokens; user tokens the bot does not keep): the workspace's installation
// (or its org's) is deleted and its data expires after the session grace
// (session.RetireWorkspace). The two events come in no order and both do
// the same, so either completes it. It reports whether to ack: not when
// Redis failed, so Slack redelivers.
func (b *Bot) uninstalled(ctx context.Context, cb eventCallback, ev lifecycleEvent) bool {
	if ev.Type == "tokens_revoked" && len(ev.Tokens.Bot) == 0 {
		return true // only people's tokens: nothing of ours
	}
	team := cb.TeamID
	ref := cb.installRef(team)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), uninstallGrace)
	defer cancel()
	if ev.Type == "tokens_revoked" {
		// Not every revoked bot token means the app is gone (a token
		// replaced by a re-install or a rotation, say): the workspace's
		// current token decides.
		alive, err := b.tokenAlive(ctx, team)
		if err != nil {
			b.log.Warn("bot: tokens_revoked: cannot check the workspace's token; not acking", "team", team, "err", err)
			return false
		}
		if alive {
			b.log.Info("bot: tokens_revoked, but the workspace's bot token still works; nothing removed", "team", team)
			return true
		}
	}
	var retire []string
	if team != "" {
		retire = append(retire, team)
	}
	id := ""
	if b.inst != nil {
		// The workspace's own installation, else the org-wide one the
		// event's enterprise names.
		switch e, err := b.loadInstall(ctx, team); {
		case err != nil:
			b.log.Warn("bot: uninstall: cannot read the installation; not acking", "team", team, "err", err)
			return false
		case e != nil:
			id = team
		case ref.enterprise != "":
			e, err := b.loadInstall(ctx, ref.enterprise)
			if err != nil {
				b.log.Warn("bot: uninstall: cannot read the installation; not acking", "team", team, "err", err)
				return false
			}
			if e != nil && e.orgWide() {
				id = ref.enterprise
			}
		}
	}
	if id != "" {
		teams, err := b.inst.store.DeleteInstallation(ctx, id)
		if err != nil {
			b.log.Warn("bot: uninstall: cannot delete the installation; not acking", "team", team, "err", err)
			return false
		}
		b.inst.drop(id)
		if id != team {
			retire = append(retire, id)
		}
		retire = append(retire, teams...)
		b.m.InstallEvents.WithLabelValues("uninstalled").Inc()
		b.log.Info("bot: uninstalled; the workspace's data expires after the session TTL unless it installs again",
			"team", team, "enterprise", ref.enterprise, "installation", id, "event", ev.Type)
	} else if b.opts.BotToken != "" && team == b.teamID {
		b.log.Error("bot: the app was uninstalled from the workspace of "+botTokenVar+"; that token no longer works",
			"team", team, "event", ev.Type)
	}
	var errs []error
	seen := map[string]bool{}
	for _, t := range retire {
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		errs = append(errs, b.store.RetireWorkspace(ctx, t))
		if b.opts.MCP != nil {
			b.opts.MCP.Invalidate(t)
		}
	}
	if err := errors.Join(errs...); err != nil {
		b.log.Warn("bot: uninstall: cannot schedule the workspace's clean-up; not acking", "team", team, "err", err)
		return false
	}
	return true
}

// tokenAlive asks auth.test whether the token the bot uses in team still
// works (after the one refresh a refused rotating token gets). An error
// means Slack did not say.
func (b *Bot) tokenAlive(ctx context.Context, team string) (bool, error) {
	err := b.slack.Do(ctx, slackapi.Call{Team: team, Method: slackapi.AuthTest}, func(ctx context.Context, api *slack.Client) error {
		_, err := api.AuthTestContext(ctx)
		return err
	})
	switch {
	case err == nil:
		return true, nil
	case slackapi.TokenRefused(err), errors.Is(err, errNotInstalled), tokenRejection(botTokenVar, err) != nil:
		return false, nil
	}
	return false, err
}
