package session

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestSentinelURL starts a throwaway Sentinel (redis-server --sentinel)
// watching the REDIS_URL server and opens the store through it.
func TestSentinelURL(t *testing.T) {
	u := os.Getenv("REDIS_URL")
	bin, err := exec.LookPath("redis-server")
	if u == "" || err != nil {
		t.Skip("needs REDIS_URL and redis-server on PATH")
	}
	ro, err := redis.ParseURL(u)
	if err != nil || ro.Password != "" {
		t.Skip("REDIS_URL with a password is not supported by this test")
	}
	host, port, _ := net.SplitHostPort(ro.Addr)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sport := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	cfg := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor bobbintest %s %s 1\n", sport, dir, host, port)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, conf, "--sentinel", "--logfile", filepath.Join(dir, "sentinel.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	url := fmt.Sprintf("redis://127.0.0.1:%d/%d?master_name=bobbintest", sport, ro.DB)
	var s *Store
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err = Open(ctx, Options{URL: url, Prefix: "test-" + randomID()})
		cancel()
		if err == nil {
			break
		}
		if i == 50 {
			t.Fatalf("Open through Sentinel: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer s.Close()
	ctx := ctxT(t)
	first, err := s.Admit(ctx, "T1", "Ev"+randomID(), "", "")
	if err != nil || !first {
		t.Errorf("Admit through Sentinel = %v, %v", first, err)
	}
	for _, k := range scanKeys(t, s) {
		s.rdb.Del(ctx, k)
	}
	if _, err := Open(ctx, Options{URL: "redis://127.0.0.1:1?master_name=x&bogus=1"}); err == nil {
		t.Error("Open with a bad Sentinel URL: want an error")
	}
}
