package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/agent/access"
)

// Protocol revisions and transports as reported by Status.
const (
	EraModern = "2026-07-28"
	EraLegacy = "2025-11-25"

	transportStdio      = "stdio"
	transportStreamable = "streamable"
	transportSSE        = "sse"
)

// errProbe marks a connect attempt that ended in a way that calls for the
// legacy fallback: the probe went unanswered, or the server hung up on it.
var errProbe = errors.New("no answer to the protocol probe")

// conn is one live session with a server.
type conn struct {
	cs        *mcp.ClientSession
	era       string
	transport string
	proc      *proc    // stdio only
	http      *httpEnv // HTTP only
	cancel    context.CancelFunc
	mt        *mount // set once connected (elicitation attribution)
	calls     callSet
	closeOnce sync.Once
	closing   chan struct{}
	dead      chan struct{} // closed when the session has ended
	accounted bool          // the end was recorded (guarded by the mount's mu)
}

func (c *conn) isDead() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

// close ends the session and, for stdio, the process group.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		close(c.closing)
		_ = c.cs.Close()
		c.cancel()
		if c.proc != nil {
			c.proc.shutdown(2 * time.Second)
		}
		if c.http != nil {
			c.http.close()
		}
	})
}

// intentional reports whether close was called (as opposed to the server
// going away by itself).
func (c *conn) intentional() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// dialParams is what connecting needs besides the server config.
type dialParams struct {
	cfg          ServerConfig
	source       string
	getenv       func(string) string
	logger       *slog.Logger
	allowPrivate bool
	resolve      Resolver
	probeTimeout time.Duration
	maxMessage   int
	// era and transport remembered from the last successful connect.
	era, transport string
	onToolsChanged func()
	// oauth authorizes HTTP requests (OAuth servers only).
	oauth auth.OAuthHandler
	// elicit answers elicitation requests (nil: the capability is not
	// declared).
	elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
	// builtin is the in-process server of a builtin mount.
	builtin *mcp.Server
	// startup bounds a stdio server's first answer when its era is not
	// known yet (it may be downloading itself); 0: probeTimeout.
	startup time.Duration
}

func (p *dialParams) client() *mcp.Client {
	// Explicit capabilities: nil would advertise roots.listChanged, which we
	// do not implement (server-filesystem would call roots/list).
	caps := &mcp.ClientCapabilities{}
	if p.elicit != nil {
		// Both modes declared explicitly: go-sdk would declare form only.
		caps.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}
	}
	return mcp.NewClient(&mcp.Implementation{Name: "bobbin", Version: "0.1"}, &mcp.ClientOptions{
		Capabilities:       caps,
		ElicitationHandler: p.elicit,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			if p.onToolsChanged != nil {
				p.onToolsChanged()
			}
		},
	})
}

// boundedConnect runs Client.Connect with a context that lives as long as
// the session (legacy SSE ties its stream to the Connect context), but gives
// up after bound or when ctx ends. go-sdk's probe has no timeout of its own.
func boundedConnect(ctx context.Context, client *mcp.Client, t mcp.Transport, opts *mcp.ClientSessionOptions, bound time.Duration) (*mcp.ClientSession, context.CancelFunc, error) {
	return boundedConnectHold(ctx, client, t, opts, bound, nil)
}

// boundedConnectHold is boundedConnect whose bound does not run while hold
// reports true (a stdio server still starting): the bound starts afresh
// once hold turns false.
func boundedConnectHold(ctx context.Context, client *mcp.Client, t mcp.Transport, opts *mcp.ClientSessionOptions, bound time.Duration, hold func() bool) (*mcp.ClientSession, context.CancelFunc, error) {
	// The session outlives this request: it must not carry the requester
	// (or call clock) of whoever happened to cause the connect, or a later
	// server request on the connection could be attributed to them.
	life, cancel := context.WithCancel(detached{access.WithCaller(context.WithoutCancel(ctx), access.Caller{})})
	var (
		mu                      sync.Mutex
		timedOut, held, stopped bool
		timer                   *time.Timer
	)
	mu.Lock()
	timer = time.AfterFunc(bound, func() {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case stopped:
		case hold != nil && hold():
			held = true
			timer.Reset(100 * time.Millisecond)
		case held:
			held = false
			timer.Reset(bound)
		default:
			timedOut = true
			cancel()
		}
	})
	mu.Unlock()
	stop := context.AfterFunc(ctx, cancel)
	cs, err := client.Connect(life, t, opts)
	mu.Lock()
	stopped = true
	timer.Stop()
	to := timedOut
	mu.Unlock()
	stopped2 := stop()
	switch {
	case err == nil && (to || !stopped2):
		// The deadline fired as Connect returned: the session's context is
		// already cancelled, so it is unusable.
		_ = cs.Close()
		cancel()
		if to {
			return nil, nil, fmt.Errorf("%w within %s", errProbe, bound)
		}
		return nil, nil, ctx.Err()
	case err != nil:
		cancel()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if to {
			return nil, nil, fmt.Errorf("%w within %s", errProbe, bound)
		}
		return nil, nil, err
	}
	return cs, cancel, nil
}

func hungUp(err error) bool {
	return errors.Is(err, errProbe) || errors.Is(err, mcp.ErrConnectionClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

var legacyOnly = &mcp.ClientSessionOptions{ProtocolVersion: EraLegacy}

// dial connects to the server described by p, negotiating era and
// transport; see mcp.md §3.
func dial(ctx context.Context, p *dialParams) (*conn, error) {
	if len(p.cfg.Command) > 0 {
		return dialStdio(ctx, p)
	}
	if p.cfg.Builtin != "" {
		return dialBuiltin(ctx, p)
	}
	c, err := dialHTTP(ctx, p)
	return c, explainErr(redactErr(err))
}

func dialStdio(ctx context.Context, p *dialParams) (*conn, error) {
	env, err := stdioEnv(p.cfg, p.getenv)
	if err != nil {
		return nil, err
	}
	// A server seen for the first time (or after a failure) may be
	// downloading itself.
	startup := time.Duration(0)
	if p.era == "" {
		startup = p.startup
	}
	attempt := func(opts *mcp.ClientSessionOptions, bound time.Duration) (*conn, error) {
		pr, err := startProc(p.cfg.Command, env, p.cfg.Name, p.logger)
		if err != nil {
			return nil, err
		}
		t := &mcp.IOTransport{Reader: pr.stdout, Writer: pr.stdin, MaxLineLength: p.maxMessage}
		started := time.Now()
		// Until the child reads its first message it is still starting
		// (a cold npx or uvx download): the probe's bound waits, within
		// the start-up budget.
		var hold func() bool
		if startup > 0 {
			hold = func() bool { return time.Since(started) < startup && pr.unread() }
		}
		cs, cancel, err := boundedConnectHold(ctx, p.client(), t, opts, bound, hold)
		if err != nil {
			if !pr.exited() {
				p.logger.Warn("mcp server stopped before it answered: terminating its process group (SIGTERM, then SIGKILL after a grace period); a package download it was doing resumes on the next start",
					"server", p.cfg.Name, "after", time.Since(started).Round(time.Millisecond).String(), "budget", bound.String())
			}
			pr.shutdown(500 * time.Millisecond)
			if pr.exited() && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("%w: server exited (%v): %v", errProbe, pr.err, err)
			}
			return nil, err
		}
		return &conn{cs: cs, era: cs.InitializeResult().ProtocolVersion, transport: transportStdio,
			proc: pr, cancel: cancel, closing: make(chan struct{}), dead: make(chan struct{})}, nil
	}
	if p.era != "" && p.era != EraModern {
		if c, err := attempt(legacyOnly, p.probeTimeout); err == nil {
			return c, nil
		}
		// The remembered era failed: probe afresh.
	}
	c, err := attempt(nil, p.probeTimeout)
	if err == nil || !hungUp(err) || ctx.Err() != nil {
		return c, err
	}
	// Some legacy servers exit or stay silent on server/discover: restart
	// and go straight to initialize.
	p.logger.Info("mcp probe unanswered, restarting with initialize", "server", p.cfg.Name, "err", err)
	c, err2 := attempt(legacyOnly, p.probeTimeout)
	if err2 != nil {
		return nil, fmt.Errorf("probe: %v; legacy initialize: %w", err, err2)
	}
	return c, nil
}

func dialHTTP(ctx context.Context, p *dialParams) (*conn, error) {
	checked := p.source == sourceRegistered
	if checked {
		if err := ValidateRegistrationURL(p.cfg.URL, p.allowPrivate); err != nil {
			return nil, err
		}
	}
	endpoint, err := url.Parse(p.cfg.URL)
	if err != nil {
		return nil, err
	}
	headers := p.cfg.Headers
	if p.source == sourceConfig {
		if headers, err = expandMap(p.cfg.Headers, p.getenv, "header"); err != nil {
			return nil, err
		}
	}
	attempt := func(kind string, opts *mcp.ClientSessionOptions) (*conn, *httpEnv, error) {
		env := newHTTPEnv(endpoint, headers, checked, p.allowPrivate, p.resolve, p.maxMessage)
		var t mcp.Transport
		if kind == transportSSE {
			t = &mcp.SSEClientTransport{Endpoint: p.cfg.URL, HTTPClient: env.client, MaxEventSize: p.maxMessage}
		} else {
			t = &mcp.StreamableClientTransport{Endpoint: p.cfg.URL, HTTPClient: env.client, MaxRetries: 2, MaxEventSize: p.maxMessage,
				OAuthHandler: p.oauth}
		}
		cs, cancel, err := boundedConnect(ctx, p.client(), t, opts, p.probeTimeout)
		if err != nil {
			env.close()
			return nil, env, err
		}
		return &conn{cs: cs, era: cs.InitializeResult().ProtocolVersion, transport: kind,
			http: env, cancel: cancel, closing: make(chan struct{}), dead: make(chan struct{})}, env, nil
	}
	// go-sdk's SSE transport has no OAuth: OAuth servers are streamable only.
	if p.oauth == nil && (p.cfg.Transport == transportSSE || p.transport == transportSSE) {
		c, _, err := attempt(transportSSE, legacyOnly)
		if err == nil || p.cfg.Transport == transportSSE {
			return c, err
		}
	}
	var opts *mcp.ClientSessionOptions
	if p.era != "" && p.era != EraModern {
		opts = legacyOnly
	}
	c, env, err := attempt(transportStreamable, opts)
	if err == nil || ctx.Err() != nil {
		return c, err
	}
	if errors.Is(err, errProbe) && opts == nil {
		// Silent on the modern probe: try initialize directly.
		if c, env2, err2 := attempt(transportStreamable, legacyOnly); err2 == nil {
			return c, nil
		} else {
			env, err = env2, err2
		}
	}
	if p.oauth == nil && p.cfg.Transport == "" && env != nil && env.sawStatus(400, 404, 405) {
		c, _, err2 := attempt(transportSSE, legacyOnly)
		if err2 == nil {
			return c, nil
		}
		return nil, fmt.Errorf("streamable HTTP: %v; legacy SSE: %w", err, err2)
	}
	return nil, err
}

// detached hides the per-call values of a context (the caller, masked
// with the zero Caller where it is built; the call clock) from what is
// derived from it.
type detached struct{ context.Context }

func (d detached) Value(key any) any {
	switch key.(type) {
	case clockKey:
		return nil
	}
	return d.Context.Value(key)
}
