package install

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

// Scopes are the bot scopes an install asks for: exactly the ones
// manifest.yaml lists (bot/scopes_test.go keeps the two equal).
func Scopes() []string { return slackapi.RequiredScopes() }

// authorizeURL is where /slack/install sends the browser: Slack's
// authorize page with the app's client id, scopes, redirect URL and state.
func (in *Installs) authorizeURL(state string) string {
	o := in.opts
	q := url.Values{
		"client_id":    {o.ClientID},
		"scope":        {strings.Join(Scopes(), ",")},
		"redirect_uri": {o.RedirectURL},
		"state":        {state},
	}
	sep := "?"
	if strings.Contains(o.AuthorizeURL, "?") {
		sep = "&"
	}
	return o.AuthorizeURL + sep + q.Encode()
}

// Error is an install Slack refused (oauth.v2.access or auth.test
// answered an error code). Code is Slack's; Credentials says the app's
// client id or secret is wrong (an operator problem, not the visitor's).
type Error struct {
	Code        string
	Credentials bool
}

func (e *Error) Error() string {
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
		return &Error{Code: se.Err, Credentials: true}
	}
	return &Error{Code: se.Err}
}

// oauthAccess runs one oauth.v2.access call within the governor's budget
// (scope names the workspace's budget, or the app's).
func (in *Installs) oauthAccess(ctx context.Context, scope string, fn func(ctx context.Context, hc *http.Client) (*slack.OAuthV2Response, error)) (*slack.OAuthV2Response, error) {
	g, err := in.env.Governor.Acquire(ctx, slackapi.Call{Team: cmp.Or(scope, slackapi.AppScope), Method: slackapi.OAuthV2Access})
	if err != nil {
		return nil, err
	}
	return fn(slackapi.WithGrant(ctx, g), in.env.HTTPClient)
}

// complete exchanges an authorization code for the installation,
// asks auth.test who the bot is with the new token, stores the
// installation sealed and starts serving the workspace.
func (in *Installs) complete(ctx context.Context, code string) (session.Installation, error) {
	o := in.opts
	resp, err := in.oauthAccess(ctx, slackapi.AppScope, func(ctx context.Context, hc *http.Client) (*slack.OAuthV2Response, error) {
		return slack.GetOAuthV2ResponseContext(ctx, hc, o.ClientID, o.ClientSecret, code, o.RedirectURL, slack.OAuthOptionAPIURL(in.env.APIURL))
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
	api := in.env.NewClient(inst.BotToken)
	g, err := in.env.Governor.Acquire(ctx, slackapi.Call{Team: inst.ID(), Method: slackapi.AuthTest})
	if err != nil {
		return session.Installation{}, err
	}
	id, err := api.AuthTestContext(slackapi.WithGrant(ctx, g))
	if err != nil {
		return session.Installation{}, fmt.Errorf("auth.test with the new token: %w", installError(err))
	}
	inst.BotID, inst.BotUserID = id.BotID, cmp.Or(inst.BotUserID, id.UserID)
	if prev, err := in.store.Installation(ctx, inst.ID()); err == nil {
		inst.Installed = prev.Installed // a re-install keeps the first date
	}
	if err := in.store.PutInstallation(ctx, inst); err != nil {
		return session.Installation{}, fmt.Errorf("storing the installation: %w", err)
	}
	in.put(inst)
	in.env.Count("installed")
	in.env.Log.Info("bot: installed", "team", inst.TeamID, "enterprise", inst.EnterpriseID, "org_wide", inst.OrgWide,
		"installer", inst.InstallerID, "bot_user", inst.BotUserID, "rotating", inst.Rotating())
	if missing := slackapi.MissingScopes(strings.Join(inst.Scopes, ","), slackapi.RequiredScopes()); len(missing) > 0 {
		in.env.Log.Warn("bot: the installation lacks scopes the bot uses", "team", inst.TeamID, "missing", strings.Join(missing, ","))
	}
	return inst, nil
}

// refreshToken spends inst's refresh token (oauth.v2.access,
// grant_type=refresh_token) and returns inst with the new pair. The caller
// holds the installation's lock.
func (in *Installs) refreshToken(ctx context.Context, inst session.Installation) (session.Installation, error) {
	o := in.opts
	resp, err := in.oauthAccess(ctx, inst.ID(), func(ctx context.Context, hc *http.Client) (*slack.OAuthV2Response, error) {
		return slack.RefreshOAuthV2TokenContext(ctx, hc, o.ClientID, o.ClientSecret, inst.RefreshToken, slack.OAuthOptionAPIURL(in.env.APIURL))
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
