// Package slackemu is a local Slack for tests and for the playground: the
// Web API over HTTP and Socket Mode over WebSocket on a 127.0.0.1
// listener, faithful enough that the
// real slack-go client (and the bot binary built on it) runs against it
// unchanged by pointing slack.OptionAPIURL / SLACK_API_URL at Server.APIURL.
//
// What it emulates (contract: the Slack reference checklist):
//
//   - Web API: POST /api/<method> (GET for chat.getPermalink) with form or
//     JSON bodies, tokens from the form, the JSON body or a Bearer header;
//     xapp- tokens only for apps.connections.open and
//     apps.event.authorizations.list, bot (xoxb-, xoxe.xoxb-) tokens
//     everywhere else, user tokens for reading.
//     Always HTTP 200 + {"ok":…} except rate limits (429 + Retry-After) and
//     injected HTTP faults.
//   - A message store keyed by channel+ts with threads, the full edit history
//     of every message, ephemeral messages per user, metadata and unfurl flags;
//     Slack's size limits and error codes; native streams with their lifetime;
//     views with single-use trigger ids and a stack of three; response_url
//     endpoints served on the same listener.
//   - Per-method, per-workspace token-bucket rate limits (DefaultRateLimits
//     and MoreRateLimits) and per-method fault injection; a journal of
//     every call with tokens and OAuth secrets redacted.
//   - Socket Mode: apps.connections.open hands out single-use tickets,
//     hello first, server pings, envelopes spread over the live sockets, ack
//     tracking with redelivery of unacked events_api envelopes, user-visible
//     failures for unacked interactive/slash envelopes, disconnect reasons,
//     dropped and half-open connections, raw malformed frames.
//   - Files (files.go): a file host on the emulator's own scheme, host and
//     port serving url_private, url_private_download and thumb_* to a
//     Bearer token with files:read that can see the file (shared where the
//     bot is, or the bot's upload), with the file's Content-Type; any other
//     request gets Slack's 302 to "/?redir=<path>" and a 200 text/html
//     sign-in page. Full file objects in message events (subtype
//     file_share), conversations.replies and files.info; Slack Connect
//     stubs (mode file_access, file_access check_file_info); external files
//     whose url_private is on another host; app uploads
//     (files.getUploadURLExternal, files.completeUploadExternal).
//   - Threads (replies.go): conversations.replies with Slack's cursors,
//     limit, has_more, oldest/latest/inclusive, history scopes and errors;
//     Options.NonMarketplace for 1 call a minute per workspace and 15
//     messages a page.
//   - Installs (oauth.go, installs.go): GET /oauth/v2/authorize (client_id,
//     redirect_uri, state, team, scope, PKCE) answered by a Consent;
//     oauth.v2.access with Basic or form client auth, code and refresh
//     grants, token rotation (xoxe. tokens, expires_in, refresh grace, at
//     most two live tokens, token_expired); per-workspace and org-wide
//     installations, each token confined to its workspace(s);
//     authorizations and context fields in events_api payloads;
//     apps.event.authorizations.list; Uninstall with tokens_revoked and
//     app_uninstalled; apps.uninstall, auth.revoke.
//   - People (people.go): users.info visible per workspace (guests,
//     strangers, enterprise_user), team.info with and without team,
//     usergroups.users.list, Slack Connect channels (Channel.SharedTeams).
//   - App Home (home.go) and shortcuts (shortcuts.go): views.publish with
//     hash, 100 blocks, view_too_large, not_enabled; app_home_opened;
//     message_action and shortcut envelopes for installing teams only.
//   - Agent platform (agents.go): agents.sessions.setStatus / rename
//     (sessions made by streams and bridged from assistant.threads.*,
//     the 1 h processing timeout, a per-workspace refusal switch),
//     task_update / plan_update chunks folded into task cards,
//     chat.stopStream session_status, streams that time out on their own,
//     Slack's Stop (agent_session_stopped, appends then stopped_by_user),
//     retitles, the Messages tab (app_home_opened tab "messages",
//     app_context_changed), context_actions / feedback_buttons,
//     markdown and table blocks, blocks.validate.
//   - Slack as context (search.go): assistant.search.context with
//     action tokens on events and per-person visibility,
//     assistant.search.info, conversations.history, non-Marketplace
//     history limits per workspace.
//   - Scopes: tokens with a scope list (OAuth installs, Team.Scopes) get
//     missing_scope (with needed and provided) where Slack requires one.
//
// Time: real time, except that Options.TimeScale multiplies Slack's built-in
// long durations (rate-limit windows, the redelivery schedule, stream
// lifetime, trigger and response_url expiry, OAuth code, token and refresh
// grace lifetimes) so tests stay fast. Durations
// set explicitly in Options (AckDeadline, RetryDelays, StreamLifetime, …)
// are real time; RateLimit windows, built-in or set, are Slack time and
// always scaled.
//
// # Using it
//
// Setup: New(Options{}) gives two workspaces (DefaultTeams; ids in the
// constants TeamID, UserAlice, ChannelGen, DMAlice, BotToken, AppToken, …)
// and Slack's real timings; Close reaps everything. Point the bot at
// APIURL() with BotToken and AppToken. Options shortens the ack deadline,
// retry schedule, ping period and stream/trigger lifetimes, and sets rate
// limits (DefaultRateLimits) or turns them off.
//
// Driving, as a person in Slack would: Mention, Message,
// AssistantThreadStarted (events_api envelopes); Post (a UserPost with
// files, in a thread, as a guest or an external person, as another app's
// bot, or Silent to seed a thread's history), EditMessage, DeleteMessage,
// AddFile; SlashCommand, Click, ClickRaw, SubmitView, MessageShortcut,
// GlobalShortcut, ClickHome, ClickView, SubmitViewInputs (a view_submission
// with every input in its element's shape, pre-filled values included) (returning an *Interaction whose
// Wait gives the decoded ack; Interaction.URL for URL buttons); OpenHome
// (app_home_opened); OpenMessagesTab, ChangeAppContext,
// StopAgentSession, RetitleAgentSession, ClickFeedback (agent view);
// PostUserMessage (store only); DeliverEvent and
// DeliverEnvelope for hand-made payloads.
//
// Installing, as an admin would: the bot's install page sends the browser
// to AuthorizeURL (SetConsent picks workspace, installer, org-wide or
// deny); Install skips the browser; Uninstall, ExpireToken, RevokeToken.
// AddTeam, AddUser, AddChannel, AddUsergroup, SetUsergroupMembers,
// SetUsergroupDisabled, SetFreePlan, SetBotMember, SetNonMarketplace and
// SetHomeTabEnabled change the world at run time; SetAgentSessionsRefused,
// SetSearchDisabled, SetNonMarketplaceTeam and ExpireActionToken too.
//
// Asserting: Messages, MessageAt, Thread, BotReplies, History (every
// version of a message: Version.Visible is what a person reads),
// Ephemerals, Views, AssistantStatuses, Journal and Calls (every Web API
// and response_url call), RateLimited, Envelopes, Envelope, WaitAck, Acks,
// AckStats (p50/p99 ack latency), Failures (interactions Slack gave up on,
// exhausted event retries), Connections, ClosedConnections, ConnStats;
// AgentSession, SessionStatuses, TaskCards, Searches;
// FileInfo and Downloads (every file-host request), Installations,
// TokenExpiry, HomeView, Usergroups.
//
// Faults: InjectFault (error code, HTTP status, Retry-After, latency per
// method; "files.download" for the file host), SetRateLimit, RevokeToken,
// File.RedirectTo (a file URL that redirects elsewhere), Disconnect(reason, conns…),
// DropConnections (TCP drop), StopPinging (half-open), PausePings,
// SendRaw (malformed frames), Redeliver (same envelope_id, retry 0),
// Resend (same message, new event_id), SetAckDropRate (acks lost on the
// way), ExpireStream, ExpireTrigger.
//
// People in a browser (the playground): React (a person's reaction),
// CloseView (a modal's close button), FileMeta (a file without its bytes),
// Changed (a channel closed at the next state change) and JournalSince
// (the calls after a Call.Seq); View.Errors holds the field errors of the
// last response_action "errors".
//
// Memory: everything is kept by default, for tests to inspect. A
// long-lived server sets Options.JournalLimit (the journal, ack and
// download logs, settled envelopes, failures, closed connections,
// assistant statuses, each person's ephemerals, closed views, envelopes
// parked while no socket is open), MessageLimit (messages per channel),
// VersionLimit (History versions and stream chunks per message) and
// FileBytesLimit (bytes of files kept, oldest evicted). Pending uploads
// and OAuth codes are swept; expired trigger ids, response URLs and
// socket tickets are forgotten ten minutes after they expire.
//
// Tests must poll (Server.WaitFor) with a generous deadline rather than
// assert durations.
//
// Imported by tests and by internal/playground (the product's playground,
// which reaches it only through a narrow interface of person actions: no
// fault injection, token minting or forged payloads). It must not import
// any package of this module,
// slack-go (only its own tests do, to prove compatibility), go-redis or the
// MCP SDK; it is plain net/http plus gorilla/websocket.
package slackemu
