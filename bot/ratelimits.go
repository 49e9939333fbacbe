package bot

import "github.com/bobbinbot/bobbin/bot/slackapi"

// RateLimit is a Web API method's budget (slackapi.RateLimit), kept here
// for Options.RateLimits and SLACK_RATE_LIMITS parsing in cmd/bot.
type RateLimit = slackapi.RateLimit

// DefaultRateLimits is slackapi.DefaultRateLimits.
func DefaultRateLimits() map[string]RateLimit { return slackapi.DefaultRateLimits() }

// ParseRateLimits is slackapi.ParseRateLimits.
func ParseRateLimits(s string, base map[string]RateLimit) (map[string]RateLimit, error) {
	return slackapi.ParseRateLimits(s, base)
}
