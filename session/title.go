package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// PersonTitle records that a person titled a thread's agent session in
// Slack (agent_session_title_changed): the bot then never renames that
// session.
type PersonTitle struct {
	// User is who set Title.
	User  string `json:"user"`
	Title string `json:"title"`
	// EventTS is the ts of the event that reported it: a report older
	// than the stored one (a redelivery) never replaces it.
	EventTS string `json:"event_ts"`
}

// title shares the thread's hash tag.
func (k keys) title(t ThreadKey) string { return k.prefix + ":{t:" + t.String() + "}:title" }

// SetPersonTitle records that a person titled thread k's agent session,
// unless a newer report is stored; it reports whether pt was stored. It
// lives SessionTTL from the last report.
func (s *Store) SetPersonTitle(ctx context.Context, k ThreadKey, pt PersonTitle) (bool, error) {
	if err := k.validate(); err != nil {
		return false, err
	}
	raw, err := json.Marshal(pt)
	if err != nil {
		return false, fmt.Errorf("session: person title %s: %w", k, err)
	}
	n, err := setNewerScript.Run(ctx, s.rdb, []string{s.k.title(k)}, pt.EventTS, raw, s.opt.SessionTTL.Milliseconds()).Int()
	if err != nil {
		return false, s.wrap("set person title "+k.String(), err)
	}
	return n == 1, nil
}

// PersonTitle returns the title a person gave thread k's agent session,
// or ErrNotFound when none is recorded (never, or longer ago than
// SessionTTL).
func (s *Store) PersonTitle(ctx context.Context, k ThreadKey) (PersonTitle, error) {
	if err := k.validate(); err != nil {
		return PersonTitle{}, err
	}
	raw, err := s.rdb.HGet(ctx, s.k.title(k), "v").Bytes()
	if errors.Is(err, redis.Nil) {
		return PersonTitle{}, fmt.Errorf("session: person title %s: %w", k, ErrNotFound)
	}
	if err != nil {
		return PersonTitle{}, s.wrap("person title "+k.String(), err)
	}
	var pt PersonTitle
	if err := json.Unmarshal(raw, &pt); err != nil {
		return PersonTitle{}, fmt.Errorf("session: person title %s: corrupt record at %s: %w", k, s.k.title(k), err)
	}
	return pt, nil
}
