// Package session is Bobbin's durable, shared state in Redis: thread
// transcripts and their metadata, the per-thread lease with its fencing
// token, the queue of messages that arrive while a turn runs, the index of
// active turns (for takeover by another replica), event dedupe, pending tool
// approvals and MCP servers' questions (one lifecycle, prompt.go),
// per-workspace MCP registrations with encrypted secrets, tool-definition pins,
// shared rate budgets, a bounded audit stream, and the sealed Slack
// installations of a multi-workspace deployment with the clean-up of
// uninstalled workspaces, and a sealed per-thread cache of the messages the
// bot received (ThreadCache).
//
// It is the only package that imports go-redis and it owns every Redis key.
// With an empty URL the store runs an in-process Redis (miniredis): state
// then does not survive a restart and only one replica may run. A URL with
// cluster=true names Redis Cluster seed nodes (go-redis's cluster client).
//
// # Keys
//
// Every key starts with Options.Prefix (P). All keys of one thread share the
// Cluster hash tag {t:TEAM:CHANNEL:TS}, a workspace's keys share {w:TEAM},
// an approval's keys share {a:ID}, a question's {e:ID}; every Lua script
// touches one tag only.
//
//	P:{t:…}:msgs       list, one JSON provider.Message per element   TTL SessionTTL, refreshed by writes
//	P:{t:…}:meta       JSON Meta                                    TTL SessionTTL
//	P:{t:…}:fence      fencing counter                              TTL SessionTTL
//	P:{t:…}:lease      "owner:token"                                TTL LeaseTTL, renewed by the holder
//	P:{t:…}:queue      payloads that arrived mid-turn               TTL SessionTTL, ≤ MaxQueue
//	P:{t:…}:grants     set of tools allowed for the session         TTL SessionTTL
//	P:{t:…}:approvals  set of approval ids of the thread            TTL ≥ SessionTTL
//	P:{t:…}:elicits    set of question ids of the thread            TTL ≥ SessionTTL
//	P:{t:…}:pane       hash: newest pane context (assistant pane)    TTL SessionTTL from its last report
//	P:{t:…}:title      hash: a person's title of the agent session   TTL SessionTTL from its last report
//	P:{t:…}:cache      hash ts → sealed received message ("x": deleted) TTL ThreadCacheOptions.TTL (SessionTTL), ≤ MaxMessages, MaxBytes
//	P:{t:…}:cache:order zset of the cached ts; …:cache:meta coverage  same TTL (threadcache.go)
//	P:active           zset of threads with a lease (score = token) TTL SessionTTL, pruned by Orphans
//	P:{w:T}:dedupe:…   event and message identities                 TTL DedupeTTL (≥ 24 h)
//	P:{w:T}:mcp        hash server name → registration (sealed)     ≤ MaxRegistrations
//	P:{w:T}:pins:S     hash tool name → definition hash             ≤ MaxToolPins
//	P:{w:T}:audit      stream                                       ≈ AuditLen entries, TTL AuditTTL
//	P:{w:ID}:install   sealed Slack installation (ID = team or org) no TTL; lock, aliases: install.go
//	P:{w:T}:usage:d:D  hash of a UTC day's usage (usage.go)         TTL retention
//	P:{w:T}:usage:m:M  hash of a UTC month's usage                  TTL retention + 31 days
//	P:{w:T}:profiles   hash channel → bound profile                 indexed
//	P:{w:T}:index      set of the workspace's keys without a TTL    bounded by its servers
//	P:{w:T}:retired    uninstalled: the workspace's data expires     TTL SessionTTL
//	P:{si:STATE}       pending Slack install                         TTL ≤ MaxInstallStateTTL
//	P:{a:ID}, …:wake   approval hash and its wake-up list           TTL Expires + ApprovalRetention
//	P:{e:ID}, …:wake   question hash (spec, answer sealed) and list TTL Expires + ApprovalRetention
//	P:{r:BUCKET}       GCRA arrival time                            TTL until the bucket is full again
//
// # A turn across replicas
//
// A message for a thread is Enqueued; Enqueue says whether a lease is held.
// If not, the receiver Acquires the thread (ErrLeaseHeld: someone else was
// faster and will see the message), runs Lease.Run in a goroutine it owns,
// Dequeues and runs turns, writing with Lease.Token() (ErrStaleFence means
// another replica took over: stop without side effects), and finishes with
// Lease.ReleaseIfIdle, which refuses while the queue is not empty. A
// replica that dies leaves its thread in the active index; Orphans lists it
// once the lease expires, and another replica Acquires it (a larger token)
// and resumes from the transcript and Meta (ReplyTS, Phase,
// PendingApprovals). Lease.Handover is the graceful-shutdown variant.
//
// session may import provider only; it must never import agent, bot, mcp,
// slack-go or the MCP SDK.
package session
