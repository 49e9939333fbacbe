package slackapi

import (
	"math"
	"time"

	"github.com/bobbinbot/bobbin/session"
)

// The latency-aware margin (issue 23). The governor admits a call when
// the shared budget, on Redis's clock, has a token for it; Slack charges
// its own bucket when the request arrives. Calls admitted T apart arrive
// T apart only if each takes as long to get there. When an early call is
// held up by d (a busy machine not scheduling its goroutine, a slow Redis
// answer, a new connection) and a later one goes straight through, Slack
// sees them d closer together than the budget did: d/T tokens more at
// once than the budget allowed. The spare token (limits.go) covers d up
// to one emission interval T; under load d can be larger (0.3 s of jitter
// was a whole Tier-3 token in the time-scaled load tests).
//
// So the governor measures d from the calls' own timing, per workspace
// and method like the budgets: the lateness of a call is the time from
// asking the budget for its token to Slack's answer, the latest the
// request can have reached Slack. The spread of arrival delays is at most
// the largest lateness (the smallest is not below zero); a constant part
// of it (a long round trip) is counted too, which costs little: at
// Slack's real rates the interval T of most budgets is a second or more.
// lagMeter keeps the largest recent lateness (a peak halving every
// lagHalfLife) and the calls granted but not answered yet: one out for
// longer than the peak is late now, before any answer says so. A call
// sent but never answered (its context ended in flight, the connection
// broke) may still reach Slack: it counts, its age growing, until
// openGrantTTL forgets it. The lag is the larger of the decayed peak and
// the oldest open call's age, capped at maxLag. Each spend sends it to the
// shared budget, which keeps the largest one any replica reported
// (decaying likewise) and admits a call only with lag − T of the burst
// left over, never more than leaves one call's room: the margin shrinks
// bursts, never the rate, so nothing starves.

const (
	// lagHalfLife is how fast an observed lateness stops counting: a
	// stall raises the margin for a minute or two, not for good (the
	// shared budget decays the lags it keeps alike).
	lagHalfLife = session.LagHalfLife
	// maxLag caps the lag (the shared budget also caps the margin at all
	// but one token of the burst).
	maxLag = 2 * time.Second
	// maxOpenGrants bounds the open calls followed per method; calls
	// beyond it are not followed (their lateness is not measured).
	maxOpenGrants = 256
	// openGrantTTL forgets an open grant never answered: a request lost
	// in flight is not held against the budget for ever (it counted
	// maxLag for the last half of it).
	openGrantTTL = 2 * maxLag
)

// lagMeter measures the lateness of one workspace method's calls. The
// times it is given are the caller's (a fake clock in tests); it is
// guarded by the Governor's mutex.
type lagMeter struct {
	peak   time.Duration
	peakAt time.Time
	open   map[*Grant]time.Time // granted, not answered: when asked
}

// opened follows a call granted after asking at.
func (m *lagMeter) opened(g *Grant, at time.Time) {
	if m.open == nil {
		m.open = map[*Grant]time.Time{}
	}
	if len(m.open) < maxOpenGrants {
		m.open[g] = at
	}
}

// answered ends following g: Slack answered it at now, and its lateness
// is a sample. A grant not followed (or forgotten) is ignored.
func (m *lagMeter) answered(g *Grant, now time.Time) {
	at, ok := m.open[g]
	if !ok {
		return
	}
	delete(m.open, g)
	m.observe(now.Sub(at), now)
}

// unsent ends following g, whose request never left: it cannot reach
// Slack, and tells nothing of lateness.
func (m *lagMeter) unsent(g *Grant) { delete(m.open, g) }

// observe takes one call's lateness (asked → answered) at now.
func (m *lagMeter) observe(late time.Duration, now time.Time) {
	if late >= m.decayedPeak(now) {
		m.peak, m.peakAt = late, now
	}
}

// decayedPeak is the peak at now, halved every lagHalfLife since it was
// seen.
func (m *lagMeter) decayedPeak(now time.Time) time.Duration {
	if m.peak <= 0 {
		return 0
	}
	return time.Duration(float64(m.peak) * halvings(now.Sub(m.peakAt), lagHalfLife))
}

// lag is how late a call granted earlier may still reach Slack, at now:
// in [0, maxLag].
func (m *lagMeter) lag(now time.Time) time.Duration {
	late := m.decayedPeak(now)
	for g, at := range m.open {
		age := now.Sub(at)
		if age > openGrantTTL {
			delete(m.open, g)
			continue
		}
		late = max(late, age)
	}
	return min(max(late, 0), maxLag)
}

// halvings is 2^(−d/half): what is left of a value halved every half.
func halvings(d, half time.Duration) float64 {
	if d <= 0 {
		return 1
	}
	return math.Exp2(-float64(d) / float64(half))
}
