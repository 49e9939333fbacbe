package session

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// admitScript: KEYS = identities; ARGV = TTL ms → 1 if none was seen
// before. Every identity is recorded either way, so a duplicate that arrives
// under a new event_id also marks that id.
var admitScript = redis.NewScript(`
local seen = 0
for i = 1, #KEYS do
  if redis.call('SET', KEYS[i], '1', 'NX', 'PX', ARGV[1]) == false then seen = 1 end
end
if seen == 1 then return 0 end
return 1
`)

// Admit records an incoming Slack event and reports whether it is the first
// copy: first-writer-wins on the event id and on the message identity
// (team + channel + ts), both in one atomic step, remembered for DedupeTTL.
// eventID, or channel and ts, may be empty (then that identity is not
// checked); with neither, every call is first. On error nothing is known:
// do not ack, so Slack redelivers.
func (s *Store) Admit(ctx context.Context, team, eventID, channel, ts string) (first bool, err error) {
	ks, err := s.dedupeKeys(team, eventID, channel, ts)
	if err != nil || len(ks) == 0 {
		return err == nil, err
	}
	n, err := admitScript.Run(ctx, s.rdb, ks, s.opt.DedupeTTL.Milliseconds()).Int()
	if err != nil {
		return false, s.wrap("admit", err)
	}
	return n == 1, nil
}

// Forget removes what Admit recorded, for an event the caller admitted but
// then could not take on (it will not ack, and Slack's retry must get
// through).
func (s *Store) Forget(ctx context.Context, team, eventID, channel, ts string) error {
	ks, err := s.dedupeKeys(team, eventID, channel, ts)
	if err != nil || len(ks) == 0 {
		return err
	}
	if err := s.rdb.Del(ctx, ks...).Err(); err != nil {
		return s.wrap("forget", err)
	}
	return nil
}

func (s *Store) dedupeKeys(team, eventID, channel, ts string) ([]string, error) {
	if err := checkPart("team", team); err != nil {
		return nil, err
	}
	var ks []string
	if eventID != "" {
		if err := checkPart("event id", eventID); err != nil {
			return nil, err
		}
		ks = append(ks, s.k.dedupeEvent(team, eventID))
	}
	if channel != "" || ts != "" {
		if err := errors.Join(checkPart("channel", channel), checkPart("ts", ts)); err != nil {
			return nil, err
		}
		ks = append(ks, s.k.dedupeMessage(team, channel, ts))
	}
	return ks, nil
}
