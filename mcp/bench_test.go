package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The adapter and raw benchmarks call the same tool of the same kind of
// stdio server (this binary in legacy mode); compare their ns/op for the
// adapter's overhead.

func BenchmarkCallRaw(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{testServerEnv + "=legacy", "PATH=" + os.Getenv("PATH")}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	ctx := context.Background()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, legacyOnly)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "bench"}}
	b.ResetTimer()
	for b.Loop() {
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatal(err)
		}
	}
}

func BenchmarkCallAdapter(b *testing.B) {
	m := newTestManager(b, &Config{Servers: []ServerConfig{testServerConfig(b, "bench", "legacy", nil)}}, nil)
	ctx := context.Background()
	tools, err := m.Tools(ctx, "T1")
	if err != nil {
		b.Fatal(err)
	}
	echo := toolByName(b, tools, "bench__echo")
	args := json.RawMessage(`{"message":"bench"}`)
	b.ResetTimer()
	for b.Loop() {
		if _, err := echo.Call(ctx, args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConcurrent50 runs 50 calls at once on one connection per
// iteration.
func BenchmarkConcurrent50(b *testing.B) {
	m := newTestManager(b, &Config{Servers: []ServerConfig{testServerConfig(b, "bench", "legacy", nil)}}, nil)
	ctx := context.Background()
	tools, err := m.Tools(ctx, "T1")
	if err != nil {
		b.Fatal(err)
	}
	echo := toolByName(b, tools, "bench__echo")
	b.ResetTimer()
	for b.Loop() {
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := echo.Call(ctx, json.RawMessage(fmt.Sprintf(`{"message":"%d"}`, i))); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallRawWithTimeout is the raw call with a per-call deadline, as
// the adapter always sets one (go-sdk then watches the context to send
// notifications/cancelled).
func BenchmarkCallRawWithTimeout(b *testing.B) {
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = []string{testServerEnv + "=legacy", "PATH=" + os.Getenv("PATH")}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, legacyOnly)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "bench"}}
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := cs.CallTool(ctx, params)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
}
