package session

import (
	"strings"
	"testing"
	"time"
)

// TestVotes: one vote per person per answer (the last click wins, a
// changed value drops the reason), reasons only on a 👎 and cut to
// FeedbackReasonMax bytes, votes past FeedbackRetention trimmed at the
// next vote, and the index of voting workspaces.
func TestVotes(t *testing.T) {
	s := newStore(t, Options{})
	ctx := ctxT(t)
	team := "T" + strings.ToUpper(randomID())
	now := time.Now()
	vote := func(user, value string, at time.Time) {
		t.Helper()
		if err := s.Vote(ctx, team, Vote{Channel: "C1", MessageTS: "1.2", ThreadTS: "1.1", User: user, Value: value, At: at}); err != nil {
			t.Fatal(err)
		}
	}
	byUser := func() map[string]Vote {
		t.Helper()
		vs, err := s.VotesSince(ctx, team, now.Add(-FeedbackRetention))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]Vote{}
		for _, v := range vs {
			out[v.User] = v
		}
		if len(out) != len(vs) {
			t.Errorf("votes %+v: a person has two", vs)
		}
		return out
	}

	vote("U1", "positive", now)
	vote("U1", "negative", now)
	vote("U2", "positive", now)
	if got := byUser(); len(got) != 2 || got["U1"].Value != "negative" || got["U2"].Value != "positive" || got["U1"].ThreadTS != "1.1" {
		t.Fatalf("votes = %+v, want U1 negative, U2 positive", got)
	}
	if ok, err := s.VoteReason(ctx, team, "C1", "1.2", "U2", "not a 👎"); ok || err != nil {
		t.Errorf("reason on a 👍 = %v, %v; want refused", ok, err)
	}
	long := strings.Repeat("é", FeedbackReasonMax) // two bytes each
	if ok, err := s.VoteReason(ctx, team, "C1", "1.2", "U1", long); !ok || err != nil {
		t.Fatalf("reason on a 👎 = %v, %v", ok, err)
	}
	if r := byUser()["U1"].Reason; len(r) != FeedbackReasonMax || !strings.HasPrefix(long, r) {
		t.Errorf("stored reason of %d bytes, want %d bytes of whole characters", len(r), FeedbackReasonMax)
	}
	vote("U1", "negative", now) // the same value again keeps the reason
	if byUser()["U1"].Reason == "" {
		t.Error("a repeated 👎 dropped the reason")
	}
	vote("U1", "positive", now)
	if v := byUser()["U1"]; v.Value != "positive" || v.Reason != "" {
		t.Errorf("after a 👍: %+v, want positive without a reason", v)
	}

	// A vote older than the retention is trimmed by the next one.
	if err := s.Vote(ctx, team, Vote{Channel: "C1", MessageTS: "0.9", User: "U3", Value: "negative", At: now.Add(-FeedbackRetention - time.Hour)}); err != nil {
		t.Fatal(err)
	}
	vote("U4", "negative", now)
	all, err := s.VotesSince(ctx, team, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range all {
		if v.User == "U3" {
			t.Errorf("a vote older than the retention is still stored: %+v", v)
		}
	}
	teams, err := s.VotingTeams(ctx, now.Add(-time.Hour))
	if err != nil || len(teams) != 1 || teams[0] != team {
		t.Errorf("VotingTeams = %v, %v; want [%s]", teams, err, team)
	}
	if err := s.Vote(ctx, team, Vote{Channel: "C1", MessageTS: "1.2", User: "U1", Value: "meh"}); err == nil {
		t.Error("a vote that is neither positive nor negative was stored")
	}
}
