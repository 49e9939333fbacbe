// Package people is the bot's one directory of the people it deals with in
// Slack: who someone is (users.info: their role for the bot's controls, and
// the guest and other-organization facts tool scopes need), who is in a
// user group (usergroups.users.list, shared by every replica through the
// Store), and what people, workspaces and channels are called (for the
// system prompt and the transcript).
//
// One Directory caches it all: one users.info answer serves a person's
// role, their scope facts and their name; concurrent lookups of one thing
// share a single Slack call (singleflight); every cache is bounded (an LRU
// with a TTL).
//
// Seams: every Web API call goes through a *slackapi.Client; the shared
// user group cache is the Store (required, *session.Store has it).
//
// Import rule: people imports bot/slackapi, agent/access and slack-go; it
// never imports package bot or another feature package (bot/ask,
// bot/admin, bot/install, bot/stream). Features that need a person's role
// declare a small interface (MayAct, Role) that *Directory satisfies.
package people
