// Package agent runs the model/tool loop of one turn: it builds requests,
// streams from a provider.Provider, reports progress to an Observer, asks an
// Approver before tools run, runs approved tools in parallel with timeouts and
// output caps, checkpoints every step, keeps the prompt within a token budget
// by compacting, and resumes from any transcript.
//
// agent knows nothing of Slack, Redis or MCP: it must not import bot, session,
// mcp, slack-go, go-redis or the MCP SDK. It may import provider.
package agent
