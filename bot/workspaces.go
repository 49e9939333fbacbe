package bot

import (
	"context"
	"errors"
	"net/http"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/install"
	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// workspaces is who serves each workspace, behind one interface so no
// feature branches on the mode: the pinned SLACK_BOT_TOKEN alone
// (single, around slackapi.Static) or OAuth installations beside it
// (*install.Installs). It is also the Authorizer of b.slack.
type workspaces interface {
	slackapi.Authorizer
	// Token is the bot token team's calls carry (for requests that are
	// not slack-go calls).
	Token(ctx context.Context, team string) (string, error)
	// Self is the bot's identity in team when an installation serves it;
	// false means the pinned token's identity.
	Self(team string) (install.Identity, bool)
	// Scopes are those granted to team's installation; nil when unknown.
	Scopes(ctx context.Context, team string) ([]string, error)
	// Admit reports whether some token serves an envelope's workspace.
	Admit(ctx context.Context, ref install.Ref) (bool, error)
	// Uninstall deletes team's installation after an uninstall event:
	// the other workspaces to retire, and whether one was removed.
	Uninstall(ctx context.Context, team, enterprise, event string) ([]string, bool, error)
	// Renew gets team a new token after Slack refused the current one
	// (refused) where a new token can help; false and no error when the
	// refusal is final.
	Renew(ctx context.Context, team string, refused error) (bool, error)
	// Handler serves the install pages; nil when there are none.
	Handler() http.Handler
}

// single is single-token mode: SLACK_BOT_TOKEN serves every event.
type single struct {
	slackapi.Static
	token string
}

func (s single) Token(context.Context, string) (string, error)  { return s.token, nil }
func (single) Self(string) (install.Identity, bool)             { return install.Identity{}, false }
func (single) Scopes(context.Context, string) ([]string, error) { return nil, nil }
func (single) Admit(context.Context, install.Ref) (bool, error) { return true, nil }
func (single) Handler() http.Handler                            { return nil }
func (single) Uninstall(context.Context, string, string, string) ([]string, bool, error) {
	return nil, false, nil
}
func (single) Renew(context.Context, string, error) (bool, error) { return false, nil }

// newWorkspaces is single-token mode, or installations when opts turn
// them on (the one place the root asks which).
func (b *Bot) newWorkspaces(opts Options) workspaces {
	if opts.Installs.ClientID == "" {
		return single{Static: slackapi.Static{API: b.api}, token: opts.BotToken}
	}
	return install.New(opts.Store, opts.Installs, install.Env{
		Governor:   b.gov,
		HTTPClient: b.httpc,
		APIURL:     opts.APIURL,
		NewClient:  b.newClient,
		Pinned: install.Pinned{API: b.api, Token: opts.BotToken,
			Workspace: func() (string, string) { return b.teamID, b.pinnedEnterprise }},
		Log:   b.log,
		Count: func(event string) { b.m.InstallEvents.WithLabelValues(event).Inc() },
	})
}

// InstallHandler serves install.InstallPath and install.RedirectPath; nil
// when installations are off.
func (b *Bot) InstallHandler() http.Handler { return b.ws.Handler() }

// identity is who the bot is in one workspace: its own messages are
// ignored and its mention stripped by these.
type identity struct{ userID, botID string }

// is reports whether a message with this bot id and user is the bot's own.
func (id identity) is(botID, user string) bool {
	return (id.botID != "" && botID == id.botID) || (id.userID != "" && user == id.userID)
}

// self is the bot's identity in team.
func (b *Bot) self(team string) identity {
	if id, ok := b.ws.Self(team); ok {
		return identity{userID: id.UserID, botID: id.BotID}
	}
	return identity{userID: b.botUserID, botID: b.botID}
}

// botToken is the token the workspace's Web API calls carry: file
// downloads send it themselves (they are not Web API calls). "" when the
// workspace has no installation and no pinned token serves it.
func (b *Bot) botToken(ctx context.Context, team string) string {
	token, err := b.ws.Token(ctx, team)
	if err != nil {
		return ""
	}
	return token
}

// admitEnvelope reports whether an interactive or slash envelope is for a
// workspace the bot serves; the others are acked and ignored.
func (b *Bot) admitEnvelope(ctx context.Context, ref install.Ref) bool {
	ok, err := b.ws.Admit(ctx, ref)
	if err != nil {
		// Slack does not redeliver interactions: ack, say why in the log.
		b.log.Warn("bot: cannot look up the workspace's installation; ignoring the interaction", "team", ref.Team, "err", err)
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
	ref := install.EventRef(team, cb.EnterpriseID, cb.Authorizations)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), install.UninstallGrace)
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
	more, removed, err := b.ws.Uninstall(ctx, team, ref.Enterprise, ev.Type)
	if err != nil {
		return false // logged by Uninstall
	}
	retire = append(retire, more...)
	if !removed && b.opts.BotToken != "" && team == b.teamID {
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
// works. A refusal no new token can help (a token that does not rotate,
// invalid_auth, account_inactive) settles it at once: no refresh, no
// warning. A rotating token that expired, or was revoked, gets one
// refresh (install.Installs.Renew: with rotation auth.revoke kills one
// token and keeps the installation, and only the refresh tells that from
// an uninstall) and one more auth.test. An error means Slack did not say.
func (b *Bot) tokenAlive(ctx context.Context, team string) (bool, error) {
	test := func() error {
		return b.slack.Do(ctx, slackapi.Call{Team: team, Method: slackapi.AuthTest, NoRefresh: true}, func(ctx context.Context, api *slack.Client) error {
			_, err := api.AuthTestContext(ctx)
			return err
		})
	}
	err := test()
	if slackapi.TokenRefused(err) {
		renewed, rerr := b.ws.Renew(ctx, team, err)
		if rerr != nil {
			return false, rerr
		}
		if renewed {
			err = test()
		}
	}
	switch {
	case err == nil:
		return true, nil
	case slackapi.TokenRefused(err), errors.Is(err, install.ErrNotInstalled), tokenRejection(botTokenVar, err) != nil:
		return false, nil
	}
	return false, err
}
