package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/agent/servers"
)

// maxToolsPerServer bounds what one server may offer.
const maxToolsPerServer = 256

// toolState is what a mount knows about one tool besides its definition.
type toolState struct {
	hash           string
	disabledReason string
	flags          []string
	// redefined: an approval pinned a definition other than the one
	// pinned before (the tool's policy resets to ask).
	redefined bool
}

// mount is one server in one workspace: its live connection (if any), the
// remembered era and transport, the cached tool list and pin verdicts.
type mount struct {
	m      *Manager
	team   string
	cfg    ServerConfig
	source string
	key    string
	// registrar is the admin who registered the server (registered only).
	registrar string
	// parent is set on the per-person mount of a user server; users holds
	// those mounts (OAuth user mode).
	parent *mount
	users  map[string]*mount

	// dialSem serializes connecting and listing; a channel so waiting
	// respects ctx.
	dialSem chan struct{}

	mu        sync.Mutex
	conn      *conn
	era       string
	transport string
	lastErr   error
	failures  int
	retryAt   time.Time
	restarts  int
	lastUsed  time.Time
	tools     []*mcp.Tool
	states    map[string]*toolState
	listedAt  time.Time
	ttl       time.Duration // <0: until a list-changed notification
	stale     bool
	closed    bool
	// principal is whose OAuth connection conn uses ("" = the workspace).
	principal string
	// scope is who may use the tools, and where; cfg.Scope is kept empty
	// so that nothing reads a stale copy (setScope, scopeNow).
	scope   Scope
	handler *oauthHandler
	// builtin is the in-process server of a builtin mount, made on the
	// first connect and kept (with its state) across reconnects.
	builtin *mcp.Server
	// dialing is when the connect in progress began (zero: none);
	// refreshing is closed when the background listing in progress ends
	// (nil: none) (refresh.go).
	dialing    time.Time
	refreshing chan struct{}

	closing chan struct{}
	wg      sync.WaitGroup
}

func newMount(m *Manager, team string, cfg ServerConfig, source, key string) *mount {
	scope := cfg.Scope.Clone()
	cfg.Scope = Scope{}
	return &mount{m: m, team: team, cfg: cfg, source: source, key: key, scope: scope,
		dialSem: make(chan struct{}, 1), stale: true, closing: make(chan struct{})}
}

func (mt *mount) setScope(s Scope) {
	s = s.Clone()
	mt.mu.Lock()
	mt.scope = s
	mt.mu.Unlock()
}

func (mt *mount) scopeNow() Scope {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	return mt.scope.Clone()
}

func (mt *mount) lock(ctx context.Context) error {
	select {
	case mt.dialSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-mt.closing:
		return errors.New("server closed")
	}
}

func (mt *mount) unlock() { <-mt.dialSem }

func backoff(failures int) time.Duration {
	d := 250 * time.Millisecond
	for i := 1; i < failures && d < 30*time.Second; i++ {
		d *= 2
	}
	return min(d, 30*time.Second)
}

// connLocked returns the live connection, dialling if needed. The caller
// holds dialSem. With wait, a server in back-off is waited for (bounded by
// ctx); without, the last error is returned at once.
func (mt *mount) connLocked(ctx context.Context, wait bool) (*conn, error) {
	mt.mu.Lock()
	if mt.closed {
		mt.mu.Unlock()
		return nil, errors.New("server closed")
	}
	if c := mt.conn; c != nil {
		if !c.isDead() {
			mt.lastUsed = time.Now()
			mt.mu.Unlock()
			return c, nil
		}
		mt.markDeadLocked(c, nil)
	}
	until := time.Until(mt.retryAt)
	lastErr := mt.lastErr
	mt.mu.Unlock()
	if until > 0 {
		if !wait {
			return nil, fmt.Errorf("restarting after failure (retry in %s): %w", until.Round(time.Millisecond), lastErr)
		}
		t := time.NewTimer(until)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-mt.closing:
			t.Stop()
			return nil, errors.New("server closed")
		}
	}
	mt.mu.Lock()
	p := &dialParams{
		cfg: mt.cfg, source: mt.source, getenv: mt.m.opts.Getenv, logger: mt.m.log,
		allowPrivate: mt.m.opts.AllowPrivateNetworks, resolve: mt.m.opts.Resolver,
		probeTimeout: mt.m.opts.ProbeTimeout, maxMessage: mt.m.opts.MaxMessageBytes,
		era: mt.era, transport: mt.transport, onToolsChanged: mt.toolsChanged,
		elicit: mt.elicitHandler(), startup: mt.m.startupFor(mt.cfg),
	}
	if mt.cfg.Builtin != "" {
		if mt.builtin == nil {
			mt.builtin, _ = newBuiltinServer(mt.cfg.Builtin) // nil for an unknown kind: dial says so
		}
		p.builtin = mt.builtin
	}
	principal := mt.principal
	mt.mu.Unlock()
	if mt.isOAuth() {
		h, err := mt.handlerFor(principal)
		if err != nil {
			return nil, err
		}
		p.oauth = h
	}
	mt.mu.Lock()
	mt.dialing = time.Now()
	mt.mu.Unlock()
	c, err := dial(ctx, p)
	mt.mu.Lock()
	mt.dialing = time.Time{}
	if err != nil {
		var nc *NeedsConnectError
		if errors.As(err, &nc) {
			// Not a failure of the server: no back-off.
			mt.lastErr = nc
			mt.era, mt.transport = "", ""
			mt.mu.Unlock()
			return nil, err
		}
		if ctx.Err() == nil {
			mt.failures++
			mt.retryAt = time.Now().Add(backoff(mt.failures))
			mt.lastErr = err
			// The remembered era may be what failed: probe afresh next time.
			mt.era, mt.transport = "", ""
		}
		mt.mu.Unlock()
		return nil, err
	}
	if mt.closed {
		mt.mu.Unlock()
		c.close()
		return nil, errors.New("server closed")
	}
	defer mt.mu.Unlock()
	mt.conn, mt.era, mt.transport, mt.lastErr = c, c.era, c.transport, nil
	c.mt = mt
	mt.lastUsed = time.Now()
	mt.stale = true
	mt.wg.Add(1)
	go mt.watch(c)
	mt.m.log.Info("mcp server connected", "team", mt.team, "server", mt.cfg.Name,
		"transport", c.transport, "era", c.era)
	return c, nil
}

// watch notices a session that ends without close (a crashed stdio child, a
// dropped HTTP stream), records it and restarts the server after back-off if
// it is in use.
func (mt *mount) watch(c *conn) {
	defer mt.wg.Done()
	err := c.cs.Wait()
	close(c.dead)
	if c.intentional() {
		return
	}
	c.close()
	mt.mu.Lock()
	delay, first := mt.markDeadLocked(c, err)
	recent := time.Since(mt.lastUsed) < mt.m.opts.IdleTimeout
	replaced := mt.conn != nil
	closed := mt.closed
	mt.mu.Unlock()
	if !first || closed || !recent || replaced || c.proc == nil {
		return
	}
	t := time.NewTimer(delay)
	select {
	case <-t.C:
	case <-mt.closing:
		t.Stop()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*mt.m.opts.ProbeTimeout)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() { // ends with watch
		select {
		case <-mt.closing:
			cancel()
		case <-done:
		}
	}()
	if _, err := mt.list(ctx, false); err != nil {
		mt.m.log.Warn("mcp server restart failed", "team", mt.team, "server", mt.cfg.Name, "err", err)
	}
}

// markDeadLocked records, once per connection, that c ended by itself:
// whichever notices first (the watcher, or a caller finding it dead) counts
// the restart and sets the back-off. The caller holds mt.mu.
func (mt *mount) markDeadLocked(c *conn, err error) (time.Duration, bool) {
	if c.accounted {
		return 0, false
	}
	c.accounted = true
	if mt.conn == c {
		mt.conn = nil
	}
	mt.restarts++
	mt.failures++
	delay := backoff(mt.failures)
	mt.retryAt = time.Now().Add(delay)
	reason := "connection closed"
	if c.proc != nil && c.proc.exited() && c.proc.err != nil {
		reason = "exited: " + c.proc.err.Error()
	} else if err != nil {
		reason = redactURLs(err.Error())
	}
	mt.lastErr = errors.New(reason)
	mt.stale = true
	mt.m.log.Warn("mcp server went away", "team", mt.team, "server", mt.cfg.Name,
		"reason", reason, "restart_in", delay)
	return delay, true
}

func (mt *mount) toolsChanged() {
	mt.mu.Lock()
	mt.stale = true
	mt.mu.Unlock()
}

// list returns the server's tools, re-listing when the cache is stale (a
// list-changed notification, a reconnect, or the server's ttlMs elapsed),
// and re-checks every definition against the pins.
func (mt *mount) list(ctx context.Context, force bool) ([]*mcp.Tool, error) {
	if err := mt.lock(ctx); err != nil {
		return nil, err
	}
	defer mt.unlock()
	mt.mu.Lock()
	fresh := !force && !mt.stale && mt.conn != nil && (mt.ttl < 0 || time.Since(mt.listedAt) < mt.ttl)
	if fresh {
		tools := mt.tools
		mt.lastUsed = time.Now()
		mt.mu.Unlock()
		return tools, nil
	}
	mt.mu.Unlock()
	if mt.isOAuth() {
		if err := mt.oauthListGate(ctx); err != nil {
			return nil, err
		}
	}
	c, err := mt.connLocked(ctx, false)
	if err != nil {
		return nil, err
	}
	mt.mu.Lock()
	mt.stale = false // a notification arriving while we list marks it again
	mt.mu.Unlock()
	var (
		tools  []*mcp.Tool
		cursor string
		ttl    = time.Duration(-1)
	)
	for page := 0; ; page++ {
		res, err := c.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			err = explainErr(redactErr(err))
			mt.fail(c, fmt.Errorf("tools/list: %w", err))
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		if page == 0 && c.era == EraModern {
			ttl = time.Duration(res.TTLMs) * time.Millisecond
		}
		tools = append(tools, res.Tools...)
		if res.NextCursor == "" || page >= 20 || len(tools) >= maxToolsPerServer {
			break
		}
		cursor = res.NextCursor
	}
	if len(tools) > maxToolsPerServer {
		tools = tools[:maxToolsPerServer]
	}
	states, err := mt.pin(ctx, tools, false)
	if err != nil {
		return nil, err
	}
	mt.mu.Lock()
	mt.tools, mt.states, mt.listedAt, mt.ttl = tools, states, time.Now(), ttl
	mt.failures = 0
	mt.mu.Unlock()
	return tools, nil
}

// fail drops a broken connection so the next use reconnects.
func (mt *mount) fail(c *conn, err error) {
	mt.mu.Lock()
	if mt.conn == c && mt.conn != nil {
		mt.conn = nil
		mt.lastErr = redactErr(err)
		mt.failures++
		mt.retryAt = time.Now().Add(backoff(mt.failures))
	}
	mt.mu.Unlock()
	c.close()
}

// pin compares tools with the stored pins. Tools of a server seen for the
// first time are pinned; later a changed or new tool is disabled until an
// admin approves (approve pins the current definitions).
func (mt *mount) pin(ctx context.Context, tools []*mcp.Tool, approve bool) (map[string]*toolState, error) {
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.Name)
	}
	stored, err := mt.m.pins.ToolPins(ctx, mt.team, mt.cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("reading tool pins: %w", err)
	}
	firstSight := len(stored) == 0
	next := make(map[string]string, len(stored)+len(tools))
	for k, v := range stored {
		next[k] = v
	}
	states := make(map[string]*toolState, len(tools))
	dirty := approve
	for _, t := range tools {
		others := make([]string, 0, len(names))
		for _, n := range names {
			if n != t.Name {
				others = append(others, n)
			}
		}
		st := &toolState{hash: toolHash(t), flags: scanTool(t, others)}
		old, seen := stored[t.Name]
		switch {
		case approve || (firstSight && !seen):
			next[t.Name] = st.hash
			dirty = dirty || old != st.hash
			st.redefined = approve && seen && old != st.hash
		case !seen:
			st.disabledReason = ReasonNew
		case old != st.hash:
			st.disabledReason = ReasonChanged
		}
		states[t.Name] = st
	}
	if approve {
		// Approval pins exactly what the server offers now.
		next = map[string]string{}
		for name, st := range states {
			next[name] = st.hash
		}
	}
	if dirty {
		if err := mt.m.pins.PutToolPins(ctx, mt.team, mt.cfg.Name, next); err != nil {
			return nil, fmt.Errorf("storing tool pins: %w", err)
		}
	}
	for name, st := range states {
		if st.disabledReason != "" {
			mt.m.log.Warn("mcp tool disabled until an admin approves", "team", mt.team,
				"server", mt.cfg.Name, "tool", name, "reason", st.disabledReason)
		}
	}
	return states, nil
}

func (mt *mount) isDisabled(tool string) bool {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	st := mt.states[tool]
	return st == nil || st.disabledReason != ""
}

// redefinedSince reports whether tool's definition is no longer the one
// whose hash is pin (an admin approved a new one since it was offered).
func (mt *mount) redefinedSince(tool, pin string) bool {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	st := mt.states[tool]
	return pin != "" && st != nil && st.hash != pin
}

// call runs one tools/call on the live connection, reconnecting (after the
// back-off) when the server went away.
func (mt *mount) call(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	if mt.isOAuth() && mt.authMode() == AuthUser && mt.parent == nil {
		r, ok := access.CallerFrom(ctx)
		if !ok {
			return nil, errNoRequester
		}
		return mt.userMount(r.User).call(ctx, params)
	}
	connects := 0
	if mt.isOAuth() {
		// No usable token: ask before touching the network.
		ok, reason, err := mt.hasToken(ctx, mt.principal)
		if err != nil {
			return nil, err
		}
		if !ok {
			connects++
			if err := mt.connectAndWait(ctx, mt.principal, reason, nil); err != nil {
				return nil, err
			}
		}
	}
	retried, urlAsks := false, 0
	for {
		c, err := mt.liveConn(ctx)
		var res *mcp.CallToolResult
		if err == nil {
			res, err = callOn(ctx, c, params)
		}
		var nc *NeedsConnectError
		switch {
		case err == nil:
			return res, nil
		case errors.As(err, &nc) && connects <= mt.m.oauth.opts.MaxStepUps && ctx.Err() == nil:
			// The server refused our token (one refresh did not help) or
			// wants more scope; a 401/403 means it did not run the tool.
			// Ask the person, then send the call again.
			connects++
			if err := mt.connectAndWait(ctx, mt.principal, nc.Reason, nc.Challenge); err != nil {
				return nil, err
			}
			continue
		case urlAsks < 3 && ctx.Err() == nil && isURLRequired(err):
			// -32042 (2025-11-25): the server needs the person to open a
			// page first; ask, then send the call again.
			urlAsks++
			els, _ := urlElicitations(err)
			ok, aerr := mt.answerURLRequired(ctx, els)
			if aerr != nil {
				return nil, aerr
			}
			if !ok {
				return nil, errors.New("the server needs you to open a page first, and that was not done")
			}
			continue
		case c != nil && !retried && ctx.Err() == nil && errors.Is(err, mcp.ErrConnectionClosed) &&
			strings.Contains(err.Error(), "client is closing"):
			// go-sdk refuses a call started on a session whose reader
			// already failed ("client is closing", an internal jsonrpc2
			// error) without sending it; calls in flight fail with the
			// read error instead. So one retry on a fresh connection
			// cannot run the tool twice.
			retried = true
			mt.mu.Lock()
			mt.markDeadLocked(c, err)
			mt.mu.Unlock()
			c.close()
			continue
		}
		return nil, explainErr(redactErr(err))
	}
}

// oauthListGate makes sure the listing connection belongs to the right
// person and has a token, so listing never prompts anyone.
func (mt *mount) oauthListGate(ctx context.Context) error {
	principal, err := mt.listPrincipal(ctx)
	if err != nil {
		mt.mu.Lock()
		mt.lastErr = err
		mt.mu.Unlock()
		return err
	}
	ok, reason, err := mt.hasToken(ctx, principal)
	if err != nil {
		return err
	}
	if !ok {
		err := fmt.Errorf("%w: %s (%s)", servers.ErrNotConnected, mt.cfg.Name, reason)
		mt.mu.Lock()
		mt.lastErr = err
		mt.mu.Unlock()
		return err
	}
	mt.mu.Lock()
	var old *conn
	if mt.principal != principal {
		old, mt.conn = mt.conn, nil
		mt.principal = principal
	}
	mt.mu.Unlock()
	if old != nil {
		old.close()
	}
	return nil
}

// callOn runs the call on c, cancelled when c is closed: go-sdk's Close
// waits for calls in flight, which a hung server would never answer.
func callOn(ctx context.Context, c *conn, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() { // ends with the call
		select {
		case <-c.closing:
			// A session that ended by itself has already failed its calls
			// with the real cause; cancelling would race with it.
			if !c.isDead() {
				cancel()
			}
		case <-done:
		}
	}()
	defer c.calls.add(ctx)()
	res, err := c.cs.CallTool(ctx, params)
	if err != nil && c.intentional() && !c.isDead() {
		return nil, fmt.Errorf("server connection closed during the call: %w", err)
	}
	return res, err
}

// liveConn returns the connection, reconnecting when there is none or the
// current one has ended.
func (mt *mount) liveConn(ctx context.Context) (*conn, error) {
	mt.mu.Lock()
	c := mt.conn
	if c != nil && c.isDead() {
		c = nil
	}
	if c != nil {
		mt.lastUsed = time.Now()
	}
	mt.mu.Unlock()
	if c == nil {
		if err := mt.lock(ctx); err != nil {
			return nil, err
		}
		var err error
		c, err = mt.connLocked(ctx, true)
		mt.unlock()
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// closeIdle closes the connection if unused since before cutoff.
func (mt *mount) closeIdle(cutoff time.Time) {
	mt.mu.Lock()
	c := mt.conn
	if c == nil || mt.lastUsed.After(cutoff) {
		mt.mu.Unlock()
		return
	}
	mt.conn = nil
	// Notifications are not received while disconnected.
	mt.stale = true
	mt.mu.Unlock()
	mt.m.log.Info("mcp server idle, closing", "team", mt.team, "server", mt.cfg.Name)
	c.close()
}

// close ends the mount for good and waits for its goroutines.
func (mt *mount) close() {
	mt.mu.Lock()
	if mt.closed {
		mt.mu.Unlock()
		return
	}
	mt.closed = true
	close(mt.closing)
	c := mt.conn
	mt.conn = nil
	mt.mu.Unlock()
	if c != nil {
		c.close()
	}
	for _, sub := range mt.subMounts() {
		sub.close()
	}
	mt.wg.Wait()
}
