package bot

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/internal/pause"
	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// TokenError means Slack refused one of the bot's tokens: nothing will work
// until the operator fixes the variable it names, so start-up fails with it.
type TokenError struct {
	// Var is the environment variable holding the token: SLACK_BOT_TOKEN
	// or SLACK_APP_TOKEN.
	Var string
	// Code is Slack's error code (invalid_auth, token_revoked, …) or the
	// HTTP status.
	Code string
}

func (e *TokenError) Error() string {
	msg := e.Var + " was rejected by Slack (" + e.Code + ")"
	if e.Var == appTokenVar {
		msg += ": it must be an app-level token (xapp-) of this app with the connections:write scope, and Socket Mode must be on"
	}
	return msg
}

const (
	botTokenVar = "SLACK_BOT_TOKEN"
	appTokenVar = "SLACK_APP_TOKEN"
)

// transientCodes are Slack error codes that say "try again", not "this
// token is wrong".
var transientCodes = map[string]bool{
	"ratelimited": true, "internal_error": true, "fatal_error": true,
	"service_unavailable": true, "request_timeout": true,
}

// tokenRejection returns the TokenError for err when it is Slack refusing
// the token in variable v, nil when err is something to retry (network,
// 5xx, 429).
func tokenRejection(v string, err error) *TokenError {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && se.Err != "" && !transientCodes[se.Err] {
		return &TokenError{Var: v, Code: se.Err}
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) && (sc.Code == http.StatusUnauthorized || sc.Code == http.StatusForbidden || sc.Code == http.StatusNotFound) {
		return &TokenError{Var: v, Code: fmt.Sprintf("HTTP %d", sc.Code)}
	}
	// socketmode reports fatal auth errors by their bare code.
	switch err.Error() {
	case "invalid_auth", "account_inactive", "not_authed", "token_revoked":
		return &TokenError{Var: v, Code: err.Error()}
	}
	return nil
}

// Authenticate checks both tokens with Slack before the bot serves: the
// bot token with auth.test (which also tells the bot who it is) and the app
// token with apps.connections.open (the socket URL it returns is not used).
// A token Slack rejects is a *TokenError; anything else (network, Slack
// errors that mean "later") is retried with backoff until ctx ends. Run
// calls it when the caller did not.
func (b *Bot) Authenticate(ctx context.Context) error {
	if b.authed.Load() {
		return nil
	}
	// Without SLACK_BOT_TOKEN only installations are served; their tokens
	// were checked when they were installed and are checked on use.
	id := &slack.AuthTestResponse{}
	if b.opts.BotToken != "" {
		if err := b.untilAnswered(ctx, slackapi.AuthTest, func() (err error) {
			id, err = b.api.AuthTestContext(ctx)
			if err == nil {
				return nil
			}
			if te := tokenRejection(botTokenVar, err); te != nil {
				return te
			}
			return err
		}); err != nil {
			return err
		}
	}
	if err := b.untilAnswered(ctx, slackapi.AppsConnectionsOpen, func() error {
		_, _, err := b.api.StartSocketModeContext(ctx)
		if err == nil {
			return nil
		}
		if te := tokenRejection(appTokenVar, err); te != nil {
			return te
		}
		return err
	}); err != nil {
		return err
	}
	b.botUserID, b.botID, b.teamID, b.pinnedEnterprise = id.UserID, id.BotID, id.TeamID, id.EnterpriseID
	b.authed.Store(true)
	if b.opts.BotToken == "" {
		b.log.Info("bot: authenticated the app token; serving installed workspaces only (no "+botTokenVar+")", "replica", b.opts.ReplicaID)
		return nil
	}
	b.log.Info("bot: authenticated", "team", id.TeamID, "bot_user", id.UserID, "replica", b.opts.ReplicaID,
		"installations", b.opts.Installs.ClientID != "")
	// The token works, so the workspace has the app: data an uninstall
	// had set to expire is kept again.
	if id.TeamID != "" {
		if err := b.store.RestoreWorkspace(ctx, id.TeamID); err != nil {
			b.log.Warn("bot: cannot check whether the workspace's data was set to expire", "team", id.TeamID, "err", err)
		}
	}
	if missing := slackapi.MissingScopes(id.Header.Get("X-OAuth-Scopes"), slackapi.RequiredScopes()); len(missing) > 0 {
		b.log.Warn("bot: the bot token lacks scopes the bot uses; update the app from manifest.yaml and reinstall it",
			"missing", strings.Join(missing, ","))
	}
	return nil
}

// untilAnswered runs call until it succeeds, fails with a *TokenError, or
// ctx ends, waiting 1 s doubling to 30 s between attempts.
func (b *Bot) untilAnswered(ctx context.Context, method string, call func() error) error {
	backoff := time.Second
	for {
		err := call()
		var te *TokenError
		if err == nil || errors.As(err, &te) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", method, context.Cause(ctx))
		}
		wait := backoff
		var rl *slack.RateLimitedError
		if errors.As(err, &rl) {
			wait = max(wait, rl.RetryAfter)
		}
		b.health.fail("Slack did not answer "+method+" at start-up: "+err.Error(), false, 0) // for /readyz
		b.log.Warn("bot: Slack did not answer at start-up; retrying", "method", method, "err", err, "backoff", wait)
		if !pause.Sleep(ctx, wait) {
			return fmt.Errorf("%s: %w", method, context.Cause(ctx))
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// socketHealth is why this replica has no socket, for /readyz and the log.
// A reason the operator must act on (a rejected app token, Socket Mode
// turned off) is sticky: it stays until a socket opens again, and is logged
// at ERROR once rather than on every retry.
type socketHealth struct {
	mu     sync.Mutex
	reason string
	sticky bool
	logged string
	// stickyAt is the dial count when the sticky reason was recorded: only
	// a socket dialed after it clears the reason (a hello of the closed
	// socket may still be queued behind the close that set it).
	stickyAt uint64
}

// fail records reason; it reports whether the reason is new and sticky
// (the caller logs it at ERROR).
func (h *socketHealth) fail(reason string, sticky bool, dials uint64) (logIt bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sticky && !sticky {
		return false // a retry's transient error does not hide the cause
	}
	h.reason, h.sticky, h.stickyAt = reason, sticky, dials
	if sticky && h.logged != reason {
		h.logged = reason
		return true
	}
	return false
}

// ok clears the reason: the socket of dial number dial is open. A sticky
// reason recorded after that dial stays.
func (h *socketHealth) ok(dial uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sticky && dial <= h.stickyAt {
		return
	}
	h.reason, h.sticky, h.logged, h.stickyAt = "", false, "", 0
}

func (h *socketHealth) why() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reason
}

// socketFailed records why a socket could not open or was closed, logging
// reasons the operator must act on at ERROR once.
func (b *Bot) socketFailed(conn int, err error) {
	if te := tokenRejection(appTokenVar, err); te != nil {
		if b.health.fail(te.Error(), true, b.dials.Load()) {
			b.log.Error("bot: "+te.Error()+"; this replica stays unready and retries every few minutes", "conn", conn)
		}
		return
	}
	b.health.fail("cannot open a socket-mode connection: "+err.Error(), false, 0)
}

// linkDisabled is Slack closing a socket because Socket Mode was turned off.
func (b *Bot) linkDisabled() {
	const reason = "Slack closed the socket: Socket Mode is turned off for the app of " + appTokenVar + " (link_disabled); turn it on under Settings → Socket Mode"
	if b.health.fail(reason, true, b.dials.Load()) {
		b.log.Error("bot: " + reason)
	}
}
