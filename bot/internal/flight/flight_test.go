package flight

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

func TestDoShares(t *testing.T) {
	var g singleflight.Group
	var calls atomic.Int32
	release := make(chan struct{})
	fn := func(context.Context) (int, error) { calls.Add(1); <-release; return 7, nil }
	done := make(chan int, 2)
	for range 2 {
		go func() { v, _ := Do(context.Background(), &g, "k", time.Minute, fn); done <- v }()
	}
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	close(release)
	if a, b := <-done, <-done; a != 7 || b != 7 || calls.Load() != 1 {
		t.Errorf("got %d, %d after %d calls; want 7, 7 after one", a, b, calls.Load())
	}
}

func TestDoCallerDeadline(t *testing.T) {
	var g singleflight.Group
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := Do(ctx, &g, "k", time.Minute, func(fctx context.Context) (int, error) {
		select {
		case <-release:
		case <-fctx.Done():
		}
		return 0, fctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v; want the caller's deadline", err)
	}
}

func TestImports(t *testing.T) {
	importcheck.Forbid(t, ".", importcheck.Module, importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}
