package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// PaneContext is what Slack's assistant pane reports about where the person
// is while they talk to the bot in an assistant thread
// (assistant_thread_started, assistant_thread_context_changed): above all
// the channel they are viewing.
type PaneContext struct {
	ChannelID    string `json:"channel_id,omitempty"`
	TeamID       string `json:"team_id,omitempty"`
	EnterpriseID string `json:"enterprise_id,omitempty"`
	// EventTS is the ts of the event that reported it ("1726133698.665188"):
	// a report older than the stored one (a redelivery) never replaces it.
	EventTS string `json:"event_ts"`
}

// paneKey shares the thread's hash tag.
func (k keys) pane(t ThreadKey) string { return k.prefix + ":{t:" + t.String() + "}:pane" }

// setNewerScript stores ARGV[2] unless the stored report is newer (a
// redelivered event), then sets the TTL to ARGV[3] ms; Slack ts values
// compare as numbers. Pane contexts and person titles (title.go) use it.
var setNewerScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'ts')
if cur and tonumber(cur) and tonumber(ARGV[1]) and tonumber(cur) > tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'ts', ARGV[1], 'v', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// SetPaneContext records thread k's pane context unless a newer one is
// stored; it reports whether c was stored. It lives as long as a session.
func (s *Store) SetPaneContext(ctx context.Context, k ThreadKey, c PaneContext) (bool, error) {
	if err := k.validate(); err != nil {
		return false, err
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return false, fmt.Errorf("session: pane context %s: %w", k, err)
	}
	n, err := setNewerScript.Run(ctx, s.rdb, []string{s.k.pane(k)}, c.EventTS, raw, s.opt.SessionTTL.Milliseconds()).Int()
	if err != nil {
		return false, s.wrap("set pane context "+k.String(), err)
	}
	return n == 1, nil
}

// PaneContext returns thread k's last recorded pane context, or ErrNotFound.
func (s *Store) PaneContext(ctx context.Context, k ThreadKey) (PaneContext, error) {
	if err := k.validate(); err != nil {
		return PaneContext{}, err
	}
	raw, err := s.rdb.HGet(ctx, s.k.pane(k), "v").Bytes()
	if errors.Is(err, redis.Nil) {
		return PaneContext{}, fmt.Errorf("session: pane context %s: %w", k, ErrNotFound)
	}
	if err != nil {
		return PaneContext{}, s.wrap("pane context "+k.String(), err)
	}
	var c PaneContext
	if err := json.Unmarshal(raw, &c); err != nil {
		return PaneContext{}, fmt.Errorf("session: pane context %s: corrupt record at %s: %w", k, s.k.pane(k), err)
	}
	return c, nil
}
