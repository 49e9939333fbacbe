// Command mcpconformance is the client the official MCP conformance suite
// (@modelcontextprotocol/conformance, client mode) runs against Bobbin. It
// takes the server URL as its last argument and reads
// MCP_CONFORMANCE_SCENARIO and MCP_CONFORMANCE_CONTEXT, as the suite's
// reference clients do, and drives mcp.Manager the way the bot does: the
// server is mounted from config (with auth: workspace for the auth/*
// scenarios), an admin starts Connect, a headless browser step follows the
// test authorization server's redirect and hands code, state and iss to the
// same callback handler cmd/bot serves, tools are listed with Manager.Tools
// and called as agent tools; elicitations are answered through the
// Elicitor seam, accepting what the form would show pre-filled. State
// lives in session's Redis store (in-process here).
//
// Test-only: scripts/conformance.sh builds and runs it; nothing imports it.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/mcp"
	"github.com/bobbinbot/bobbin/session"
)

const (
	team   = "TCONFORMANCE"
	admin  = "UADMIN"
	server = "conf"
	// publicURL is where the bot would serve its callback; the headless
	// step never dials it, it reads the authorization server's redirect.
	publicURL = "http://localhost:3000"
	// cimdURL is the client id the suite expects for auth/basic-cimd.
	cimdURL = "https://conformance-test.local/client-metadata.json"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mcpconformance [flags…] <server-url>")
		os.Exit(2)
	}
	serverURL := os.Args[len(os.Args)-1]
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	var cctx map[string]any
	if s := os.Getenv("MCP_CONFORMANCE_CONTEXT"); s != "" {
		_ = json.Unmarshal([]byte(s), &cctx)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, log, scenario, serverURL, cctx); err != nil {
		log.Error("scenario failed", "scenario", scenario, "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, scenario, serverURL string, cctx map[string]any) error {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	store, err := session.Open(ctx, session.Options{SecretKey: key, Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()

	sc := mcp.ServerConfig{Name: server, URL: serverURL, Transport: "streamable"}
	if strings.HasPrefix(scenario, "auth/") {
		sc.Auth = mcp.AuthWorkspace
		if id, ok := cctx["client_id"].(string); ok {
			sc.ClientID = id
			sc.ClientSecret, _ = cctx["client_secret"].(string)
		}
	}
	var mgr *mcp.Manager
	browser := &headless{log: log}
	mgr = mcp.NewManager(mcp.Options{
		Config: &mcp.Config{Servers: []mcp.ServerConfig{sc}},
		// A turn waits 2 s for a server still starting, then goes on
		// without it (and a later turn gets its tools); the suite's one
		// "turn" may wait as long as a scenario allows, so a slow start on
		// a loaded machine is not a failed scenario.
		ToolWait: 30 * time.Second,
		Pins:     store,
		Logger:   log,
		Elicitor: prefilled{log: log},
		OAuth: mcp.OAuthOptions{
			PublicURL: publicURL, ClientMetadataURL: cimdURL,
			Tokens: store, States: store, Locker: store, Waker: store,
			Prompter: browser,
		},
	})
	defer mgr.Close()
	browser.callback = mgr.CallbackHandler(nil)

	ctx = access.WithCaller(ctx, access.Caller{Team: team, User: admin, Channel: "CCONF", Thread: "1700000000.000100"})
	if sc.Auth != "" {
		// The admin's Connect button (the answer to /bobbin mcp add).
		link, _, err := mgr.StartConnect(ctx, team, server, admin)
		if err != nil {
			return fmt.Errorf("start connect: %w", err)
		}
		if err := browser.authorize(ctx, link); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
	}
	tools, err := mgr.Tools(ctx, team)
	if err != nil {
		return err
	}
	if sc.Auth != "" && len(tools) == 0 {
		// The server refused the new connection while listing (e.g. its
		// resource moved to another authorization server): mcp list says
		// "reconnect needed" and the admin clicks Connect again.
		if st, _, _ := mgr.ConnectionState(ctx, team, server, admin); !st.Connected {
			log.Info("reconnecting", "reason", st.Reason)
			link, _, err := mgr.StartConnect(ctx, team, server, admin)
			if err != nil {
				return fmt.Errorf("start connect again: %w", err)
			}
			if err := browser.authorize(ctx, link); err != nil {
				return fmt.Errorf("connect again: %w", err)
			}
			if tools, err = mgr.Tools(ctx, team); err != nil {
				return err
			}
		}
	}
	byName := map[string]agent.Tool{}
	var names []string
	for _, t := range tools {
		n := strings.TrimPrefix(t.Spec().Name, server+"__")
		byName[n] = t
		names = append(names, n)
	}
	if len(tools) == 0 {
		for _, st := range mgr.Status(ctx, team) {
			if st.Error != "" {
				log.Warn("server status", "state", st.State, "err", st.Error)
			}
		}
	}
	call := func(name string, args any) error {
		t := byName[name]
		if t == nil {
			return fmt.Errorf("tool %q not offered (have %v)", name, names)
		}
		b, _ := json.Marshal(args)
		out, err := t.Call(ctx, b)
		log.Info("tool called", "tool", name, "out", truncate(out), "err", err)
		return err
	}
	switch scenario {
	case "initialize", "request-metadata", "json-schema-ref-no-deref":
		return nil // connecting and listing was the test
	case "tools_call":
		return call("add_numbers", map[string]any{"a": 5, "b": 3})
	case "elicitation-sep1034-client-defaults":
		return call("test_client_elicitation_defaults", map[string]any{})
	case "sse-retry":
		return call("test_reconnection", map[string]any{})
	case "json-schema-2020-12-preservation":
		infos, err := mgr.ServerTools(ctx, team, server)
		if err != nil {
			return err
		}
		for _, ti := range infos {
			if ti.Name == "json_schema_2020_12_tool" {
				return call("json_schema_echo", map[string]any{"schema": ti.InputSchema})
			}
		}
		return errors.New("json_schema_2020_12_tool not listed")
	case "sep-2322-client-request-state":
		for _, n := range []string{"test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type"} {
			_ = call(n, map[string]any{}) // some are refused locally on purpose
		}
		return nil
	case "http-standard-headers":
		if len(names) > 0 {
			_ = call(names[0], map[string]any{})
		}
		return nil
	case "http-custom-headers":
		raw, _ := cctx["toolCalls"].([]any)
		for _, item := range raw {
			obj, _ := item.(map[string]any)
			name, _ := obj["name"].(string)
			args, _ := obj["arguments"].(map[string]any)
			if args == nil {
				args = map[string]any{}
			}
			_ = call(name, args)
		}
		return nil
	case "http-invalid-tool-headers":
		for _, n := range names {
			_ = call(n, map[string]any{"region": "us-west1"})
		}
		return nil
	}
	if strings.HasPrefix(scenario, "auth/") {
		return call("test-tool", map[string]any{})
	}
	return fmt.Errorf("unknown scenario %q", scenario)
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// headless is the person's browser: it opens the authorization URL, lets
// the test authorization server approve at once, and delivers the
// redirect's query to the bot's callback handler.
type headless struct {
	log      *slog.Logger
	callback http.Handler
}

// PromptConnect implements mcp.ConnectPrompter: the person clicks Connect
// at once.
func (h *headless) PromptConnect(ctx context.Context, p mcp.ConnectPrompt) error {
	h.log.Info("connect prompt", "server", p.Server, "reason", p.Reason)
	return h.authorize(ctx, p.URL)
}

func (h *headless) authorize(ctx context.Context, link string) error {
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.RawQuery == "" {
		return fmt.Errorf("authorization server answered %d without a redirect", resp.StatusCode)
	}
	// Deliver the redirect to the callback, as the browser would.
	cb := httptest.NewRequestWithContext(ctx, http.MethodGet, mcp.CallbackPath+"?"+loc.RawQuery, nil)
	rec := httptest.NewRecorder()
	h.callback.ServeHTTP(rec, cb)
	if rec.Code != http.StatusOK {
		return fmt.Errorf("callback page %d: %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	return nil
}

// prefilled answers every question as a person accepting the form as
// shown would: defaults pre-filled, nothing else typed; URL questions are
// accepted.
type prefilled struct{ log *slog.Logger }

func (p prefilled) Elicit(_ context.Context, q mcp.Elicitation) (mcp.ElicitAnswer, error) {
	p.log.Info("elicitation", "mode", q.Mode, "message", q.Message)
	content := map[string]any{}
	if q.Schema != nil {
		for _, f := range q.Schema.Fields {
			switch {
			case f.Default != nil:
				content[f.Name] = f.Default
			case f.Required && f.Kind == mcp.FieldBoolean:
				// A required checkbox the person ticks to go on.
				content[f.Name] = true
			}
		}
	}
	if q.Mode == mcp.ElicitURL {
		content = nil
	}
	return mcp.ElicitAnswer{Action: mcp.ActionAccept, Content: content}, nil
}
