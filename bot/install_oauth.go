package bot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// The Slack side of installing: the authorize URL, the code exchange
// (oauth.v2.access, then auth.test with the new token for the bot's id)
// and the refresh grant of token rotation. oauth.v2.access is a slack-go
// package function, not a *slack.Client method; it still goes through the
// governor (its budget is the app's, "Special" in Slack's tables).

// InstallScopes are the bot scopes an install asks for: exactly the ones
// manifest.yaml lists (scopes_test.go keeps the two equal).
func InstallScopes() []string { return slackapi.RequiredScopes() }

// authorizeURL is where /slack/install sends the browser: Slack's
// authorize page with the app's client id, scopes, redirect URL and state.
func (b *Bot) authorizeURL(state string) string {
	o := b.inst.opts
	q := url.Values{
		"client_id":    {o.ClientID},
		"scope":        {strings.Join(InstallScopes(), ",")},
		"redirect_uri": {o.RedirectURL},
		"state":        {state},
	}
	sep := "?"
	if strings.Contains(o.AuthorizeURL, "?") {
		sep = "&"
	}
	return o.AuthorizeURL + sep + q.Encode()
}

// InstallError is an install Slack refused (oauth.v2.access or auth.test
// answered an error code). Code is Slack's; Credentials says the app's
// client id or secret is wrong (an operator problem, not the visitor's).
type InstallError struct {
	Code        string
	Credentials bool
}

func (e *InstallError) Error() string {
	if e.Code == "bad_redirect_uri" {
		return "Slack refused the redirect URL (bad_redirect_uri): the app's Redirect URLs must include PUBLIC_URL/slack/oauth_redirect"
	}
	if e.Credentials {
		return "Slack refused the app's credentials (" + e.Code + "): check SLACK_CLIENT_ID and SLACK_CLIENT_SECRET"
	}
	return "Slack refused the installation (" + e.Code + ")"
}

// installError classifies an oauth.v2.access failure.
func installError(err error) error {
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err == "" {
		return err
	}
	switch se.Err {
	case "invalid_client_id", "bad_client_secret", "invalid_client", "bad_redirect_uri", "oauth_authorization_url_mismatch":
		return &InstallError{Code: se.Err, Credentials: true}
	}
	return &InstallError{Code: se.Err}
}

// oauthAccess runs one oauth.v2.access call within the governor's budget
// (scope names the workspace's budget, or the app's).
func (b *Bot) oauthAccess(ctx context.Context, scope string, fn func(ctx context.Context, hc *http.Client) (*slack.OAuthV2Response, error)) (*slack.OAuthV2Response, error) {
	g, err := b.gov.Acquire(ctx, slackapi.Call{Team: cmp.Or(scope, slackapi.AppScope), Method: slackapi.OAuthV2Access})
	if err != nil {
		return nil, err
	}
	return fn(slackapi.WithGrant(ctx, g), b.httpc)
}

// completeInstall exchanges an authorization code for the installation,
// asks auth.test who the bot is with the new token, stores the
// installation sealed and starts serving the workspace.
func (b *Bot) completeInstall(ctx context.Context, code string) (session.Installation, error) {
	o := b.inst.opts
	resp, err := b.oauthAccess(ctx, slackapi.AppScope, func(ctx context.Context, hc *http.Client) (*slack.OAuthV2Response, error) {
		return slack.GetOAuthV2ResponseContext(ctx, hc, o.ClientID, o.ClientSecret, code, o.RedirectURL, slack.OAuthOptionAPIURL(b.opts.APIURL))
	})
	if err != nil {
		return session.Installation{}, fmt.Errorf("oauth.v2.access: %w", installError(err))
	}
	if resp.AccessToken == "" || resp.TokenType != "bot" && resp.TokenType != "" {
		return session.Installation{}, errors.New("oauth.v2.access: the answer carries no bot token")
	}
	now := time.Now().UTC()
	inst := session.Installation{
		TeamID: resp.Team.ID, TeamName: resp.Team.Name, EnterpriseID: resp.Enterprise.ID, EnterpriseName: resp.Enterprise.Name,
		OrgWide: resp.IsEnterpriseInstall, AppID: resp.AppID, BotToken: resp.AccessToken, BotUserID: resp.BotUserID,
		Scopes: splitScopes(resp.Scope), InstallerID: resp.AuthedUser.ID, IssuedAt: now,
	}
	if inst.OrgWide {
		inst.TeamID, inst.TeamName = "", "" // Slack sends team:null
	}
	if resp.RefreshToken != "" && resp.ExpiresIn > 0 {
		inst.RefreshToken, inst.ExpiresAt = resp.RefreshToken, now.Add(time.Duration(resp.ExpiresIn)*time.Second)
	}
	if !validID(inst.ID()) {
		return session.Installation{}, errors.New("oauth.v2.access: the answer names no workspace")
	}
	// auth.test with the new token: the bot id (oauth.v2.access has only
	// the bot user) and a check that the token works.
	api := b.newClient(inst.BotToken)
	g, err := b.gov.Acquire(ctx, slackapi.Call{Team: inst.ID(), Method: slackapi.AuthTest})
	if err != nil {
		return session.Installation{}, err
	}
	id, err := api.AuthTestContext(slackapi.WithGrant(ctx, g))
	if err != nil {
		return session.Installation{}, fmt.Errorf("auth.test with the new token: %w", installError(err))
	}
	inst.BotID, inst.BotUserID = id.BotID, cmp.Or(inst.BotUserID, id.UserID)
	if prev, err := b.inst.store.Installation(ctx, inst.ID()); err == nil {
		inst.Installed = prev.Installed // a re-install keeps the first date
	}
	if err := b.inst.store.PutInstallation(ctx, inst); err != nil {
		return session.Installation{}, fmt.Errorf("storing the installation: %w", err)
	}
	b.putInstall(inst)
	b.m.InstallEvents.WithLabelValues("installed").Inc()
	b.log.Info("bot: installed", "team", inst.TeamID, "enterprise", inst.EnterpriseID, "org_wide", inst.OrgWide,
		"installer", inst.InstallerID, "bot_user", inst.BotUserID, "rotating", inst.Rotating())
	if missing := slackapi.MissingScopes(strings.Join(inst.Scopes, ","), slackapi.RequiredScopes()); len(missing) > 0 {
		b.log.Warn("bot: the installation lacks scopes the bot uses", "team", inst.TeamID, "missing", strings.Join(missing, ","))
	}
	return inst, nil
}

// refreshToken spends inst's refresh token (oauth.v2.access,
// grant_type=refresh_token) and returns inst with the new pair. The caller
// holds the installation's lock.
func (b *Bot) refreshToken(ctx context.Context, inst session.Installation) (session.Installation, error) {
	o := b.inst.opts
	resp, err := b.oauthAccess(ctx, inst.ID(), func(ctx context.Context, hc *http.Client) (*slack.OAuthV2Response, error) {
		return slack.RefreshOAuthV2TokenContext(ctx, hc, o.ClientID, o.ClientSecret, inst.RefreshToken, slack.OAuthOptionAPIURL(b.opts.APIURL))
	})
	if err != nil {
		return inst, fmt.Errorf("bot: refreshing the token of %s: oauth.v2.access: %w", inst.ID(), installError(err))
	}
	if resp.AccessToken == "" || resp.RefreshToken == "" || resp.ExpiresIn <= 0 {
		return inst, fmt.Errorf("bot: refreshing the token of %s: the answer lacks a token, refresh token or expiry", inst.ID())
	}
	now := time.Now().UTC()
	inst.BotToken, inst.RefreshToken = resp.AccessToken, resp.RefreshToken
	inst.IssuedAt, inst.ExpiresAt = now, now.Add(time.Duration(resp.ExpiresIn)*time.Second)
	if s := splitScopes(resp.Scope); len(s) > 0 {
		inst.Scopes = s
	}
	return inst, nil
}

func splitScopes(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// validID reports whether id can name an installation (a Slack team or
// enterprise id).
func validID(id string) bool {
	return id != "" && len(id) <= 64 && !strings.ContainsAny(id, ":{}* \t\r\n")
}
