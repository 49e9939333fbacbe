package main

import (
	"context"
	"encoding/json"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/llmemu"
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
	// Nothing of Slack set: a fresh clone's first try points at the playground.
	if err == nil || !strings.Contains(err.Error(), "go run ./cmd/bot playground") {
		t.Errorf("no Slack settings: %v, want a pointer to the playground", err)
	}
	err = command(context.Background(), nil, envFunc(map[string]string{"HTTP_ADDR": freeAddr(t), "SLACK_BOT_TOKEN": "xoxb-1"}), io.Discard, io.Discard)
	if err == nil || strings.Contains(err.Error(), "playground") {
		t.Errorf("with a Slack token: %v, want no playground pointer", err)
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
// the playground too, one line per variable, before its address is
// offered.
func TestPlaygroundReportsBadConfig(t *testing.T) {
	env := map[string]string{"PLAYGROUND_ADDR": freeAddr(t), "LLM_PROVIDER": "openai", "STREAM_MODE": "sideways", "REDIS_URL": os.Getenv("REDIS_URL")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	err := runPlayground(ctx, envFunc(env), &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "LLM_MODEL") || !strings.Contains(err.Error(), "STREAM_MODE") {
		t.Errorf("err = %v", err)
	}
	if strings.Contains(out.String(), "http://") {
		t.Errorf("the address was printed before the settings were checked: %q", out.String())
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

// TestPlaygroundWithModelEndpoint: with LLM_* set the playground's bot
// talks to that endpoint (here the fake OpenAI-compatible server), not
// the demo model, and the page says which model answers.
func TestPlaygroundWithModelEndpoint(t *testing.T) {
	llm := llmemu.New(llmemu.Options{APIKey: "sk-real-endpoint-key", TokenInterval: time.Millisecond})
	defer llm.Close()
	addr := freeAddr(t)
	env := map[string]string{
		"PLAYGROUND_ADDR": addr, "REDIS_URL": os.Getenv("REDIS_URL"),
		"LLM_PROVIDER": "openai", "LLM_BASE_URL": llm.URL() + "/v1", "LLM_API_KEY": "sk-real-endpoint-key", "LLM_MODEL": "gpt-4o",
		"STREAM_EDIT_INTERVAL": "100ms", "SHUTDOWN_GRACE": "3s",
	}
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runPlayground(ctx, envFunc(env), &out, &out) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("playground: %v", err)
		}
	}()
	base := "http://" + addr
	getJSON := func(path string, v any) error {
		resp, err := http.Get(base + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(v)
	}
	var state struct {
		Model struct {
			Demo     bool   `json:"demo"`
			Name     string `json:"name"`
			Endpoint string `json:"endpoint"`
		} `json:"model"`
	}
	waitFor(t, "the page", func() bool { return getJSON("/api/state", &state) == nil })
	if state.Model.Demo || state.Model.Name != "gpt-4o" || !strings.Contains(state.Model.Endpoint, llm.URL()) {
		t.Errorf("model = %+v", state.Model)
	}
	type view struct {
		Channel []struct {
			TS      string `json:"ts"`
			Replies int    `json:"replies"`
		} `json:"channel"`
		Thread    []json.RawMessage `json:"thread"`
		Connected bool              `json:"connected"`
	}
	var v view
	waitFor(t, "the bot's socket", func() bool {
		return getJSON("/api/view?as=U0ALICE&channel=C0GENERAL", &v) == nil && v.Connected
	})
	body := strings.NewReader(`{"as":"U0ALICE","channel":"C0GENERAL","text":"@bobbin ping from the page"}`)
	req, _ := http.NewRequest(http.MethodPost, base+"/api/post", body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Bobbin-Playground", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("post: %v %v", err, resp)
	}
	resp.Body.Close()
	waitFor(t, "the answer", func() bool {
		if getJSON("/api/view?as=U0ALICE&channel=C0GENERAL", &v) != nil || len(v.Channel) == 0 {
			return false
		}
		var th view
		if getJSON("/api/view?as=U0ALICE&channel=C0GENERAL&thread="+v.Channel[0].TS, &th) != nil || len(th.Thread) < 2 {
			return false
		}
		last := string(th.Thread[len(th.Thread)-1])
		return strings.Contains(last, "ping from the page") && !strings.Contains(last, "demo model") && !strings.Contains(last, "Stop")
	})
	if got := len(llm.Requests()); got == 0 {
		t.Error("the model endpoint got no request")
	}
	if strings.Contains(out.String(), "sk-real-endpoint-key") {
		t.Error("the output shows the model key")
	}
}

// waitFor polls cond with a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: gave up", what)
		}
	}
}
