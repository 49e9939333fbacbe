// Package rediscluster starts a throwaway Redis Cluster of real redis-server
// processes on loopback, for tests that must run against a cluster (the
// session store's cluster client, the bot end to end). It is imported only
// from tests and imports nothing of ours.
package rediscluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Cluster is a running cluster of primaries without replicas.
type Cluster struct {
	dir   string
	ports []int
	procs []*exec.Cmd
}

// Available reports why a cluster cannot be started here ("" when it can):
// redis-server and redis-cli must be on PATH.
func Available() string {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " is not on PATH"
		}
	}
	return ""
}

// Start runs n primaries (n ≥ 3, as redis-cli --cluster create requires)
// with their files under dir, joins them and waits until every node reports
// cluster_state:ok. Close stops them.
func Start(ctx context.Context, dir string, n int) (*Cluster, error) {
	if why := Available(); why != "" {
		return nil, errors.New("rediscluster: " + why)
	}
	n = max(n, 3)
	c := &Cluster{dir: dir}
	for range n {
		port, err := freePort()
		if err != nil {
			c.Close()
			return nil, err
		}
		nodeDir := filepath.Join(dir, strconv.Itoa(port))
		if err := os.MkdirAll(nodeDir, 0o700); err != nil {
			c.Close()
			return nil, err
		}
		cmd := exec.Command("redis-server",
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000",
			"--save", "", "--appendonly", "no", "--dir", nodeDir,
			"--logfile", filepath.Join(nodeDir, "redis.log"))
		if err := cmd.Start(); err != nil {
			c.Close()
			return nil, fmt.Errorf("rediscluster: redis-server: %w", err)
		}
		c.ports = append(c.ports, port)
		c.procs = append(c.procs, cmd)
	}
	for _, p := range c.ports {
		if err := waitPing(ctx, p); err != nil {
			c.Close()
			return nil, err
		}
	}
	args := []string{"--cluster", "create"}
	for _, p := range c.ports {
		args = append(args, "127.0.0.1:"+strconv.Itoa(p))
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	var out bytes.Buffer
	create := exec.CommandContext(ctx, "redis-cli", args...)
	create.Stdout, create.Stderr = &out, &out
	if err := create.Run(); err != nil {
		c.Close()
		return nil, fmt.Errorf("rediscluster: redis-cli --cluster create: %w\n%s", err, out.String())
	}
	for _, p := range c.ports {
		if err := waitState(ctx, p); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// URL is the store's cluster URL form, naming every node as a seed.
func (c *Cluster) URL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redis://127.0.0.1:%d?cluster=true", c.ports[0])
	for _, p := range c.ports[1:] {
		fmt.Fprintf(&b, "&addr=127.0.0.1:%d", p)
	}
	return b.String()
}

// Ports are the nodes' client ports.
func (c *Cluster) Ports() []int { return c.ports }

// Close stops every node.
func (c *Cluster) Close() {
	for _, p := range c.procs {
		if p.Process != nil {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}
	c.procs = nil
}

// freePort finds a port whose cluster bus port (port + 10000) is free too.
func freePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		bus.Close()
		return port, nil
	}
	return 0, errors.New("rediscluster: no free port pair")
}

func cli(ctx context.Context, port int, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "redis-cli", append([]string{"-p", strconv.Itoa(port)}, args...)...).CombinedOutput()
	return string(out), err
}

func waitPing(ctx context.Context, port int) error {
	return poll(ctx, func() bool {
		out, err := cli(ctx, port, "ping")
		return err == nil && strings.TrimSpace(out) == "PONG"
	}, fmt.Sprintf("node %d never answered", port))
}

func waitState(ctx context.Context, port int) error {
	return poll(ctx, func() bool {
		out, err := cli(ctx, port, "cluster", "info")
		return err == nil && strings.Contains(out, "cluster_state:ok")
	}, fmt.Sprintf("node %d never reached cluster_state:ok", port))
}

func poll(ctx context.Context, ok func() bool, msg string) error {
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return errors.New("rediscluster: " + msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
