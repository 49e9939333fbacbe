// Package ask is human-in-the-loop prompts in a thread: approvals of tool
// calls (the agent.Approver of a turn), questions from MCP servers (Ask:
// forms of agent/ask's fields, or a page to open) and Connect prompts of
// OAuth servers (PromptConnect, ConnectDone).
//
// Approvals and questions are one lifecycle, written once (prompts.go):
// post the prompt in the thread, record it in Redis (after posting: the
// buttons carry its id, and a click that beats the record waits for it),
// wait for the answer from any replica, then settle the message (expired,
// withdrawn, the turn stopped or the bot restarting) or let the click
// that answered update it; Withdraw closes a thread's open prompts for a
// Stop that reached another replica. A Connect prompt is posted and
// remembered (where it was asked, for ConnectDone); the MCP manager waits
// for the connection.
//
// Seams: Options take the Web API (slackapi.Client), a Store of the
// session methods prompts use (required, checked at build time), Roles
// (who may decide, who is an admin), the root's audit log, job runner and
// turn bookkeeping (Waiting, StoppedBy, Shutdown, Stop) and Home. The
// root routes clicks to Action (Clicks, ActionIDs) and form submissions
// to Submit (CallbackQuestion).
//
// Import rule: ask imports bot/slackapi, bot/mrkdwn, bot/internal/...,
// agent, agent/ask, session and provider; never the root package bot,
// another feature package (bot/people, bot/stream, bot/admin, …), mcp or
// cmd.
package ask
