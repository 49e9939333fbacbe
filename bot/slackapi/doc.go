// Package slackapi is the bot's only path to Slack's Web API. A Client
// runs each call (Do) within the governor's budget (per method, per
// workspace, shared by every replica in Redis; 429 pauses; must-deliver
// before lossy), with the workspace's client from an Authorizer: Static
// for the app's own bot token, the installations store for a
// multi-workspace app. The Transport under every slack-go client records
// each call's outcome (bobbin_slack_calls_total) and governs any request
// that skipped Do. methods.go names every method the bot calls and
// scopes.go gives each its slack-go methods and scopes (the manifest test
// in package bot checks both against the code).
//
// A call the governor makes wait for budget, or drops or merges, is a
// "slack.budget_wait" span under the span in its context, from that span's
// own TracerProvider (governor_trace.go): nothing to inject, nothing built
// when tracing is off or the call did not wait.
//
// It must not import package bot or its feature packages; of this module
// it uses session's budget types (and may use bot/mrkdwn and bot/internal/pause).
package slackapi
