package slackemu

import (
	"time"
)

// RateLimit is a token bucket: Limit calls per Window, at most Burst at
// once (Burst 0 means Limit). PerChannel keys the bucket by channel too
// (chat.postMessage's ~1/s per channel); WorkspaceLimit, when set, adds a
// second, workspace-wide bucket of that many calls per Window. Window is
// Slack time: the server multiplies it by Options.TimeScale (0 = 1 min).
// Buckets are per method and workspace (xapp- calls share one "app" key).
type RateLimit struct {
	Limit          int
	Window         time.Duration
	Burst          int
	PerChannel     bool
	WorkspaceLimit int
	// Off disables the limit for this method.
	Off bool
}

// Slack's tiers per minute.
const (
	Tier1 = 1
	Tier2 = 20
	Tier3 = 50
	Tier4 = 100
)

// DefaultRateLimits returns the built-in limits (windows are real minutes
// before TimeScale). Slack does not publish burst sizes, so the bursts are
// the small ones a careful client must expect: chat.postMessage 60/min per
// channel (about one a second) with bursts of 3, plus 600/min per
// workspace; Tier 3 methods (chat.update, chat.delete, reactions.*,
// conversations.*, team.info) 50/min with bursts of 5
// (apps.connections.open: of 10, one per socket an app may open); Tier 2 (chat.startStream, chat.stopStream) 20/min, bursts of 3;
// Tier 4 (chat.appendStream, chat.postEphemeral, views.*, users.info,
// assistant.threads.*) 100/min, bursts of 10; auth.test and
// chat.getPermalink 500/min. Methods not listed are unlimited.
func DefaultRateLimits() map[string]RateLimit {
	tier := func(n, burst int) RateLimit { return RateLimit{Limit: n, Window: time.Minute, Burst: burst} }
	return map[string]RateLimit{
		"chat.postMessage":                      {Limit: 60, Window: time.Minute, Burst: 3, PerChannel: true, WorkspaceLimit: 600},
		"chat.update":                           tier(Tier3, 5),
		"chat.appendStream":                     tier(Tier4, 10),
		"chat.startStream":                      tier(Tier2, 3),
		"chat.stopStream":                       tier(Tier2, 3),
		"chat.postEphemeral":                    tier(Tier4, 10),
		"chat.delete":                           tier(Tier3, 5),
		"chat.getPermalink":                     tier(Tier3*10, 100),
		"views.open":                            tier(Tier4, 10),
		"views.push":                            tier(Tier4, 10),
		"views.update":                          tier(Tier4, 10),
		"users.info":                            tier(Tier4, 10),
		"assistant.threads.setStatus":           tier(Tier4, 10),
		"assistant.threads.setSuggestedPrompts": tier(Tier4, 10),
		"assistant.threads.setTitle":            tier(Tier4, 10),
		"conversations.replies":                 tier(Tier3, 5),
		"conversations.history":                 tier(Tier3, 5),
		"reactions.add":                         tier(Tier3, 5),
		"reactions.remove":                      tier(Tier3, 5),
		"conversations.info":                    tier(Tier3, 5),
		"auth.test":                             tier(Tier3*10, 100),
		"team.info":                             tier(Tier3, 5),
		"apps.connections.open":                 tier(Tier3, 10),
	}
}

type bucket struct {
	tokens float64
	last   time.Time
}

// take removes one token from the bucket (capacity burst, refill rate per
// second); it returns the wait until a token is available when empty.
func (b *bucket) take(now time.Time, burst int, rate float64) (time.Duration, bool) {
	if b.last.IsZero() {
		b.tokens = float64(burst)
	} else {
		b.tokens = min(float64(burst), b.tokens+now.Sub(b.last).Seconds()*rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return time.Duration((1 - b.tokens) / rate * float64(time.Second)), false
}

func (s *Server) limitFor(method string) (RateLimit, bool) {
	if s.opts.NoRateLimits {
		return RateLimit{}, false
	}
	l, ok := s.opts.RateLimits[method]
	if !ok {
		if s.defaults == nil {
			s.defaults = DefaultRateLimits()
		}
		l, ok = s.defaults[method]
	}
	if !ok || l.Off || l.Limit <= 0 {
		return RateLimit{}, false
	}
	if l.Window <= 0 {
		l.Window = time.Minute
	}
	l.Window = time.Duration(float64(l.Window) * s.opts.TimeScale)
	if l.Burst <= 0 {
		l.Burst = l.Limit
	}
	return l, true
}

// rateLimitLocked applies the method's buckets; it reports the wait when
// the call is limited. Buckets are only charged when all admit the call.
func (s *Server) rateLimitLocked(r *request) (time.Duration, bool) {
	l, ok := s.limitFor(r.method)
	if !ok {
		return 0, false
	}
	team := ""
	if r.team != nil {
		team = r.team.ID
	} else {
		team = "app"
	}
	now := time.Now()
	rate := float64(l.Limit) / l.Window.Seconds()
	key := r.method + "/" + team
	if l.PerChannel {
		key += "/" + r.str("channel")
	}
	b := s.bucketLocked(key)
	saved := *b
	wait, ok := b.take(now, l.Burst, rate)
	if !ok {
		return wait, true
	}
	if l.WorkspaceLimit > 0 {
		wrate := float64(l.WorkspaceLimit) / l.Window.Seconds()
		wb := s.bucketLocked(r.method + "/" + team + "/*")
		if wait, ok := wb.take(now, l.WorkspaceLimit, wrate); !ok {
			*b = saved
			return wait, true
		}
	}
	return 0, false
}

func (s *Server) bucketLocked(key string) *bucket {
	b := s.buckets[key]
	if b == nil {
		b = &bucket{}
		s.buckets[key] = b
	}
	return b
}

// SetRateLimit changes a method's limit at run time (buckets restart).
func (s *Server) SetRateLimit(method string, l RateLimit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.RateLimits == nil {
		s.opts.RateLimits = map[string]RateLimit{}
	}
	s.opts.RateLimits[method] = l
	for k := range s.buckets {
		if len(k) > len(method) && k[:len(method)+1] == method+"/" {
			delete(s.buckets, k)
		}
	}
}
