package session

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bobbinbot/bobbin/provider"
)

// roundTrips counts commands and pipelines sent to Redis (a pipeline, or a
// script's EVALSHA, is one round trip).
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { r.n.Add(1); return next(ctx, cmd) }
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { r.n.Add(1); return next(ctx, cmds) }
}

// cpuMeter reports the process CPU time (user + system) per operation: on
// a shared, loaded machine wall time mostly measures the neighbours. The
// Redis server's own CPU is not included.
type cpuMeter struct{ start time.Duration }

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuMeter { return cpuMeter{cpuNow()} }

func (c cpuMeter) report(b *testing.B) {
	b.ReportMetric(float64(cpuNow()-c.start)/float64(b.N), "cpu-ns/op")
}

func benchStore(b *testing.B) (*Store, *roundTrips) {
	s := newStore(b, Options{})
	rt := &roundTrips{}
	s.rdb.AddHook(rt)
	return s, rt
}

func benchMessage(i int) provider.Message {
	return provider.Message{Role: provider.RoleAssistant, Content: fmt.Sprintf("message %d: ", i) + strings.Repeat("lorem ipsum dolor ", 15),
		ToolCalls: []provider.ToolCall{{ID: fmt.Sprintf("call_%d", i), Name: "search", Arguments: `{"query":"bobbin"}`}}}
}

func seed(b *testing.B, s *Store, k ThreadKey, n int) *Lease {
	ctx := context.Background()
	l, err := s.Acquire(ctx, k, "bench")
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]provider.Message, n)
	for i := range msgs {
		msgs[i] = benchMessage(i)
	}
	if err := s.Replace(ctx, k, l.Token(), msgs); err != nil {
		b.Fatal(err)
	}
	return l
}

func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
			s, rt := benchStore(b)
			k := testThread()
			l := seed(b, s, k, n)
			ctx := context.Background()
			m := benchMessage(0)
			rt.n.Store(0)
			cpu := startCPU()
			for b.Loop() {
				if err := s.Append(ctx, k, l.Token(), m); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
			cpu.report(b)
		})
	}
}

func BenchmarkLoad1000(b *testing.B) {
	s, rt := benchStore(b)
	k := testThread()
	seed(b, s, k, 1000)
	ctx := context.Background()
	rt.n.Store(0)
	cpu := startCPU()
	for b.Loop() {
		_, msgs, err := s.Load(ctx, k)
		if err != nil || len(msgs) != 1000 {
			b.Fatal(len(msgs), err)
		}
	}
	b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
	cpu.report(b)
}

func BenchmarkAcquireRelease(b *testing.B) {
	s, rt := benchStore(b)
	k := testThread()
	ctx := context.Background()
	rt.n.Store(0)
	cpu := startCPU()
	for b.Loop() {
		l, err := s.Acquire(ctx, k, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
	cpu.report(b)
}

// BenchmarkDecode1000 isolates the JSON decoding share of Load.
func BenchmarkDecode1000(b *testing.B) {
	items := make([]string, 1000)
	for i := range items {
		j, _ := json.Marshal(benchMessage(i))
		items[i] = string(j)
	}
	cpu := startCPU()
	for b.Loop() {
		if _, err := decodeMessages("k", items); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}
