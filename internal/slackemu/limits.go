package slackemu

import (
	"time"
)

// Limits of the methods added for files, threads, installs, people and
// App Home, kept apart from DefaultRateLimits (ratelimit.go) so the two
// tables change independently; New merges them, DefaultRateLimits
// winning for a method both name.

// MoreRateLimits returns the built-in limits of files.info and
// views.publish (Tier 4), usergroups.users.list (Tier 2),
// oauth.v2.access, apps.event.authorizations.list, auth.revoke and the
// upload methods (Tier 4). conversations.replies is in DefaultRateLimits
// (Tier 3); Options.NonMarketplace replaces it with 1 a minute.
func MoreRateLimits() map[string]RateLimit {
	tier := func(n, burst int) RateLimit { return RateLimit{Limit: n, Window: time.Minute, Burst: burst} }
	return map[string]RateLimit{
		"files.info":                     tier(Tier4, 50),
		"usergroups.users.list":          tier(Tier2, 10),
		"views.publish":                  tier(Tier4, 50),
		"oauth.v2.access":                tier(Tier4, 50),
		"apps.event.authorizations.list": tier(Tier4, 50),
		"apps.uninstall":                 tier(Tier4, 50),
		"auth.revoke":                    tier(Tier3, 20),
		"files.getUploadURLExternal":     tier(Tier4, 50),
		"files.completeUploadExternal":   tier(Tier4, 50),
		// The agent platform and the Real-time Search API (conservative
		// bursts, as in DefaultRateLimits): sessions Tier 3; search is
		// "special" in Slack's method JSON (an older page said Tier 4),
		// taken as Tier 3; search.info Tier 2.
		"agents.sessions.setStatus": tier(Tier3, 5),
		"agents.sessions.rename":    tier(Tier3, 5),
		"assistant.search.context":  tier(Tier3, 5),
		"assistant.search.info":     tier(Tier2, 3),
	}
}

// nonMarketplaceRepliesPerMinute is conversations.replies' limit for
// commercially distributed apps outside the Marketplace (since 2025-05-29
// for new installs): 1 request a minute, 15 messages a page.
const (
	nonMarketplaceRepliesPerMinute = 1
	nonMarketplaceRepliesPage      = 15
)

// methodLimitLocked applies the method's rate limits: the non-Marketplace
// conversations.replies limit when that mode is on, else the method's
// buckets.
func (s *Server) methodLimitLocked(r *request) (time.Duration, bool) {
	if (r.method == "conversations.replies" || r.method == "conversations.history") && s.nonMarketplaceLocked(r) {
		team := "app"
		if r.team != nil {
			team = r.team.ID
		}
		window := time.Duration(float64(time.Minute) * s.opts.TimeScale)
		rate := float64(nonMarketplaceRepliesPerMinute) / window.Seconds()
		wait, ok := s.bucketLocked(r.method+"/"+team+"/non-marketplace").take(time.Now(), nonMarketplaceRepliesPerMinute, rate)
		return wait, !ok
	}
	return s.rateLimitLocked(r)
}

// SetNonMarketplace switches Options.NonMarketplace at run time.
func (s *Server) SetNonMarketplace(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.NonMarketplace = on
}

// journalLocked appends a call to the journal, keeping at most
// Options.JournalLimit entries.
func (s *Server) journalLocked(c Call) {
	s.callSeq++
	c.Seq = s.callSeq
	s.journal = appendCapped(s.journal, c, s.opts.JournalLimit)
}

// ackLogLocked appends an ack record, capped like the journal.
func (s *Server) ackLogLocked(a AckRecord) {
	s.acks = appendCapped(s.acks, a, s.opts.JournalLimit)
}

// appendCapped appends v and drops the oldest entries beyond limit (0 =
// unlimited). Dropped entries are zeroed so what they point to can be
// collected before the backing array is reallocated.
func appendCapped[T any](s []T, v T, limit int) []T {
	s = append(s, v)
	if limit <= 0 || len(s) <= limit {
		return s
	}
	n := len(s) - limit
	clear(s[:n])
	return s[n:]
}
