// Package mcp is the client side of the Model Context Protocol for Bobbin:
// one Manager per process mounts MCP servers per Slack workspace (from the
// operator's YAML file and from run-time registrations), connects lazily over
// stdio, streamable HTTP or legacy HTTP+SSE, negotiates the protocol era
// (2026-07-28 stateless, else 2025-11-25 initialize), supervises stdio
// children, pins tool definitions by hash and adapts MCP tools to agent.Tool.
//
// HTTP servers may use OAuth (auth workspace or user, oauth*.go): the flow
// is split at the redirect so any replica can complete a callback, tokens
// and pending authorizations live behind small storage interfaces that
// cmd/bot satisfies with the session store, and a person is asked to
// connect through the ConnectPrompter seam. Servers may ask the person
// behind a call for input (elicitation, elicit*.go) through the Elicitor
// seam; access.WithCaller tells a call who asked.
//
// Trust boundaries: servers from the operator's file are trusted to point
// anywhere (a sidecar on localhost is common) and may use ${VARS} of the
// bot's environment; registered servers are HTTPS only, SSRF-checked at
// connect time (unless AllowPrivateNetworks) and never see ${VARS}
// expanded. Tool annotations are hints; the operator's allow/deny lists and
// trusted flag decide what may run unasked. Each server's Scope (scope.go)
// decides who may use it, and where: ToolsFor offers only the tools of
// servers whose scope allows the turn's Access, and every call checks it
// again against the scope as it is then.
//
// It is the only importer of github.com/modelcontextprotocol/go-sdk. It may
// import agent and provider; it must never import bot, session, slack-go or
// go-redis (cmd/bot adapts the session store to RegistrationStore/PinStore
// and hands it over as TokenStore, StateStore, RefreshLocker and
// ConnectWaker).
package mcp
