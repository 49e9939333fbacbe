package slackapi

import (
	"context"
	"errors"
	"log/slog"

	"github.com/slack-go/slack"
)

// Authorizer picks the Web API client of a workspace. The app's own bot
// token (Static) and the installations store are its two implementations,
// so no caller branches on the mode.
type Authorizer interface {
	// Client returns the client for team's calls. refresh, when not nil,
	// is tried once when Slack refuses the client's token (expired,
	// revoked); the call is made again if it returns nil.
	Client(ctx context.Context, team string) (api *slack.Client, refresh func(ctx context.Context) error, err error)
}

// Static is the single-token Authorizer: every workspace gets API.
type Static struct{ API *slack.Client }

// Client returns s.API; a refused token cannot be refreshed.
func (s Static) Client(context.Context, string) (*slack.Client, func(context.Context) error, error) {
	return s.API, nil, nil
}

// Client is the only path to the Web API: each call spends from the
// governor's budget and runs with the workspace's client.
type Client struct {
	gov  *Governor
	auth Authorizer
	log  *slog.Logger
}

// New returns a Client calling through gov with the clients auth picks.
func New(gov *Governor, auth Authorizer, log *slog.Logger) *Client {
	return &Client{gov: gov, auth: auth, log: log}
}

// Governor is the budget the Client spends from (for callers that size
// their own pace by it: live-reply slots, the edit interval).
func (c *Client) Governor() *Governor { return c.gov }

// Do runs fn, one Web API call of call.Method in call.Team, within the
// governor's budget, with the workspace's client. A must-deliver call that
// Slack rate-limits waits out the pause and spends again; a lossy one
// returns the error. A call whose installation token Slack refuses
// (expired, revoked) is retried once after a refresh.
func (c *Client) Do(ctx context.Context, call Call, fn func(ctx context.Context, api *slack.Client) error) error {
	refreshed := false
	for {
		api, refresh, err := c.auth.Client(ctx, call.Team)
		if err != nil {
			return err
		}
		g, err := c.gov.Acquire(ctx, call)
		if err != nil {
			return err
		}
		err = fn(WithGrant(ctx, g), api)
		c.gov.release(g) // a grant whose request never left stops counting
		if refresh != nil && !refreshed && !call.NoRefresh && TokenRefused(err) {
			refreshed = true
			c.log.Debug("bot: Slack refused the workspace's token; refreshing it once", "team", call.Team, "method", call.Method, "err", err)
			if rerr := refresh(ctx); rerr == nil {
				continue
			} else {
				c.log.Warn("bot: Slack refused a workspace's token and refreshing it failed", "team", call.Team, "method", call.Method, "err", rerr)
			}
			return err
		}
		if !IsRateLimited(err) || call.Prio == Lossy {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
	}
}

// WithGrant is ctx carrying g, so the transport counts the request as paid
// for (calls made outside Do that acquired budget themselves).
func WithGrant(ctx context.Context, g *Grant) context.Context {
	return context.WithValue(ctx, grantKey{}, g)
}

// TokenRefused reports whether err is Slack refusing the call's token
// (expired, revoked or unknown): worth one refresh attempt.
func TokenRefused(err error) bool {
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) {
		return false
	}
	switch se.Err {
	case "token_expired", "invalid_auth", "token_revoked", "not_authed":
		return true
	}
	return false
}
