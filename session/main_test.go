package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runLeaseChild())
	}
	// Keep go-redis's dial-failure lines (TestRedisUnavailable) out of the
	// test output.
	RouteRedisLogs(slog.New(slog.DiscardHandler))
	// go-redis probes a dead server from one goroutine that notices a closed
	// pool only after its one-second sleep (TestRedisUnavailable).
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// clusterURL, while TestCluster runs, points every store the tests open at
// a throwaway Redis Cluster.
var clusterURL string

// testURL is REDIS_URL when set; otherwise tests use the embedded Redis.
func testURL(t testing.TB) string {
	if clusterURL != "" {
		return clusterURL
	}
	u := os.Getenv("REDIS_URL")
	if u == "" {
		t.Log("REDIS_URL unset: testing against the in-process Redis (miniredis)")
	}
	return u
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newStore opens a store under a random prefix and, at cleanup, deletes
// every key under it (never FLUSHDB: other packages share the server).
func newStore(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.URL == "" {
		opts.URL = testURL(t)
	}
	if opts.Prefix == "" {
		opts.Prefix = "test-" + randomID()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, k := range scanKeys(t, s) {
			s.rdb.Del(ctx, k)
		}
		s.Close()
	})
	return s
}

// peer opens a second client of the same Redis and prefix (another
// replica).
func peer(t testing.TB, s *Store, opts Options) *Store {
	t.Helper()
	opts.URL = s.url()
	opts.Prefix = s.opt.Prefix
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("Open peer: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// url is a URL other clients can use to reach s's Redis.
func (s *Store) url() string {
	if s.mini != nil {
		return "redis://" + s.mini.Addr() + "/0"
	}
	return s.opt.URL
}

// scanKeys lists the keys under s's prefix (on every primary of a cluster).
func scanKeys(t testing.TB, s *Store) []string {
	t.Helper()
	ctx := context.Background()
	var (
		mu  sync.Mutex
		out []string
	)
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, s.opt.Prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			if strings.HasPrefix(iter.Val(), s.opt.Prefix+":") {
				mu.Lock()
				out = append(out, iter.Val())
				mu.Unlock()
			}
		}
		return iter.Err()
	}
	var err error
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	}
	if err != nil {
		t.Errorf("scan: %v", err)
	}
	return out
}

func testThread() ThreadKey {
	return ThreadKey{Team: "T" + strings.ToUpper(randomID()), Channel: "C0123", ThreadTS: "1700000000.000100"}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// waitGone polls there (whether an entry is still there) until the
// entry is gone, failing the test after within.
func waitGone(t testing.TB, what string, within time.Duration, there func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, err := there()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never expired", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
