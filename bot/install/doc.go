// Package install is the bot's multi-workspace side: workspaces install
// the app through OAuth v2 and each gets its own bot token, kept sealed in
// the store.
//
// It owns the install pages (Handler: InstallPath sends the browser to
// Slack's authorize page with a single-use state; RedirectPath checks it
// and exchanges the code with oauth.v2.access, then auth.test), the
// refresh of rotating tokens (under the store's lock, so two replicas
// never spend one refresh token), the process's cache of installations
// (by team, or by enterprise for an org-wide install), the admission of
// envelopes by workspace (Admit, with EventRef, InteractiveRef, SlashRef
// reading what an envelope says), and the removal of an installation on
// app_uninstalled / tokens_revoked (Uninstall).
//
// *Installs is the slackapi.Authorizer of a multi-workspace app: every
// Web API call of a workspace carries its installation's token, or the
// pinned SLACK_BOT_TOKEN's in that token's own workspace. Single-token
// mode does not build an Installs; the root uses slackapi.Static there.
//
// Seams: the store side is Store, required by New; the root gives the
// governor, the governed HTTP client, a client constructor, the pinned
// token and a metric counter in Env. The root keeps the pinned token's
// identity, the event-level uninstall decision (is the token dead?) and
// the retirement of a workspace's data, which apply in both modes.
//
// Import rule: it imports bot/slackapi, session and slack-go; never
// package bot, another feature package (bot/people, bot/stream, bot/ask,
// bot/admin), mcp or cmd.
package install
