package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A stop request carries a Stop click to the replica running the turn: the
// click may reach any replica, but only the lease holder can cancel the
// turn. The request names the turn it is for, so a click that arrives after
// its turn ended never stops the next one.

// stopTTL bounds how long a stop request waits for its turn's holder to see
// it (holders look every fraction of a second; a dead holder's turn is
// resumed under a new turn id, for which the request is stale anyway).
const stopTTL = time.Minute

// stopKey shares the thread's hash tag.
func (k keys) stop(t ThreadKey) string { return k.prefix + ":{t:" + t.String() + "}:stop" }

// RequestStop asks the replica running turn turnID of thread k to stop it on
// behalf of user by. The holder sees it with StopRequest.
func (s *Store) RequestStop(ctx context.Context, k ThreadKey, turnID, by string) error {
	if err := k.validate(); err != nil {
		return err
	}
	if turnID == "" || strings.Contains(turnID, " ") || by == "" {
		return fmt.Errorf("session: request stop %s: invalid turn id or user", k)
	}
	if err := s.rdb.Set(ctx, s.k.stop(k), turnID+" "+by, stopTTL).Err(); err != nil {
		return s.wrap("request stop "+k.String(), err)
	}
	return nil
}

// StopRequest returns who asked to stop thread k's current turn (the one
// its metadata names), or "" when nobody did. A request for an earlier turn
// is deleted. It costs one GET when there is no request.
func (s *Store) StopRequest(ctx context.Context, k ThreadKey) (by string, err error) {
	if err := k.validate(); err != nil {
		return "", err
	}
	key := s.k.stop(k)
	v, err := s.rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", s.wrap("stop request "+k.String(), err)
	}
	turnID, by, _ := strings.Cut(v, " ")
	raw, err := s.rdb.Get(ctx, s.k.thread(k).meta).Bytes()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", s.wrap("stop request "+k.String(), err)
	}
	var m struct {
		TurnID string `json:"turn_id"`
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return "", fmt.Errorf("session: stop request %s: meta: %w", k, err)
		}
	}
	if m.TurnID != turnID || by == "" {
		// Stale: its turn is over. Delete it unless a new one replaced it.
		_ = s.delIfEqual(ctx, key, v)
		return "", nil
	}
	return by, nil
}

// ClearStop removes thread k's stop request once it has been acted upon.
func (s *Store) ClearStop(ctx context.Context, k ThreadKey) error {
	if err := k.validate(); err != nil {
		return err
	}
	if err := s.rdb.Del(ctx, s.k.stop(k)).Err(); err != nil {
		return s.wrap("clear stop "+k.String(), err)
	}
	return nil
}

// delIfEqualScript: KEYS = key; ARGV = value → deletes key if it holds value.
var delIfEqualScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

func (s *Store) delIfEqual(ctx context.Context, key, v string) error {
	return delIfEqualScript.Run(ctx, s.rdb, []string{key}, v).Err()
}
