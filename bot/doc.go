// Package bot is Bobbin's Slack adapter and the only importer of slack-go: the
// socket-mode loop with its own bounded dispatch, acks and dedupe, routing of
// mentions, thread replies, DMs and assistant threads, turn orchestration,
// the Stop button's clicks; the reply itself is rendered by bot/stream.
//
// bot may import agent, session and provider. It must not import mcp, the
// provider subpackages or the MCP SDK: tools arrive through the ToolSource
// interface declared here.
package bot
