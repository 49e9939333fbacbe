package slackapi

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
)

// RateLimit is the budget of one Slack Web API method in one workspace,
// shared by every replica through Redis. Slack's limits are per method,
// workspace and app; chat.postMessage also allows only about one message a
// second per channel.
type RateLimit struct {
	// PerMinute calls sustained, at most Burst at once (Burst 0 means
	// max(1, PerMinute/10)).
	PerMinute, Burst int
	// ChannelPerMinute and ChannelBurst add a budget per channel (0: none).
	ChannelPerMinute, ChannelBurst int
	// Off means no budget: the method is called as soon as asked (a 429
	// still pauses it).
	Off bool
}

func (l RateLimit) burst() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return max(1, l.PerMinute/10)
}

func (l RateLimit) channelBurst() int {
	if l.ChannelBurst > 0 {
		return l.ChannelBurst
	}
	return max(1, l.ChannelPerMinute/20)
}

// The governor spends one token fewer than the burst it believes Slack
// has (issue 23): a call is admitted in Redis's time but reaches Slack
// a few ms later, and calls admitted together at the start of a window
// may arrive late while the next one, admitted a token later, arrives on
// time. Slack's bucket then sees them closer together than the budget
// did; the spare token absorbs that (the rates already keep a tenth back
// for the same reason). A burst of 1 keeps its one token.
func spareOne(b int) int { return max(1, b-1) }

// safeBurst and safeChannelBurst are the bursts the governor spends.
func (l RateLimit) safeBurst() int        { return spareOne(l.burst()) }
func (l RateLimit) safeChannelBurst() int { return spareOne(l.channelBurst()) }

// Slack's tiers 2 to 4 (Tier 1, 1 a minute, is for methods the bot does
// not call), per minute, with a tenth kept back: our clock and Slack's
// differ, and calls we admit a few ms apart may arrive closer together.
// Slack does not publish burst sizes; these are the small ones the
// governor is designed for (issue 11: 5 for Tier 3, 3 per channel for
// chat.postMessage).
var (
	tier2 = RateLimit{PerMinute: 18, Burst: 3}
	tier3 = RateLimit{PerMinute: 45, Burst: 5}
	tier4 = RateLimit{PerMinute: 90, Burst: 10}
)

// defaultLimitKey names the budget of methods the table does not list.
const defaultLimitKey = "*"

// DefaultRateLimits returns the built-in budgets by Slack method (see
// slack.md §4): chat.postMessage about one a second per channel (burst 3)
// under a workspace cap; chat.update, chat.delete, reactions.*,
// conversations.*, team.info and auth.test Tier 3 (chat.update's rate is
// SLACK_UPDATES_PER_MINUTE); chat.startStream, chat.stopStream and
// usergroups.users.list Tier 2; chat.appendStream, chat.postEphemeral,
// views.* (views.publish too), users.info, files.info, the upload flow
// (files.getUploadURLExternal, the upload POST, files.completeUploadExternal)
// and assistant.threads.* Tier 4.
// conversations.replies is Tier 3 for Marketplace and internal apps; a
// commercially distributed app outside the Marketplace gets 1 call a
// minute (15 messages a page): set
// SLACK_RATE_LIMITS=conversations.replies=1:1 for it. oauth.v2.access Tier 4. Key "*" is the
// budget of any other method.
func DefaultRateLimits() map[string]RateLimit {
	return map[string]RateLimit{
		defaultLimitKey:                         tier3,
		"chat.postMessage":                      {PerMinute: 540, Burst: 30, ChannelPerMinute: 55, ChannelBurst: 3},
		"chat.update":                           tier3,
		"chat.delete":                           tier3,
		"chat.postEphemeral":                    tier4,
		"chat.startStream":                      tier2,
		"chat.appendStream":                     tier4,
		"chat.stopStream":                       tier2,
		"reactions.add":                         tier3,
		"reactions.remove":                      tier3,
		"conversations.info":                    tier3,
		"conversations.replies":                 tier3,
		"conversations.history":                 tier3,
		"team.info":                             tier3,
		"auth.test":                             tier3,
		"users.info":                            tier4,
		"views.open":                            tier4,
		"views.update":                          tier4,
		"views.push":                            tier4,
		"views.publish":                         tier4,
		"assistant.threads.setStatus":           tier4,
		"assistant.threads.setSuggestedPrompts": tier4,
		"assistant.threads.setTitle":            tier4,
		"apps.connections.open":                 tier3,
		"files.info":                            tier4,
		"files.getUploadURLExternal":            tier4,
		"files.upload_url":                      tier4,
		"files.completeUploadExternal":          tier4,
		"usergroups.users.list":                 tier2,
		// slack_search (search.go): "Special" in Slack's tables.
		"assistant.search.info":    tier2,
		"assistant.search.context": tier3,
		// Installs and token refreshes ("Special" in Slack's tables;
		// Tier 4 is ample for a few a minute).
		"oauth.v2.access": tier4,
	}
}

// ParseRateLimits applies an override list (SLACK_RATE_LIMITS) to base and
// returns the result; base is not changed. Entries are separated by commas
// and applied in order:
//
//	method=N        N calls a minute, the burst unchanged
//	method=N:B      N a minute, bursts of B
//	method=off      no budget for the method
//	method@channel=N[:B]   the per-channel budget (chat.postMessage)
//
// method "*" means every method (those listed in base and any other), so
// "*=off" turns every budget off and "*=off,chat.update=50:5" keeps one.
func ParseRateLimits(s string, base map[string]RateLimit) (map[string]RateLimit, error) {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]RateLimit{}
	}
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		// Errors name the entry by position: the list is configuration,
		// and error texts never echo configuration values.
		pos := i + 1
		name, val, ok := strings.Cut(entry, "=")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if !ok || name == "" || val == "" {
			return nil, fmt.Errorf("entry %d: want method=calls-per-minute[:burst] or method=off", pos)
		}
		method, scope, scoped := strings.Cut(name, "@")
		if scoped && scope != "channel" {
			return nil, fmt.Errorf("entry %d: the only scope is @channel", pos)
		}
		if !validMethod(method) {
			return nil, fmt.Errorf("entry %d: the name is not a Slack method (like chat.update) or *", pos)
		}
		apply := func(l RateLimit) (RateLimit, error) {
			if strings.EqualFold(val, "off") {
				if scoped {
					l.ChannelPerMinute, l.ChannelBurst = 0, 0
				} else {
					l.Off = true
				}
				return l, nil
			}
			n, b, err := parseRate(val)
			if err != nil {
				return l, fmt.Errorf("entry %d (%s): %w", pos, name, err)
			}
			if scoped {
				l.ChannelPerMinute = n
				if b > 0 {
					l.ChannelBurst = b
				}
				return l, nil
			}
			l.Off, l.PerMinute = false, n
			if b > 0 {
				l.Burst = b
			}
			return l, nil
		}
		if method == defaultLimitKey {
			if _, ok := out[defaultLimitKey]; !ok {
				out[defaultLimitKey] = tier3
			}
			for m, l := range out {
				nl, err := apply(l)
				if err != nil {
					return nil, err
				}
				out[m] = nl
			}
			continue
		}
		l, ok := out[method]
		if !ok {
			l = out[defaultLimitKey]
		}
		nl, err := apply(l)
		if err != nil {
			return nil, err
		}
		out[method] = nl
	}
	return out, nil
}

// parseRate reads "N" or "N:B".
func parseRate(v string) (perMinute, burst int, err error) {
	ns, bs, hasBurst := strings.Cut(v, ":")
	perMinute, err = strconv.Atoi(strings.TrimSpace(ns))
	if err != nil || perMinute < 1 || perMinute > 1_000_000 {
		return 0, 0, fmt.Errorf("calls per minute must be a whole number from 1 to 1000000")
	}
	if hasBurst {
		burst, err = strconv.Atoi(strings.TrimSpace(bs))
		if err != nil || burst < 1 || burst > 100_000 {
			return 0, 0, fmt.Errorf("the burst must be a whole number from 1 to 100000")
		}
	}
	return perMinute, burst, nil
}

// validMethod accepts "*" and names like chat.postMessage.
func validMethod(m string) bool {
	if m == defaultLimitKey {
		return true
	}
	if m == "" || len(m) > 64 || !strings.Contains(m, ".") {
		return false
	}
	for _, c := range m {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}
