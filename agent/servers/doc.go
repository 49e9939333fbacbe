// Package servers is the vocabulary the bot and the MCP manager share
// about tool servers: a server's status (Status, OAuth), its tools
// (ToolInfo), the servers a turn goes without (NotReady), tool policies
// (Mode, Rule, Policy, ToolPolicy, PolicyReport), a server registered from
// Slack (Registration: the bot hands it to mcp, which owns its stored
// record), and the errors the bot branches on (ErrUnknownServer, …). mcp
// produces these values and the bot shows them, with one definition each,
// so nothing between them converts field by field.
//
// Import rule: a leaf. It imports agent (tool hints) and agent/access
// (scopes) only; mcp and bot both import it, it imports neither.
package servers
