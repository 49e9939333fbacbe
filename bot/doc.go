// Package bot is Bobbin's Slack app. It keeps what shares the app's
// lifecycle: the socket-mode loop with its own bounded dispatch, acks and
// dedupe; admission of mentions, thread replies, DMs, assistant threads and
// agent-view messages; one routing table that hands each action, view and
// command to its feature; workers, turns and takeover of orphaned turns;
// Stop; thread context, files and Slack search; profiles and budgets at turn
// time; metrics.
//
// The features live beside it and never import one another or this package:
// bot/ask (approvals, questions, Connect prompts), bot/stream (the reply
// renderer), bot/people (roles, people, user groups, names), bot/install
// (installations) and bot/admin (/bobbin and the App Home). Each requires
// the store methods it uses in its own Store interface; bot.Store embeds
// them, so *session.Store must have them all at build time. All of them
// reach Slack through bot/slackapi and write mrkdwn through bot/mrkdwn.
//
// bot, and the packages below it, are the only importers of slack-go. bot
// may import agent (and its vocabulary packages), session and provider; it
// must not import mcp, the provider subpackages or the MCP SDK: tools
// arrive through the ToolSource interface declared here.
package bot
