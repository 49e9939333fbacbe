package jobs

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

func TestImports(t *testing.T) {
	importcheck.Forbid(t, ".", importcheck.Module, importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}

// syncBuf is a log sink jobs may write from their goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestGoOutlivesCancelAndCloseWaits(t *testing.T) {
	r := New(slog.New(slog.DiscardHandler), time.Minute)
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	release := make(chan struct{})
	var got struct {
		val    any
		err    error
		ranFor bool
	}
	if !r.Go(ctx, "a test job", func(jctx context.Context) {
		<-release
		got.val, got.err, got.ranFor = jctx.Value(key{}), jctx.Err(), true
	}) {
		t.Fatal("Go refused a job before Close")
	}
	cancel() // the request ends; the job goes on
	closed := make(chan struct{})
	go func() { r.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a job was running")
	default:
	}
	close(release)
	<-closed
	if !got.ranFor || got.val != "v" || got.err != nil {
		t.Errorf("job saw value %v, err %v (ran %v); want the request's values and a live context", got.val, got.err, got.ranFor)
	}
	if r.Go(context.Background(), "late", func(context.Context) { t.Error("a job ran after Close") }) {
		t.Error("Go accepted a job after Close")
	}
	ran := false
	r.Do(context.Background(), "late inline", func(context.Context) { ran = true })
	if !ran {
		t.Error("Do after Close did not run the job inline")
	}
	r.Close() // again: no-op
}

func TestPanicIsLogged(t *testing.T) {
	var buf syncBuf
	r := New(slog.New(slog.NewTextHandler(&buf, nil)), time.Minute)
	r.Go(context.Background(), "a slash command", func(context.Context) { panic("boom") })
	r.Close()
	if s := buf.String(); !strings.Contains(s, `msg="bot: panic in a slash command"`) || !strings.Contains(s, "panic=boom") {
		t.Errorf("log = %q, want the panic logged with the job's name", s)
	}
}

func TestTimeout(t *testing.T) {
	r := New(slog.New(slog.DiscardHandler), time.Nanosecond)
	var err error
	r.Do(context.Background(), "slow", func(ctx context.Context) { <-ctx.Done(); err = ctx.Err() })
	r.Close()
	if err != context.DeadlineExceeded {
		t.Errorf("job context ended with %v, want the Runner's timeout", err)
	}
}
