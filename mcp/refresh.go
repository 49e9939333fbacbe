package mcp

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/servers"
)

// No silence: a turn (or /bobbin mcp list) waits at most ToolWait for the
// servers it needs. Listing runs in the background, one at a time per
// mount, under the Manager's life and the server's start-up budget, so a
// server that is still starting (a cold npx download) keeps starting
// while the turn goes on with the tools that are ready.

// startupFor is the start-up budget of a server.
func (m *Manager) startupFor(cfg ServerConfig) time.Duration {
	if cfg.StartupTimeout > 0 {
		return cfg.StartupTimeout
	}
	return m.opts.StartupTimeout
}

// refresh lists the mounts' tools in the background and waits at most
// ToolWait (or until ctx ends); it returns the mounts not done by then.
func (m *Manager) refresh(ctx context.Context, team string, mts []*mount) []*mount {
	dones := make([]chan struct{}, len(mts))
	for i, mt := range mts {
		dones[i] = m.startList(ctx, team, mt)
	}
	timer := time.NewTimer(m.opts.ToolWait)
	defer timer.Stop()
	expired := false
	var late []*mount
	for i, done := range dones {
		if !expired {
			select {
			case <-done:
				continue
			case <-timer.C:
				expired = true
			case <-ctx.Done():
				expired = true
			}
		}
		select {
		case <-done:
		default:
			late = append(late, mts[i])
		}
	}
	return late
}

// startList starts listing mt in the background unless a listing is
// already under way; the channel is closed when it ends.
func (m *Manager) startList(ctx context.Context, team string, mt *mount) chan struct{} {
	mt.mu.Lock()
	if ch := mt.refreshing; ch != nil {
		mt.mu.Unlock()
		return ch
	}
	ch := make(chan struct{})
	mt.refreshing = ch
	mt.mu.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		mt.mu.Lock()
		mt.refreshing = nil
		mt.mu.Unlock()
		close(ch)
		return ch
	}
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		defer func() {
			mt.mu.Lock()
			mt.refreshing = nil
			mt.mu.Unlock()
			close(ch)
		}()
		lctx, cancel := context.WithTimeout(valuesOf{m.bg, ctx}, m.startupFor(mt.cfg)+3*m.opts.ProbeTimeout)
		defer cancel()
		if _, err := mt.list(lctx, false); err != nil && m.bg.Err() == nil {
			m.log.Warn("mcp server unavailable; its tools are left out", "team", team,
				"server", mt.cfg.Name, "err", err)
		}
	}()
	return ch
}

// valuesOf lives as long as Context and carries the values of vals.
type valuesOf struct {
	context.Context
	vals context.Context
}

func (v valuesOf) Value(key any) any { return v.vals.Value(key) }

// ToolsReport is ToolsFor plus the servers in a's scope whose tools are
// left out because they are not ready (still starting after ToolWait, or
// failing), so the model (and the person) can be told.
func (m *Manager) ToolsReport(ctx context.Context, a Access) ([]agent.Tool, []servers.NotReady, error) {
	tools, late, err := m.toolsFor(ctx, a)
	if err != nil {
		return nil, nil, err
	}
	var out []servers.NotReady
	for _, mt := range late {
		mt.mu.Lock()
		st, n := StateStarting, len(mt.tools)
		if mt.dialing.IsZero() && mt.lastErr != nil {
			st = StateFailed
		}
		mt.mu.Unlock()
		if n == 0 || st == StateFailed {
			out = append(out, servers.NotReady{Server: mt.cfg.Name, State: st})
		}
	}
	return tools, out, nil
}

// explainFailure says in plain words what failed and what to do next,
// with the technical detail after it.
func explainFailure(cfg ServerConfig, startup time.Duration, err error) string {
	detail := err.Error()
	var what string
	msg := strings.ToLower(detail)
	switch {
	case errors.Is(err, exec.ErrNotFound) || strings.Contains(msg, "executable file not found") || strings.Contains(msg, "no such file or directory") && len(cfg.Command) > 0 && strings.Contains(msg, "starting "):
		what = fmt.Sprintf("Could not start: the command %q was not found. Install it, or fix command in MCP_CONFIG.", cfg.Command[0])
	case len(cfg.Command) > 0 && strings.Contains(msg, "server exited"):
		what = "The server exited before it answered. Run its command by hand to see why; its error output is in the bot's log."
	case len(cfg.Command) > 0 && errors.Is(err, errProbe):
		what = fmt.Sprintf("The server did not answer within its start-up budget (%s). If it downloads itself on first use (npx, uvx), give it longer with startup_timeout in MCP_CONFIG.", startup)
	case errors.Is(err, servers.ErrNotConnected):
		return detail // the OAuth line says what to do
	case cfg.URL != "" && (strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host")):
		what = "Nothing answered at its URL. Check that the server is running and that the URL is right."
	case cfg.URL != "" && (strings.Contains(msg, "401") || strings.Contains(msg, "403")):
		what = "The server refused the bot's credentials. Check its headers (or reconnect the account)."
	case cfg.URL != "" && errors.Is(err, errProbe):
		what = "The server did not answer in time. Check that the URL is an MCP endpoint."
	default:
		what = "Could not connect."
	}
	return what + " Detail: " + detail
}
