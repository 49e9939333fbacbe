package bot

import (
	"testing"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

func TestImports(t *testing.T) {
	m := importcheck.Module
	importcheck.Forbid(t, ".", m+"/mcp", m+"/cmd", m+"/provider/openai", m+"/provider/anthropic", m+"/provider/providertest", m+"/internal", importcheck.MCPSDK)
}

// TestImportsSubtree: the rules of the bot/ subtree. Only the Slack
// packages (bot and below) import slack-go; the platform layer (slackapi,
// mrkdwn) and the internal helpers never import the app or each other's
// dependants.
func TestImportsSubtree(t *testing.T) {
	m := importcheck.Module
	importcheck.OnlyUnder(t, "../...", importcheck.SlackGo, m+"/bot")
	// slackapi knows nothing of the app or its features; mrkdwn is a leaf.
	importcheck.Forbid(t, "./slackapi", m+"/agent", m+"/mcp", m+"/provider", m+"/cmd", m+"/internal", importcheck.MCPSDK)
	importcheck.ForbidExcept(t, "./slackapi", m+"/bot", m+"/bot/mrkdwn", m+"/bot/internal/pause")
	importcheck.Forbid(t, "./mrkdwn", m, importcheck.GoRedis, importcheck.MCPSDK)
	importcheck.Forbid(t, "./internal/jobs", m, importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
	importcheck.Forbid(t, "./internal/pause", m, importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
	importcheck.Forbid(t, "./internal/flight", m, importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
	// Feature packages never import the app or one another: of bot/ they
	// use the platform layer and the internal helpers only.
	for _, feature := range []string{
		"./ask",     // prompts in a thread (approvals, questions, Connect)
		"./stream",  // the reply renderer
		"./people",  // who people are (roles, scope facts, user groups, names)
		"./install", // installations (an slackapi.Authorizer)
		"./admin",   // /bobbin, the add-server form and the App Home
	} {
		importcheck.ForbidExcept(t, feature, m+"/bot", m+"/bot/slackapi", m+"/bot/mrkdwn", m+"/bot/internal")
		importcheck.Forbid(t, feature, m+"/mcp", m+"/cmd", importcheck.MCPSDK)
	}
}

// TestNoStoreAssertions: no non-test file in the module type-asserts a
// store. bot.Store and the other store seams list every method their
// features use, so a store without one fails to build instead of
// switching a feature off at run time.
func TestNoStoreAssertions(t *testing.T) {
	importcheck.NoStoreAssertions(t, "..")
}
