package main

import (
	"context"
	"go/parser"
	"go/token"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCommand(t *testing.T) {
	var out strings.Builder
	if err := command(context.Background(), []string{"help"}, envFunc(nil), &out, io.Discard); err != nil || !strings.Contains(out.String(), "bot playground") {
		t.Errorf("help: %v, %q", err, out.String())
	}
	err := command(context.Background(), []string{"playgrund"}, envFunc(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `unknown command "playgrund"`) || !strings.Contains(err.Error(), "bot playground") {
		t.Errorf("unknown command: %v", err)
	}
	// No arguments is the bot, with its own configuration checks.
	err = command(context.Background(), nil, envFunc(map[string]string{"HTTP_ADDR": freeAddr(t)}), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "SLACK_BOT_TOKEN") {
		t.Errorf("no arguments: %v, want the bot's configuration error", err)
	}
}

// TestPlaygroundAddrInUse: a busy PLAYGROUND_ADDR is reported by name
// before anything starts.
func TestPlaygroundAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = runPlayground(context.Background(), envFunc(map[string]string{"PLAYGROUND_ADDR": ln.Addr().String()}), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "PLAYGROUND_ADDR cannot be listened on") {
		t.Errorf("busy address: %v", err)
	}
}

// TestPlaygroundReportsBadConfig: the bot's configuration problems end
// the playground too, one line per variable.
func TestPlaygroundReportsBadConfig(t *testing.T) {
	env := map[string]string{"PLAYGROUND_ADDR": freeAddr(t), "LLM_PROVIDER": "openai", "STREAM_MODE": "sideways", "REDIS_URL": os.Getenv("REDIS_URL")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	err := runPlayground(ctx, envFunc(env), &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "LLM_MODEL") || !strings.Contains(err.Error(), "STREAM_MODE") {
		t.Errorf("err = %v", err)
	}
	if !strings.Contains(out.String(), "Bobbin playground: open http://") {
		t.Errorf("no URL printed: %q", out.String())
	}
}

func TestPlaygroundHelpers(t *testing.T) {
	if !demoModel(envFunc(map[string]string{"LLM_SYSTEM_PROMPT": "be brief"})) {
		t.Error("LLM_SYSTEM_PROMPT alone should keep the demo model")
	}
	if demoModel(envFunc(map[string]string{"LLM_BASE_URL": "http://localhost:11434/v1"})) {
		t.Error("LLM_BASE_URL set but the demo model chosen")
	}
	if got := endpointLabel("openai", "http://user:secret@localhost:11434/v1?key=k"); got != "openai-compatible endpoint at http://localhost:11434/v1" || strings.Contains(got, "secret") {
		t.Errorf("endpointLabel = %q", got)
	}
	get := overlayEnv(envFunc(map[string]string{"A": "1", "B": "2"}), map[string]string{"B": "3"})
	if get("A") != "1" || get("B") != "3" {
		t.Error("overlayEnv")
	}
}

// TestPlaygroundOnlyFromItsCommand: the playground and its demo model are
// reachable only from the playground subcommand: of cmd/bot's files, only
// playground.go imports them.
func TestPlaygroundOnlyFromItsCommand(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pf.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if (strings.HasSuffix(path, "/internal/playground") || strings.HasSuffix(path, "/internal/slackemu")) && f != "playground.go" {
				t.Errorf("%s imports %s: only playground.go may", f, path)
			}
		}
	}
}
