package slackapi

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestGovernorKeepsOneTokenSpare: at the start of a window the governor
// admits one call fewer than the burst it believes Slack has, so calls
// admitted together that reach Slack late never meet an empty bucket
// (issue 23); a burst of 1 keeps its token. Locally (Redis away) too.
func TestGovernorKeepsOneTokenSpare(t *testing.T) {
	leakCheck(t)
	for _, tc := range []struct {
		name  string
		store Budget
		burst int
		want  int
	}{
		{"shared burst 5", testStore(t), 5, 4},
		{"shared burst 1", testStore(t), 1, 1},
		{"local burst 5", nil, 5, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := testGovernor(t, tc.store, map[string]RateLimit{"test.Method": {PerMinute: 1, Burst: tc.burst}})
			call := Call{Team: testTeam(), Method: "test.Method"}
			got := 0
			for range tc.burst + 1 {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				_, err := g.Acquire(ctx, call)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got++
			}
			if got != tc.want {
				t.Errorf("burst %d: %d calls admitted at once, want %d", tc.burst, got, tc.want)
			}
		})
	}
}
