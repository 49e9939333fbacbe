package main

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/bobbinbot/bobbin/bot/install"
)

// OAuth installations (multi-workspace): on with SLACK_CLIENT_ID,
// SLACK_CLIENT_SECRET and PUBLIC_URL; SLACK_BOT_TOKEN then becomes
// optional (a pinned token may still serve its own workspace).

// installsOn reports whether the configuration turns installations on.
func (c config) installsOn() bool { return c.SlackClientID != "" }

// installProblems checks the installation variables; bad records a
// problem naming its variable.
func (c *config) installProblems(bad func(format string, a ...any)) {
	if !c.installsOn() {
		if c.SlackBotToken == "" {
			bad("SLACK_BOT_TOKEN is required (or set SLACK_CLIENT_ID, SLACK_CLIENT_SECRET and PUBLIC_URL to let workspaces install the app through OAuth)")
		}
		if c.SlackClientSecret != "" {
			bad("SLACK_CLIENT_SECRET is set without SLACK_CLIENT_ID")
		}
		return
	}
	if strings.TrimSpace(c.SlackClientID) != c.SlackClientID || strings.ContainsAny(c.SlackClientID, "&?#/ ") {
		bad("SLACK_CLIENT_ID must be the app's Client ID (Basic Information → App Credentials)")
	}
	if c.SlackClientSecret == "" {
		bad("SLACK_CLIENT_SECRET is required with SLACK_CLIENT_ID (Basic Information → App Credentials)")
	}
	if c.PublicURL == "" {
		bad("PUBLIC_URL is required with SLACK_CLIENT_ID: Slack redirects installs to PUBLIC_URL" + install.RedirectPath)
	}
	if c.SecretKey == "" {
		bad("SECRET_KEY is required with SLACK_CLIENT_ID: installations (bot tokens) are encrypted at rest with it")
	}
	if u, err := url.Parse(c.SlackOAuthAuthorizeURL); err != nil || !httpURL(c.SlackOAuthAuthorizeURL) || u.Fragment != "" {
		bad("SLACK_OAUTH_AUTHORIZE_URL must be an http(s) URL without fragment")
	}
}

// installOptions are the bot's installation settings (zero when off).
func (c config) installOptions() install.Options {
	if !c.installsOn() {
		return install.Options{}
	}
	return install.Options{
		ClientID:     c.SlackClientID,
		ClientSecret: c.SlackClientSecret,
		RedirectURL:  c.PublicURL + install.RedirectPath,
		AuthorizeURL: c.SlackOAuthAuthorizeURL,
	}
}

// mountInstall serves the install pages when installations are on.
func mountInstall(mux *http.ServeMux, h http.Handler) {
	if h == nil {
		return
	}
	mux.Handle("GET "+install.InstallPath, h)
	mux.Handle("GET "+install.RedirectPath, h)
}
