// Package session is Bobbin's durable, shared state in Redis: thread
// transcripts and their metadata, the per-thread lease with its fencing
// token, the queue of messages that arrive while a turn runs, the index of
// active turns (for takeover by another replica), event dedupe, pending tool
// approvals, per-workspace MCP registrations with encrypted secrets,
// tool-definition pins, shared rate budgets and a bounded audit stream.
//
// It is the only package that imports go-redis and it owns every Redis key.
// All keys of one thread share one Cluster hash tag ({t:TEAM:CHANNEL:TS});
// every key carries a TTL or is bounded in size. With an empty URL the store
// runs an in-process Redis (miniredis): state then does not survive a restart
// and only one replica may run.
//
// session may import provider only; it must never import agent, bot, mcp,
// slack-go or the MCP SDK.
package session
