package session

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestUsageRecordAndReport(t *testing.T) {
	s := newStore(t, Options{})
	ctx := context.Background()
	now := time.Date(2026, 3, 31, 23, 0, 0, 0, time.UTC)
	recs := []UsageRecord{
		{Channel: "C1", User: "U1", Profile: "support", Model: "m-a", InputTokens: 1000, CachedTokens: 400, OutputTokens: 100, CostMicros: 700},
		{Channel: "C1", User: "U2", Profile: "support", Model: "m-a", InputTokens: 500, OutputTokens: 50, CostMicros: 300},
		{Channel: "C2", User: "U1", Model: "m:b", InputTokens: 10, OutputTokens: 5},
	}
	for _, r := range recs {
		if err := s.RecordUsage(ctx, "T1", r, now, 72*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	// The next day (2026-04-01) is a new day and a new month.
	if err := s.RecordUsage(ctx, "T1", UsageRecord{Channel: "C1", User: "U1", Model: "m-a", InputTokens: 1, OutputTokens: 1}, now.Add(2*time.Hour), 72*time.Hour); err != nil {
		t.Fatal(err)
	}
	day, err := s.Usage(ctx, "T1", PeriodDay, now)
	if err != nil {
		t.Fatal(err)
	}
	if day.Total != (Totals{Tokens: 1665, CostMicros: 1000}) {
		t.Errorf("day total = %+v, want 1665 tokens, 1000 micros", day.Total)
	}
	if got := day.Channels["C1"]; got != (Totals{Tokens: 1650, CostMicros: 1000}) {
		t.Errorf("C1 = %+v", got)
	}
	if got := day.People["U1"]; got != (Totals{Tokens: 1115, CostMicros: 700}) {
		t.Errorf("U1 = %+v", got)
	}
	if got := day.Models["m-a"]; got != (ModelTotals{Input: 1500, Cached: 400, Output: 150, Tokens: 1650, CostMicros: 1000}) {
		t.Errorf("model m-a = %+v", got)
	}
	if _, ok := day.Models["m_b"]; !ok {
		t.Errorf("model m:b missing: %v", day.Models)
	}
	if got := day.Profiles["support"]; got.Tokens != 1650 {
		t.Errorf("profile = %+v", got)
	}
	// 2026-04-01 is another month too.
	month, err := s.Usage(ctx, "T1", PeriodMonth, now)
	if err != nil {
		t.Fatal(err)
	}
	if month.Total.Tokens != 1665 {
		t.Errorf("March total = %d", month.Total.Tokens)
	}
	// Retention: the day bucket expires after it, the month bucket a month later.
	ttl := s.rdb.TTL(ctx, s.k.usageDay("T1", now)).Val()
	if ttl <= 71*time.Hour || ttl > 72*time.Hour {
		t.Errorf("day bucket TTL = %v, want 72h", ttl)
	}
	if ttl := s.rdb.TTL(ctx, s.k.usageMonth("T1", now)).Val(); ttl <= 72*time.Hour+30*24*time.Hour {
		t.Errorf("month bucket TTL = %v, want retention + 31 days", ttl)
	}
}

func TestCheckBudget(t *testing.T) {
	s := newStore(t, Options{})
	ctx := context.Background()
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	limits := []Limit{
		{Scope: ScopeWorkspace, Period: PeriodMonth, Cost: true, Max: 1_000_000},
		{Scope: ScopePerson, Period: PeriodDay, Max: 1000},
	}
	v, err := s.CheckBudget(ctx, "T1", "C1", "U1", limits, now)
	if err != nil || v.Over != nil || v.Warn != nil {
		t.Fatalf("empty: %+v, %v", v, err)
	}
	rec := func(user string, tok int64) {
		t.Helper()
		if err := s.RecordUsage(ctx, "T1", UsageRecord{Channel: "C1", User: user, Model: "m", InputTokens: tok}, now, 72*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	rec("U1", 850)
	v, _ = s.CheckBudget(ctx, "T1", "C1", "U1", limits, now)
	if v.Warn == nil || *v.Warn != limits[1] || v.WarnUsed != 850 || v.Over != nil {
		t.Fatalf("at 85%%: %+v, want a warning about the person's daily tokens", v)
	}
	v, _ = s.CheckBudget(ctx, "T1", "C1", "U1", limits, now)
	if v.Warn != nil {
		t.Errorf("warned twice the same day: %+v", v)
	}
	if v, _ = s.CheckBudget(ctx, "T1", "C1", "U2", limits, now); v.Warn != nil || v.Over != nil {
		t.Errorf("another person: %+v", v)
	}
	rec("U1", 150)
	v, _ = s.CheckBudget(ctx, "T1", "C1", "U1", limits, now)
	if v.Over == nil || *v.Over != limits[1] || v.Used != 1000 {
		t.Fatalf("at 100%%: %+v", v)
	}
	if got, want := v.Over.String(), "your daily token budget"; got != want {
		t.Errorf("limit name %q, want %q", got, want)
	}
	if got := v.Over.Reset(now); !got.Equal(time.Date(2026, 5, 11, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("reset = %v", got)
	}
	if got := limits[0].Reset(now); !got.Equal(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("month reset = %v", got)
	}
	// The next day the person may go on.
	if v, _ = s.CheckBudget(ctx, "T1", "C1", "U1", limits, now.Add(24*time.Hour)); v.Over != nil {
		t.Errorf("next day: %+v", v)
	}
}

// TestBudgetAcrossReplicas: two stores (replicas) run calls concurrently
// near a limit, each checking before and recording after its call; the
// overshoot is at most one call per concurrent caller.
func TestBudgetAcrossReplicas(t *testing.T) {
	a := newStore(t, Options{})
	b := peer(t, a, Options{})
	ctx := context.Background()
	now := time.Now()
	limits := []Limit{{Scope: ScopeWorkspace, Period: PeriodDay, Max: 1000}}
	const per = 100
	var wg sync.WaitGroup
	for i := range 10 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for {
				v, err := s.CheckBudget(ctx, "T9", "C1", "U1", limits, now)
				if err != nil {
					t.Error(err)
					return
				}
				if v.Over != nil {
					return
				}
				if err := s.RecordUsage(ctx, "T9", UsageRecord{Channel: "C1", User: "U1", InputTokens: per}, now, 72*time.Hour); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	r, err := a.Usage(ctx, "T9", PeriodDay, now)
	if err != nil {
		t.Fatal(err)
	}
	if r.Total.Tokens < 1000 || r.Total.Tokens > 1000+10*per {
		t.Errorf("total %d tokens, want within [1000, %d] (one call over per caller at most)", r.Total.Tokens, 1000+10*per)
	}
}

func TestProfileBindings(t *testing.T) {
	s := newStore(t, Options{})
	p := peer(t, s, Options{})
	ctx := context.Background()
	v0, _ := s.WorkspaceVersion(ctx, "T1")
	if err := s.SetProfileBinding(ctx, "T1", "C1", "support"); err != nil {
		t.Fatal(err)
	}
	if v, _ := p.WorkspaceVersion(ctx, "T1"); v <= v0 {
		t.Errorf("workspace version %d after a binding, was %d", v, v0)
	}
	if got, err := p.ProfileBinding(ctx, "T1", "C1"); err != nil || got != "support" {
		t.Errorf("other replica reads %q, %v", got, err)
	}
	if got, _ := p.ProfileBinding(ctx, "T1", "C2"); got != "" {
		t.Errorf("unbound channel: %q", got)
	}
	if err := s.SetProfileBinding(ctx, "T1", "C1", ""); err != nil {
		t.Fatal(err)
	}
	if m, _ := p.ProfileBindings(ctx, "T1"); len(m) != 0 {
		t.Errorf("after clear: %v", m)
	}
}

// TestRetireExpiresUsage: an uninstalled workspace's usage (it names its
// people) expires with the rest of its data.
func TestRetireExpiresUsage(t *testing.T) {
	s := newStore(t, Options{SessionTTL: time.Hour})
	ctx := context.Background()
	now := time.Now()
	for _, at := range []time.Time{now, now.AddDate(0, 0, -40)} {
		if err := s.RecordUsage(ctx, "TR", UsageRecord{Channel: "C1", User: "U1", InputTokens: 5}, at, 90*24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RetireWorkspace(ctx, "TR"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{s.k.usageDay("TR", now), s.k.usageDay("TR", now.AddDate(0, 0, -40)), s.k.usageMonth("TR", now.AddDate(0, 0, -40))} {
		if ttl := s.rdb.TTL(ctx, k).Val(); ttl <= 0 || ttl > time.Hour {
			t.Errorf("%s TTL %v after retire, want within the grace (1h)", k, ttl)
		}
	}
}
