// Package playground is Bobbin's local try-it-out mode (`bobbin
// playground`): a small Slack-like web page that drives the real bot
// through the Slack emulator (internal/slackemu), and the demo model that
// answers when no LLM_* is configured.
//
// The page talks only to this package's HTTP handlers, which reach the
// emulator through the narrow Slack interface (slack.go): what a person
// can do in a Slack client (post, click, submit, react, close a modal)
// and what they can see. Fault injection, token minting, forged payloads
// and the emulator's other test controls are not in it, so nothing on the
// page can reach them. Everything a person, another program or the model
// typed is sent to the page as data (JSON), already parsed into a small
// tree of allowed elements (render.go, mrkdwn.go); the page builds DOM
// nodes from it with textContent, under a strict Content-Security-Policy.
//
// The demo model (demo.go) is an OpenAI-compatible streaming endpoint
// answering from a short script; cmd/bot starts it only for the
// playground subcommand.
//
// It imports internal/slackemu and nothing else of this module; never the
// bot, session, agent, mcp or provider packages, slack-go, go-redis or
// the MCP SDK: the bot is wired to the emulator by cmd/bot exactly as to
// Slack.
package playground
