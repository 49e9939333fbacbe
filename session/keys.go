package session

import (
	"fmt"
	"strings"
)

// ThreadKey names one Slack thread: the unit of a session, a lease and a
// queue. ThreadTS is the ts of the thread's root message (or of the message
// itself for a new thread).
type ThreadKey struct {
	Team, Channel, ThreadTS string
}

// String is "TEAM:CHANNEL:TS", for logs.
func (k ThreadKey) String() string { return k.Team + ":" + k.Channel + ":" + k.ThreadTS }

func (k ThreadKey) validate() error {
	for _, p := range [...]struct{ name, v string }{{"team", k.Team}, {"channel", k.Channel}, {"thread ts", k.ThreadTS}} {
		if err := checkPart(p.name, p.v); err != nil {
			return err
		}
	}
	return nil
}

// parseThreadKey reverses ThreadKey.String.
func parseThreadKey(s string) (ThreadKey, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return ThreadKey{}, fmt.Errorf("session: malformed thread id %q", s)
	}
	k := ThreadKey{parts[0], parts[1], parts[2]}
	return k, k.validate()
}

// checkPart rejects identifiers that could break out of their key segment
// (Slack ids, ts values and server names never contain these).
func checkPart(name, v string) error {
	if v == "" {
		return fmt.Errorf("session: empty %s", name)
	}
	if len(v) > 128 || strings.ContainsAny(v, ":{}* \t\r\n") {
		return fmt.Errorf("session: invalid %s %q", name, v)
	}
	return nil
}

// keys builds every Redis key the store uses. Per-thread keys share the
// hash tag {t:TEAM:CHANNEL:TS}; per-workspace keys share {w:TEAM}; an
// approval's keys share {a:ID}, a question's {e:ID} (elicit.go).
type keys struct{ prefix string }

type threadKeys struct {
	msgs      string // list of JSON provider.Message
	meta      string // JSON Meta
	fence     string // fencing counter
	lease     string // "owner:token", PX LeaseTTL
	queue     string // list of opaque payloads
	grants    string // set of tool names allowed for the session
	approvals string // set of approval ids created in this thread
}

func (k keys) thread(t ThreadKey) threadKeys {
	tag := k.prefix + ":{t:" + t.String() + "}:"
	return threadKeys{
		msgs: tag + "msgs", meta: tag + "meta", fence: tag + "fence", lease: tag + "lease",
		queue: tag + "queue", grants: tag + "grants", approvals: tag + "approvals",
	}
}

// active is the global index of threads with a running (or queued) turn.
func (k keys) active() string { return k.prefix + ":active" }

func (k keys) dedupeEvent(team, eventID string) string {
	return k.prefix + ":{w:" + team + "}:dedupe:evt:" + eventID
}

func (k keys) dedupeMessage(team, channel, ts string) string {
	return k.prefix + ":{w:" + team + "}:dedupe:msg:" + channel + ":" + ts
}

// approval is an approval's record; its wake-up list is the record's key
// with ":wake" (prompt.go).
func (k keys) approval(id string) string { return k.prefix + ":{a:" + id + "}" }

func (k keys) registrations(team string) string { return k.prefix + ":{w:" + team + "}:mcp" }
func (k keys) pins(team, server string) string {
	return k.prefix + ":{w:" + team + "}:pins:" + server
}
func (k keys) audit(team string) string  { return k.prefix + ":{w:" + team + "}:audit" }
func (k keys) rate(bucket string) string { return k.prefix + ":{r:" + bucket + "}" }

// Slack call governor state (governor.go), per workspace: a hash per Web
// API method (budget, pause, AIMD factor), a bucket per method and channel,
// and the pools of live-reply slots.
func (k keys) slackState(team, method string) string {
	return k.prefix + ":{w:" + team + "}:slack:" + method
}
func (k keys) slackChannel(team, method, channel string) string {
	return k.prefix + ":{w:" + team + "}:slack:" + method + ":" + channel
}
func (k keys) slackSlots(team, pool string) string {
	return k.prefix + ":{w:" + team + "}:slots:" + pool
}

// OAuth keys of MCP server connections. Connections and clients share the
// workspace's tag; a pending authorization (state) has its own tag, since
// the callback knows only the state. Issuers are URLs (':' and '/'), so
// they are hashed into the key; the sealed record names the issuer.
func (k keys) oauthConns(team, server string) string {
	return k.prefix + ":{w:" + team + "}:oauth:conn:" + server
}
func (k keys) oauthClient(team, issuerHash string) string {
	return k.prefix + ":{w:" + team + "}:oauth:client:" + issuerHash
}
func (k keys) oauthLock(team, server, principal string) string {
	return k.prefix + ":{w:" + team + "}:oauth:lock:" + server + ":" + principal
}
func (k keys) oauthPrompt(team, server, principal string) string {
	return k.prefix + ":{w:" + team + "}:oauth:prompt:" + server + ":" + principal
}
func (k keys) oauthWake(team, server, principal string) string {
	return k.prefix + ":{w:" + team + "}:oauth:wake:" + server + ":" + principal
}
func (k keys) oauthState(state string) string { return k.prefix + ":{o:" + state + "}" }
