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
// asking the budget for its token to Slack's answer (the latest the
// request can have reached Slack). lagMeter keeps the usual lateness (a
// floor that rises slowly), the largest recent one (a peak that decays
// with a half-life), and the calls granted but not answered yet: one
// still out after longer than usual is late now, before its answer says
// so. The lag, how much later than usual a call admitted earlier may yet
// arrive, is the larger of the decayed peak and the oldest open call's
// age, less the floor, capped at maxLag. Each spend sends it to the
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
	// lagFloorRise: the floor moves 1/lagFloorRise of the way up to each
	// lateness above it (down at once), so steady lateness (a long round
	// trip) is not counted as lag.
	lagFloorRise = 32
	// maxOpenGrants bounds the open calls followed per method; calls
	// beyond it are not followed (their lateness is not measured).
	maxOpenGrants = 256
	// openGrantTTL forgets an open grant never answered (its call was
	// never sent, or its answer lost): by then it counts maxLag anyway.
	openGrantTTL = 2 * maxLag
)

// lagMeter measures the lateness of one workspace method's calls. The
// times it is given are the caller's (a fake clock in tests); it is
// guarded by the Governor's mutex.
type lagMeter struct {
	floor, peak time.Duration
	peakAt      time.Time
	seen        bool
	open        map[*Grant]time.Time // granted, not answered: when asked
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

// closed ends following g; answered says Slack answered it at now (its
// lateness is then a sample). A grant not followed is ignored.
func (m *lagMeter) closed(g *Grant, answered bool, now time.Time) {
	at, ok := m.open[g]
	if !ok {
		return
	}
	delete(m.open, g)
	if answered {
		m.observe(now.Sub(at), now)
	}
}

// observe takes one call's lateness (asked → answered) at now.
func (m *lagMeter) observe(late time.Duration, now time.Time) {
	late = max(late, 0)
	if !m.seen {
		m.seen = true
		m.floor, m.peak, m.peakAt = late, late, now
		return
	}
	if late < m.floor {
		m.floor = late
	} else {
		m.floor += (late - m.floor) / lagFloorRise
	}
	if late >= m.decayedPeak(now) {
		m.peak, m.peakAt = late, now
	}
}

// decayedPeak is the peak at now, halved toward the floor every
// lagHalfLife since it was seen.
func (m *lagMeter) decayedPeak(now time.Time) time.Duration {
	if m.peak <= m.floor {
		return m.floor
	}
	return m.floor + time.Duration(float64(m.peak-m.floor)*halvings(now.Sub(m.peakAt), lagHalfLife))
}

// lag is how much later than usual a call granted earlier may still reach
// Slack, at now: in [0, maxLag].
func (m *lagMeter) lag(now time.Time) time.Duration {
	late := time.Duration(0)
	if m.seen {
		late = m.decayedPeak(now)
	}
	for g, at := range m.open {
		age := now.Sub(at)
		if age > openGrantTTL {
			delete(m.open, g)
			continue
		}
		late = max(late, age)
	}
	return min(max(late-m.floor, 0), maxLag)
}

// halvings is 2^(−d/half): what is left of a value halved every half.
func halvings(d, half time.Duration) float64 {
	if d <= 0 {
		return 1
	}
	return math.Exp2(-float64(d) / float64(half))
}
