package session

import (
	"context"
	"testing"
	"time"
)

// BenchmarkBudgetCheckAndRecord is the metering overhead of one model
// call: the budget check before it and the usage record after it. It
// reports Redis round trips per store call: one for the check, one for
// the record (EVALSHA after the first).
func BenchmarkBudgetCheckAndRecord(b *testing.B) {
	s, rt := benchStore(b)
	ctx := context.Background()
	now := time.Now()
	limits := []Limit{
		{Scope: ScopeWorkspace, Period: PeriodMonth, Cost: true, Max: 1 << 50},
		{Scope: ScopeChannel, Period: PeriodDay, Max: 1 << 50},
		{Scope: ScopePerson, Period: PeriodDay, Max: 1 << 50},
		{Scope: ScopePerson, Period: PeriodMonth, Max: 1 << 50},
	}
	rec := UsageRecord{Channel: "C1", User: "U1", Profile: "support", Model: "gpt-4o", InputTokens: 1200, CachedTokens: 800, OutputTokens: 300, CostMicros: 4200}
	// Load the scripts once so the measured calls are EVALSHA.
	if _, err := s.CheckBudget(ctx, "TB", "C1", "U1", limits, now); err != nil {
		b.Fatal(err)
	}
	if err := s.RecordUsage(ctx, "TB", rec, now, time.Hour); err != nil {
		b.Fatal(err)
	}
	cpu := startCPU()
	rt.n.Store(0)
	b.ResetTimer()
	for range b.N {
		if _, err := s.CheckBudget(ctx, "TB", "C1", "U1", limits, now); err != nil {
			b.Fatal(err)
		}
		if err := s.RecordUsage(ctx, "TB", rec, now, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(rt.n.Load())/float64(b.N)/2, "roundtrips/call")
	cpu.report(b)
}
