package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// VersionSource reports a workspace's change counter: it moves whenever a
// change other replicas must see is stored (a registration added, removed
// or re-scoped, an OAuth connection made, renewed or dropped, a tool policy
// or profile changed). The session store implements it.
type VersionSource interface {
	WorkspaceVersion(ctx context.Context, team string) (int64, error)
}

// Options configures a Manager. Zero values mean the defaults in brackets.
type Options struct {
	// Config is the operator's file (nil: no configured servers).
	Config *Config
	// Store provides run-time registrations (nil: none).
	Store RegistrationStore
	// Pins stores pinned tool hashes (nil: in memory, this process only).
	Pins PinStore
	// Policies stores the tool policies admins set from Slack (nil: in
	// memory, this process only).
	Policies PolicyStore
	// AllowPrivateNetworks lets registered servers resolve to loopback and
	// private ranges (MCP_ALLOW_PRIVATE_NETWORKS; tests and on-prem).
	AllowPrivateNetworks bool
	// Getenv expands ${VARS} of the config file and supplies PATH and HOME
	// to stdio children [os.Getenv].
	Getenv func(string) string
	Logger *slog.Logger
	// CallTimeout bounds each tool call [60s]; ProbeTimeout bounds each
	// connect attempt, including the era probe [10s]; IdleTimeout closes
	// unused connections [10m].
	CallTimeout, ProbeTimeout, IdleTimeout time.Duration
	// OutputCap is the most bytes of a tool result the model sees [32 KiB].
	OutputCap int
	// MaxMessageBytes caps one inbound JSON-RPC message or SSE event [16 MiB].
	MaxMessageBytes int
	// RegistrationTTL is how long registrations read from Store are reused
	// before asking again, so other replicas' changes show up [10s]. With
	// Versions it is only a safety net.
	RegistrationTTL time.Duration
	// Versions is read once at the start of every turn (and /bobbin mcp
	// list): when the workspace's version moved since this replica last
	// loaded it, registrations and cached OAuth tokens are reloaded first,
	// so a change on another replica applies at the next turn (nil: only
	// RegistrationTTL).
	Versions VersionSource
	// Resolver resolves registered servers' host names [the system resolver].
	Resolver Resolver
	// OAuth wires OAuth servers (zero: OAuth servers are refused).
	OAuth OAuthOptions
	// Presets are the OAuth clients registrations may name
	// (servers.Registration.Preset), keyed by preset name: the
	// credentials stay here, in the process's configuration, and are
	// read when a server is mounted (nil: no presets; a registration
	// naming one then cannot connect and says why).
	Presets map[string]Preset
	// Elicitor answers servers' questions to people (nil: declined).
	Elicitor Elicitor
	// StartupTimeout is how long a stdio server may take to start and
	// answer its first connect [2m]; a server's startup_timeout wins.
	StartupTimeout time.Duration
	// ToolWait is the longest a turn (or /bobbin mcp list) waits for
	// servers that are still starting or failing [2s]: it goes on with
	// the servers that are ready, and they keep starting in the
	// background.
	ToolWait time.Duration
}

// Server states reported by Status.
const (
	StateConnected = "connected"
	StateIdle      = "idle"
	StateFailed    = "failed"
	// StateStarting is a server being connected to (a stdio server
	// starting, perhaps downloading itself).
	StateStarting = "starting"
)

// Manager owns every workspace's MCP mounts. It is safe for concurrent use.
type Manager struct {
	opts  Options
	log   *slog.Logger
	pins  PinStore
	oauth *oauthCore
	// policyStore holds admins' tool policies (policy.go).
	policyStore PolicyStore

	mu     sync.Mutex
	teams  map[string]*workspace
	closed bool

	done chan struct{}
	wg   sync.WaitGroup
	// bg ends at Close: background listings (refresh.go) run under it.
	bg     context.Context
	stopBG context.CancelFunc
}

type workspace struct {
	mounts map[string]*mount
	regs   []Registered
	regsAt time.Time
	// ver is the workspace's version regs were loaded at (verOK: known).
	ver   int64
	verOK bool
}

// NewManager returns a Manager; it connects nothing until Tools is called.
func NewManager(opts Options) *Manager {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	opts.CallTimeout = cmp.Or(opts.CallTimeout, 60*time.Second)
	opts.ProbeTimeout = cmp.Or(opts.ProbeTimeout, 10*time.Second)
	opts.IdleTimeout = cmp.Or(opts.IdleTimeout, 10*time.Minute)
	opts.OutputCap = cmp.Or(opts.OutputCap, 32<<10)
	opts.MaxMessageBytes = cmp.Or(opts.MaxMessageBytes, 16<<20)
	opts.RegistrationTTL = cmp.Or(opts.RegistrationTTL, 10*time.Second)
	opts.StartupTimeout = cmp.Or(opts.StartupTimeout, 2*time.Minute)
	opts.ToolWait = cmp.Or(opts.ToolWait, 2*time.Second)
	m := &Manager{opts: opts, log: opts.Logger, pins: opts.Pins, teams: map[string]*workspace{}, done: make(chan struct{})}
	m.bg, m.stopBG = context.WithCancel(context.Background())
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.pins == nil {
		m.pins = &memPins{}
	}
	m.policyStore = opts.Policies
	if m.policyStore == nil {
		m.policyStore = &memPolicies{}
	}
	m.oauth = newOAuthCore(opts.OAuth, m.log)
	m.wg.Add(1)
	go m.reap()
	return m
}

func (m *Manager) outputCap() int { return m.opts.OutputCap }

// reap closes idle connections until Close.
func (m *Manager) reap() {
	defer m.wg.Done()
	every := max(min(m.opts.IdleTimeout/2, 30*time.Second), 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case now := <-t.C:
			for _, mt := range m.allMounts() {
				mt.closeIdle(now.Add(-m.opts.IdleTimeout))
			}
		}
	}
}

func (m *Manager) allMounts() []*mount {
	m.mu.Lock()
	var out []*mount
	for _, ws := range m.teams {
		for _, mt := range ws.mounts {
			out = append(out, mt)
		}
	}
	m.mu.Unlock()
	// Per-person mounts of user servers (their locks are taken after m.mu
	// is released, never inside it).
	for _, mt := range slices.Clone(out) {
		out = append(out, mt.subMounts()...)
	}
	return out
}

type desired struct {
	cfg       ServerConfig
	source    string
	registrar string
}

// mounts reconciles the team's mounts with the config and the registrations
// and returns them in a stable order: configured servers first.
func (m *Manager) mounts(ctx context.Context, team string) ([]*mount, error) {
	var want []desired
	names := map[string]bool{}
	if c := m.opts.Config; c != nil {
		for _, s := range c.Servers {
			want = append(want, desired{cfg: s, source: sourceConfig})
			names[s.Name] = true
		}
		for _, s := range c.Workspaces[team].Servers {
			want = append(want, desired{cfg: s, source: sourceConfig})
			names[s.Name] = true
		}
	}
	regs := m.registrations(ctx, team)
	for _, r := range regs {
		if names[r.Name] || !serverNameRE.MatchString(r.Name) {
			m.log.Warn("mcp registration skipped: name invalid or taken by the config file", "team", team, "server", r.Name)
			continue
		}
		if err := ValidateScope(r.Scope); err != nil {
			// Fail closed: a scope that cannot be read offers nothing.
			m.log.Warn("mcp registration skipped: its scope is malformed", "team", team, "server", r.Name, "err", err)
			names[r.Name] = true
			continue
		}
		names[r.Name] = true
		auth := r.Auth
		if auth == AuthNone {
			auth = ""
		}
		want = append(want, desired{ServerConfig{Name: r.Name, URL: r.URL, Headers: r.Headers, Auth: auth, Scope: r.Scope, Preset: r.Preset}, sourceRegistered, r.CreatedBy})
	}

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errors.New("mcp: manager closed")
	}
	ws := m.workspace(team)
	var stale []*mount
	next := make(map[string]*mount, len(want))
	out := make([]*mount, 0, len(want))
	for _, d := range want {
		key := fingerprint(d)
		mt := ws.mounts[d.cfg.Name]
		if mt == nil || mt.key != key {
			if mt != nil {
				stale = append(stale, mt)
			}
			mt = newMount(m, team, d.cfg, d.source, key)
			mt.registrar = d.registrar
		}
		next[d.cfg.Name] = mt
		out = append(out, mt)
	}
	for name, mt := range ws.mounts {
		if next[name] == nil {
			stale = append(stale, mt)
		}
	}
	ws.mounts = next
	// A changed scope applies to the live mount: no reconnect. (mt.mu is
	// never held while m.mu is taken, so this order is safe.)
	for i, mt := range out {
		mt.setScope(want[i].cfg.Scope)
	}
	m.mu.Unlock()
	for _, mt := range stale {
		mt.close()
	}
	return out, nil
}

func (m *Manager) workspace(team string) *workspace {
	ws := m.teams[team]
	if ws == nil {
		ws = &workspace{mounts: map[string]*mount{}}
		m.teams[team] = ws
	}
	return ws
}

// registrations returns the team's registrations, cached until the
// workspace's version moves or for RegistrationTTL; on a store error the
// last known list is used. A moved version also drops the team's cached
// OAuth tokens (a person disconnected, or another replica renewed them).
func (m *Manager) registrations(ctx context.Context, team string) []Registered {
	m.mu.Lock()
	ws := m.workspace(team)
	fresh := !ws.regsAt.IsZero() && time.Since(ws.regsAt) < m.opts.RegistrationTTL
	known, ver := ws.verOK, ws.ver
	m.mu.Unlock()
	var cur int64
	curOK := false
	if m.opts.Versions != nil {
		v, err := m.opts.Versions.WorkspaceVersion(ctx, team)
		if err != nil {
			m.log.Warn("mcp: workspace version unavailable, using the cached registrations", "team", team, "err", err)
		} else {
			cur, curOK = v, true
			switch {
			case known && v != ver:
				fresh = false
				m.oauth.forgetTeam(team)
				m.relistTeam(team)
			case !known:
				fresh = false // loaded while the version was unknown
			}
		}
	}
	if m.opts.Store == nil {
		if curOK {
			m.mu.Lock()
			ws = m.workspace(team)
			ws.ver, ws.verOK = cur, true
			m.mu.Unlock()
		}
		return nil
	}
	if fresh {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.workspace(team).regs
	}
	regs, err := m.loadRegistrations(ctx, team)
	m.mu.Lock()
	defer m.mu.Unlock()
	ws = m.workspace(team)
	if err != nil {
		m.log.Warn("mcp registrations unavailable, using the last known list", "team", team, "err", err)
		return ws.regs
	}
	ws.regs, ws.regsAt = regs, time.Now()
	// The version was read before the registrations: a change in between
	// moves it again and the next turn reloads once more.
	ws.ver, ws.verOK = cur, curOK
	return regs
}

// relistTeam makes the team's mounts list their tools again at their next
// use, so tool pins approved on another replica (and whatever else a
// version bump announces) apply here too.
func (m *Manager) relistTeam(team string) {
	m.mu.Lock()
	var mts []*mount
	if ws := m.teams[team]; ws != nil {
		for _, mt := range ws.mounts {
			mts = append(mts, mt)
		}
	}
	m.mu.Unlock()
	for _, mt := range mts {
		for _, x := range append(mt.subMounts(), mt) {
			x.toolsChanged()
		}
	}
}

// fingerprint identifies what a mount connects to; the scope is left out
// (it changes without a reconnect).
func fingerprint(d desired) string {
	d.cfg.Scope = Scope{}
	b, _ := json.Marshal(struct {
		C ServerConfig
		S string
		R string
	}{d.cfg, d.source, d.registrar})
	return string(b)
}

// Tools is ToolsFor with no channel and nobody known: only servers
// without channel, user and user group restrictions are offered.
func (m *Manager) Tools(ctx context.Context, team string) ([]agent.Tool, error) {
	return m.ToolsFor(ctx, Access{Team: team})
}

// ToolsFor returns the tools of the servers whose scope allows a, connecting
// lazily (servers out of scope are not even contacted). Every tool is bound
// to a: a call checks the server's scope again, as it is then, and is
// refused when a is no longer allowed. Tools of servers that cannot be
// reached, and tools disabled by a changed definition, are left out; Status
// reports them.
func (m *Manager) ToolsFor(ctx context.Context, a Access) ([]agent.Tool, error) {
	tools, _, err := m.toolsFor(ctx, a)
	return tools, err
}

// toolsFor is ToolsFor that also returns the offered mounts still not
// listed after ToolWait.
func (m *Manager) toolsFor(ctx context.Context, a Access) ([]agent.Tool, []*mount, error) {
	mts, err := m.mounts(ctx, a.Team)
	if err != nil {
		return nil, nil, err
	}
	in := make(map[*mount]bool, len(mts))
	var offered []*mount
	for _, mt := range mts {
		if mt.scopeNow().Check(ctx, a).OK {
			in[mt] = true
			offered = append(offered, mt)
		}
	}
	late := m.refresh(ctx, a.Team, offered)
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	bound := &a
	admin := m.policies(ctx, a.Team)
	var out []agent.Tool
	// Names are given over every mount, in scope or not, so a tool's
	// name does not depend on who asks.
	for _, e := range exposeAll(mts) {
		if !in[e.mt] || e.state == nil || e.state.disabledReason != "" || e.hints.Denied {
			continue
		}
		pol := resolvePolicy(e.mt.cfg, admin[e.mt.cfg.Name], e.tool)
		hints := applyPolicy(e.hints, pol, a.DM)
		if hints.Denied {
			continue // deny: never offered to the model
		}
		out = append(out, &remoteTool{mt: e.mt, remote: e.tool.Name, hints: hints, access: bound, spec: provider.ToolSpec{
			Name:        e.exposed,
			Description: describe(e.mt.cfg.Name, e.tool.Description),
			InputSchema: inputSchema(e.tool),
		}})
	}
	return out, late, nil
}

type exposure struct {
	mt      *mount
	tool    *mcp.Tool
	state   *toolState
	exposed string
	hints   agent.Hints
}

// exposeAll names every cached tool of mts, in order, uniquely.
func exposeAll(mts []*mount) []exposure {
	taken := map[string]bool{}
	var out []exposure
	for _, mt := range mts {
		mt.mu.Lock()
		tools, states := mt.tools, mt.states
		mt.mu.Unlock()
		for _, t := range tools {
			h := hintsFor(mt.cfg, t)
			st := states[t.Name]
			h.Disabled = st == nil || st.disabledReason != ""
			if st != nil {
				h.Pin = st.hash // thread grants are bound to it (agent.GrantKey)
			}
			out = append(out, exposure{mt: mt, tool: t, state: st, exposed: exposedName(mt.cfg.Name, t.Name, taken), hints: h})
		}
	}
	return out
}

// Status reports every server mounted in the workspace, connecting lazily
// first so the answer is current; OAuth connection states are those of the
// requester in ctx (access.WithCaller), if any.
func (m *Manager) Status(ctx context.Context, team string) []servers.Status {
	r, _ := access.CallerFrom(ctx)
	return m.StatusFor(ctx, team, r.User)
}

// StatusFor is Status with the OAuth connection states of user (for
// user-mode servers; workspace-mode servers report the workspace's).
func (m *Manager) StatusFor(ctx context.Context, team, user string) []servers.Status {
	mts, err := m.mounts(ctx, team)
	if err != nil {
		return nil
	}
	m.refresh(ctx, team, mts)
	out := make([]servers.Status, 0, len(mts))
	for _, mt := range mts {
		mt.mu.Lock()
		st := servers.Status{Name: mt.cfg.Name, Source: mt.source, URL: RedactURL(mt.cfg.URL), Transport: mt.transport,
			Era: mt.era, Trusted: mt.cfg.Trusted, Restarts: mt.restarts, Tools: len(mt.tools), Scope: mt.scope.Clone()}
		switch {
		case mt.conn != nil:
			st.State = StateConnected
		case !mt.dialing.IsZero():
			st.State = StateStarting
		case mt.lastErr != nil:
			st.State, st.Error = StateFailed, explainFailure(mt.cfg, m.startupFor(mt.cfg), mt.lastErr)
		default:
			st.State = StateIdle
		}
		if st.Transport == "" {
			st.Transport = transportStdio
			if mt.cfg.Builtin != "" {
				st.Transport = transportBuiltin
			}
			if mt.cfg.URL != "" {
				st.Transport = cmp.Or(mt.cfg.Transport, transportStreamable)
			}
		}
		for _, t := range mt.tools {
			s := mt.states[t.Name]
			if s == nil {
				continue
			}
			if s.disabledReason != "" {
				st.Disabled = append(st.Disabled, t.Name)
			}
			if len(s.flags) > 0 {
				st.Flagged = append(st.Flagged, t.Name)
			}
		}
		mt.mu.Unlock()
		if mt.isOAuth() {
			o := m.oauthStatus(ctx, mt, user)
			st.Auth, st.OAuth = mt.authMode(), &o
		}
		out = append(out, st)
	}
	return out
}

func (m *Manager) findMount(ctx context.Context, team, server string) ([]*mount, *mount, error) {
	mts, err := m.mounts(ctx, team)
	if err != nil {
		return nil, nil, err
	}
	for _, mt := range mts {
		if mt.cfg.Name == server {
			return mts, mt, nil
		}
	}
	return nil, nil, fmt.Errorf("%w: %s", servers.ErrUnknownServer, server)
}

// ServerTools lists one server's tools with hints, pin verdicts and scanner
// flags, including disabled tools.
func (m *Manager) ServerTools(ctx context.Context, team, server string) ([]servers.ToolInfo, error) {
	mts, mt, err := m.findMount(ctx, team, server)
	if err != nil {
		return nil, err
	}
	if _, err := mt.list(ctx, false); err != nil {
		return nil, fmt.Errorf("mcp: %s: %w", server, err)
	}
	return infosFor(mts, mt), nil
}

func infosFor(mts []*mount, mt *mount) []servers.ToolInfo {
	var out []servers.ToolInfo
	for _, e := range exposeAll(mts) {
		if e.mt != mt {
			continue
		}
		info := servers.ToolInfo{Name: e.tool.Name, Exposed: e.exposed, Title: e.hints.Title,
			Description: e.tool.Description, InputSchema: inputSchema(e.tool), Hints: e.hints}
		if e.state != nil {
			info.Hash, info.Flags = e.state.hash, e.state.flags
			info.Disabled, info.DisabledReason = e.state.disabledReason != "", e.state.disabledReason
		}
		out = append(out, info)
	}
	return out
}

// Approve re-lists the server, pins every current definition and re-enables
// tools that were disabled by a change. Only admins may reach it.
func (m *Manager) Approve(ctx context.Context, team, server string) ([]servers.ToolInfo, error) {
	mts, mt, err := m.findMount(ctx, team, server)
	if err != nil {
		return nil, err
	}
	tools, err := mt.list(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("mcp: %s: %w", server, err)
	}
	states, err := mt.pin(ctx, tools, true)
	if err != nil {
		return nil, fmt.Errorf("mcp: %s: %w", server, err)
	}
	mt.mu.Lock()
	mt.states = states
	mt.mu.Unlock()
	var redefined []string
	for name, st := range states {
		if st.redefined {
			redefined = append(redefined, name)
		}
	}
	sort.Strings(redefined)
	m.resetPolicies(ctx, team, server, redefined)
	m.log.Info("mcp server tools approved", "team", team, "server", server, "tools", len(tools))
	return infosFor(mts, mt), nil
}

// Probe connects to a URL an admin wants to register (SSRF-checked, like a
// registered server) and lists its tools with scanner flags, without
// keeping anything.
func (m *Manager) Probe(ctx context.Context, name, url string, headers map[string]string) ([]servers.ToolInfo, error) {
	if !serverNameRE.MatchString(name) {
		return nil, fmt.Errorf("mcp: server name must match [a-zA-Z0-9_-]{1,32}")
	}
	if c := m.opts.Config; c != nil && slices.ContainsFunc(c.Servers, func(s ServerConfig) bool { return s.Name == name }) {
		return nil, fmt.Errorf("mcp: the name %s is taken by a configured server", name)
	}
	if err := ValidateRegistrationURL(url, m.opts.AllowPrivateNetworks); err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	cfg := ServerConfig{Name: name, URL: strings.TrimSpace(url), Headers: headers}
	c, err := dial(ctx, &dialParams{cfg: cfg, source: sourceRegistered, getenv: m.opts.Getenv, logger: m.log,
		allowPrivate: m.opts.AllowPrivateNetworks, resolve: m.opts.Resolver,
		probeTimeout: m.opts.ProbeTimeout, maxMessage: m.opts.MaxMessageBytes})
	if err != nil {
		if perr := m.ProbeAuth(ctx, name, url); perr != nil {
			return nil, perr
		}
		return nil, fmt.Errorf("mcp: connecting to %s: %w", name, err)
	}
	defer c.close()
	var tools []*mcp.Tool
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp: listing tools of %s: %w", name, redactErr(err))
		}
		tools = append(tools, t)
		if len(tools) >= maxToolsPerServer {
			break
		}
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	out := make([]servers.ToolInfo, 0, len(tools))
	for _, t := range tools {
		others := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == t.Name })
		out = append(out, servers.ToolInfo{Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchema: inputSchema(t), Hints: hintsFor(cfg, t), Flags: scanTool(t, others), Hash: toolHash(t)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ValidateURL is ValidateRegistrationURL with the Manager's
// AllowPrivateNetworks setting.
func (m *Manager) ValidateURL(raw string) error {
	return ValidateRegistrationURL(raw, m.opts.AllowPrivateNetworks)
}

// Invalidate forgets the team's cached registrations so the next call reads
// the store (use after a registration changed on this replica).
func (m *Manager) Invalidate(team string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ws := m.teams[team]; ws != nil {
		ws.regsAt = time.Time{}
	}
}

// Close closes every connection and stops every child process.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	var mts []*mount
	for _, ws := range m.teams {
		for _, mt := range ws.mounts {
			mts = append(mts, mt)
		}
	}
	m.teams = map[string]*workspace{}
	m.mu.Unlock()
	close(m.done)
	m.stopBG()
	m.wg.Wait()
	var wg sync.WaitGroup
	for _, mt := range mts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mt.close()
		}()
	}
	wg.Wait()
	return nil
}
