// Package slackemu is a local Slack for tests: the Web API over HTTP and
// Socket Mode over WebSocket on a 127.0.0.1 listener, faithful enough that the
// real slack-go client (and the bot binary built on it) runs against it
// unchanged by pointing slack.OptionAPIURL / SLACK_API_URL at Server.APIURL.
//
// What it emulates (contract: the Slack reference checklist):
//
//   - Web API: POST /api/<method> (GET for chat.getPermalink) with form or
//     JSON bodies, tokens from the form, the JSON body or a Bearer header;
//     xapp- tokens only for apps.connections.open, xoxb- everywhere else.
//     Always HTTP 200 + {"ok":…} except rate limits (429 + Retry-After) and
//     injected HTTP faults.
//   - A message store keyed by channel+ts with threads, the full edit history
//     of every message, ephemeral messages per user, metadata and unfurl flags;
//     Slack's size limits and error codes; native streams with their lifetime;
//     views with single-use trigger ids and a stack of three; response_url
//     endpoints served on the same listener.
//   - Per-method, per-workspace token-bucket rate limits and per-method fault
//     injection; a journal of every call with tokens redacted.
//   - Socket Mode: apps.connections.open hands out single-use tickets,
//     hello first, server pings, envelopes spread over the live sockets, ack
//     tracking with redelivery of unacked events_api envelopes, user-visible
//     failures for unacked interactive/slash envelopes, disconnect reasons,
//     dropped and half-open connections, raw malformed frames.
//
// Time: real time, except that Options.TimeScale multiplies Slack's built-in
// long durations (rate-limit windows, the redelivery schedule, stream
// lifetime, trigger and response_url expiry) so tests stay fast. Durations
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
// AssistantThreadStarted (events_api envelopes); SlashCommand, Click,
// ClickRaw, SubmitView (returning an *Interaction whose Wait gives the
// decoded ack); PostUserMessage (store only); DeliverEvent and
// DeliverEnvelope for hand-made payloads.
//
// Asserting: Messages, MessageAt, Thread, BotReplies, History (every
// version of a message: Version.Visible is what a person reads),
// Ephemerals, Views, AssistantStatuses, Journal and Calls (every Web API
// and response_url call), RateLimited, Envelopes, Envelope, WaitAck, Acks,
// AckStats (p50/p99 ack latency), Failures (interactions Slack gave up on,
// exhausted event retries), Connections, ClosedConnections, ConnStats.
//
// Faults: InjectFault (error code, HTTP status, Retry-After, latency per
// method), SetRateLimit, RevokeToken, Disconnect(reason, conns…),
// DropConnections (TCP drop), StopPinging (half-open), PausePings,
// SendRaw (malformed frames), Redeliver (same envelope_id, retry 0),
// Resend (same message, new event_id), SetAckDropRate (acks lost on the
// way), ExpireStream, ExpireTrigger.
//
// Tests must poll (Server.WaitFor) with a generous deadline rather than
// assert durations.
//
// Imported only from tests. It must not import any package of this module,
// slack-go (only its own tests do, to prove compatibility), go-redis or the
// MCP SDK; it is plain net/http plus gorilla/websocket.
package slackemu
