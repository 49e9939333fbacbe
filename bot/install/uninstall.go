package install

import (
	"context"
	"time"
)

// The installation side of app_uninstalled and tokens_revoked: the
// root decides whether the event means the app is gone (tokens_revoked
// with a dead token) and retires the workspaces' data; Uninstall deletes
// the installation that served the workspace.

// UninstallGrace bounds the clean-up of one uninstall event.
const UninstallGrace = 10 * time.Second

// Uninstall deletes the installation serving team: its own, else the
// org-wide one enterprise names. It returns the other workspaces whose
// data to retire with team (the org's id and the teams it served) and
// whether an installation was removed. An error (logged here) means Redis
// failed: the event is not acked, so Slack redelivers it. event names the
// lifecycle event for the log.
func (in *Installs) Uninstall(ctx context.Context, team, enterprise, event string) (retire []string, removed bool, err error) {
	// The workspace's own installation, else the org-wide one the event's
	// enterprise names.
	id := ""
	switch e, err := in.load(ctx, team); {
	case err != nil:
		in.env.Log.Warn("bot: uninstall: cannot read the installation; not acking", "team", team, "err", err)
		return nil, false, err
	case e != nil:
		id = team
	case enterprise != "":
		e, err := in.load(ctx, enterprise)
		if err != nil {
			in.env.Log.Warn("bot: uninstall: cannot read the installation; not acking", "team", team, "err", err)
			return nil, false, err
		}
		if e != nil && e.orgWide() {
			id = enterprise
		}
	}
	if id == "" {
		return nil, false, nil
	}
	teams, err := in.store.DeleteInstallation(ctx, id)
	if err != nil {
		in.env.Log.Warn("bot: uninstall: cannot delete the installation; not acking", "team", team, "err", err)
		return nil, false, err
	}
	in.drop(id)
	if id != team {
		retire = append(retire, id)
	}
	retire = append(retire, teams...)
	in.env.Count("uninstalled")
	in.env.Log.Info("bot: uninstalled; the workspace's data expires after the session TTL unless it installs again",
		"team", team, "enterprise", enterprise, "installation", id, "event", event)
	return retire, true, nil
}
