package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/caarlos0/env/v10"

	"github.com/bobbinbot/bobbin/internal/playground"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/mcp"
)

// `bot playground`: the Slack emulator, the real bot wired to it by run
// exactly as to Slack (socket mode, Web API URL, the same code paths),
// Redis (embedded unless REDIS_URL), the demo model when no LLM_* names
// one, and the playground page on PLAYGROUND_ADDR.

// command runs the subcommand args name: none is the bot, "playground"
// the playground.
func command(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0:
		err := run(ctx, getenv, stdout, stderr)
		if err != nil && nothingSlack(getenv) {
			// A first try on a fresh clone: say where to start.
			err = fmt.Errorf("%w\nNo Slack app yet? Try Bobbin in a local Slack-like page first: go run ./cmd/bot playground", err)
		}
		return err
	case len(args) == 1 && args[0] == "playground":
		return runPlayground(ctx, getenv, stdout, stderr)
	case len(args) == 1 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help"):
		_, err := fmt.Fprint(stdout, usage)
		return err
	}
	return fmt.Errorf("unknown command %q\n%s", strings.Join(args, " "), usage)
}

const usage = `usage:
  bot             run Bobbin (configured from the environment, see README.md)
  bot playground  try Bobbin in a local Slack-like page (PLAYGROUND_ADDR, default 127.0.0.1:3000)
`

// nothingSlack reports whether none of the Slack credentials is set.
func nothingSlack(getenv func(string) string) bool {
	for _, k := range []string{"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_CLIENT_ID"} {
		if getenv(k) != "" {
			return false
		}
	}
	return true
}

// playgroundConfig is the playground's own setting; the bot's come from
// config (the README's Configuration table has a row for each).
type playgroundConfig struct {
	Addr string `env:"PLAYGROUND_ADDR" envDefault:"127.0.0.1:3000"`
}

// demoModel reports whether the demo model answers: none of the
// variables that name a model endpoint is set.
func demoModel(getenv func(string) string) bool {
	for _, k := range []string{"LLM_PROVIDER", "LLM_BASE_URL", "LLM_MODEL", "LLM_API_KEY"} {
		if getenv(k) != "" {
			return false
		}
	}
	return true
}

// runPlayground is `bot playground`.
func runPlayground(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	var pc playgroundConfig
	if err := env.ParseWithOptions(&pc, env.Options{Environment: map[string]string{"PLAYGROUND_ADDR": getenv("PLAYGROUND_ADDR")}}); err != nil {
		return err
	}
	if pc.Addr == "" {
		pc.Addr = "127.0.0.1:3000"
	}
	ln, err := net.Listen("tcp", pc.Addr)
	if err != nil {
		reason := "the address cannot be used"
		var errno syscall.Errno
		if errors.As(err, &errno) {
			reason = errno.Error()
		}
		return fmt.Errorf("PLAYGROUND_ADDR cannot be listened on (%s): set it to a free host:port, e.g. 127.0.0.1:3001", reason)
	}
	defer ln.Close()
	loopback := isLoopback(ln.Addr())

	ws := playground.DefaultWorkspace()
	creds := playground.NewCredentials()
	emu := slackemu.New(playground.EmulatorOptions(ws, creds))
	defer emu.Close()

	over := map[string]string{
		"SLACK_BOT_TOKEN": creds.BotToken,
		"SLACK_APP_TOKEN": creds.AppToken,
		"SLACK_API_URL":   emu.APIURL(),
	}
	// Defaults that suit a terminal and a single process; what the
	// environment sets wins. Edits every 500 ms show an answer grow (the
	// emulated Slack's chat.update budget still spaces them).
	for k, v := range map[string]string{"HTTP_ADDR": "127.0.0.1:0", "LOG_FORMAT": "text", "LOG_LEVEL": "warn", "STREAM_EDIT_INTERVAL": "500ms"} {
		if getenv(k) == "" {
			over[k] = v
		}
	}
	if getenv("SECRET_KEY") == "" && getenv("REDIS_URL") == "" {
		// Registered servers' secrets live in the embedded Redis, which is
		// gone at exit: a key for this run is enough.
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		over["SECRET_KEY"] = base64.StdEncoding.EncodeToString(k)
	}

	if getenv("MCP_CONFIG") == "" {
		// A tool in the box: the built-in demo notes server, so the first
		// mention shows an approval with nothing to install.
		path, cleanup, err := demoMCPConfig()
		if err != nil {
			return err
		}
		defer cleanup()
		over["MCP_CONFIG"] = path
	}

	info := playground.ModelInfo{Name: getenv("LLM_MODEL"), Endpoint: endpointLabel(getenv("LLM_PROVIDER"), getenv("LLM_BASE_URL"))}
	if demoModel(getenv) {
		stop, base, key, err := startDemo()
		if err != nil {
			return err
		}
		defer stop()
		over["LLM_PROVIDER"], over["LLM_BASE_URL"], over["LLM_API_KEY"], over["LLM_MODEL"] = "openai", base, key, playground.DemoModelName
		info = playground.ModelInfo{Demo: true, Name: playground.DemoModelName, Endpoint: "built into the playground"}
	}

	page := playground.New(playground.Options{
		Slack: emu, Workspace: ws, Model: info, MCP: mcpSummary(overlayEnv(getenv, over)("MCP_CONFIG"), getenv),
		LoopbackOnly: loopback,
	})
	srv := &http.Server{Handler: page, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		page.Close() // ends the live-update streams Shutdown would wait for
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
	}()

	// The address is printed once the bot is connected: every setting has
	// been checked by then (run reports the problems and the page is
	// never offered).
	banner := func() {
		fmt.Fprintf(stdout, "Bobbin playground: open http://%s/ in your browser (Ctrl-C to stop).\n", browserAddr(ln.Addr()))
		if info.Demo {
			fmt.Fprintln(stdout, "Model: the demo model, a short script (set LLM_PROVIDER, LLM_BASE_URL and LLM_MODEL for a real one).")
		} else {
			fmt.Fprintf(stdout, "Model: %s, %s.\n", info.Name, info.Endpoint)
		}
		if getenv("MCP_CONFIG") == "" {
			fmt.Fprintln(stdout, "Tools: the built-in demo notes server (demo/list_notes, demo/add_note); set MCP_CONFIG to mount your own.")
		}
		for _, k := range []string{"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_API_URL"} {
			if getenv(k) != "" {
				fmt.Fprintf(stdout, "Note: %s is ignored: the playground's bot talks to its own local Slack.\n", k)
			}
		}
		if !loopback {
			fmt.Fprintln(stdout, "Warning: PLAYGROUND_ADDR is not a loopback address: anyone who can reach it can drive the bot, its tools and its model.")
		}
	}
	bctx, stopBanner := context.WithCancel(ctx)
	bannerDone := make(chan struct{})
	go func() {
		defer close(bannerDone)
		if emu.WaitFor(bctx, func() bool { return emu.LiveConnections() > 0 }) == nil {
			banner()
		}
	}()
	err = run(ctx, overlayEnv(getenv, over), stdout, stderr)
	stopBanner()
	<-bannerDone
	return err
}

// demoMCPConfig writes the MCP_CONFIG the playground uses when none is
// set: the built-in demo server, named demo.
func demoMCPConfig() (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "bobbin-playground-")
	if err != nil {
		return "", nil, fmt.Errorf("playground: %w", err)
	}
	path = filepath.Join(dir, "mcp.yaml")
	if err := os.WriteFile(path, []byte("servers:\n  - name: demo\n    builtin: "+mcp.BuiltinDemo+"\n"), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("playground: %w", err)
	}
	return path, func() { _ = os.RemoveAll(dir) }, nil
}

// overlayEnv answers from over first, then from getenv.
func overlayEnv(getenv func(string) string, over map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := over[k]; ok {
			return v
		}
		return getenv(k)
	}
}

// startDemo serves the demo model on a fresh loopback port with a key of
// its own; stop ends it.
func startDemo() (stop func(), baseURL, key string, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", "", fmt.Errorf("playground: demo model: %w", err)
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	key = "sk-demo-" + hex.EncodeToString(b)
	srv := &http.Server{Handler: playground.NewDemo(key, 0), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	stop = func() {
		_ = srv.Close()
		<-done
	}
	return stop, "http://" + ln.Addr().String() + "/v1", key, nil
}

// endpointLabel says where the model runs, without credentials.
func endpointLabel(provider, base string) string {
	if provider == "" {
		provider = "openai"
	}
	label := provider + "-compatible endpoint"
	if provider == "anthropic" {
		label = "Anthropic Messages API"
	}
	if u, err := url.Parse(base); err == nil && u.Host != "" {
		u.User = nil
		u.RawQuery = ""
		label += " at " + u.String()
	}
	return label
}

// mcpSummary names the operator's MCP servers for the page ("" when
// none). Problems with the file are run's to report.
func mcpSummary(path string, getenv func(string) string) string {
	if path == "" {
		return ""
	}
	cfg, err := mcp.LoadConfigChecked(path, getenv)
	if err != nil {
		return ""
	}
	var names []string
	for _, s := range cfg.Servers {
		kind := "http"
		switch {
		case len(s.Command) > 0:
			kind = "stdio"
		case s.Builtin != "":
			kind = "built in"
		}
		names = append(names, s.Name+" ("+kind+")")
	}
	return strings.Join(names, ", ")
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// browserAddr is the address to type in a browser: an unspecified host
// becomes localhost.
func browserAddr(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if ta.IP.IsUnspecified() {
		return net.JoinHostPort("localhost", fmt.Sprint(ta.Port))
	}
	return ta.String()
}
