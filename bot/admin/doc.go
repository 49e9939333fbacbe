// Package admin is administration from Slack: the /bobbin command (its
// parser, help and every subcommand: mcp list, tools, add (and add
// slack, Slack's MCP server as a preset), remove,
// approve, scope, policy, connect, disconnect; audit; feedback; profile;
// usage), the add-server form and the App Home (servers, connections,
// Connect and Disconnect buttons).
//
// Seams: Options take the Web API (slackapi.Client), the MCP manager as
// an MCP (cmd/bot adapts *mcp.Manager; it may also be an Auth for OAuth
// servers, a Policies for tool policies, a ScopedStatus for verdicts and
// a SlackPreset for mcp add slack),
// a Store of the session methods administration reads and writes
// (required, checked at build time), People (a person's Standing, user
// groups: the root adapts bot/people), and the root's audit log, Access,
// profile resolution, job runner and bot/ask's Connect hooks
// (ConnectBlocks, RememberConnect) as func fields. The root routes
// /bobbin to Slash, app_home_opened to HomeOpened, Home clicks to Action
// (Clicks) and the add-server form to Submit (CallbackAdd).
//
// Import rule: admin imports bot/slackapi, bot/mrkdwn, bot/internal/...,
// agent, agent/access, agent/servers, agent/profile, session and
// slack-go; never the root package bot, another feature package
// (bot/ask, bot/people, bot/stream, bot/install), mcp or cmd.
package admin
