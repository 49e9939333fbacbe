package session

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// AuditLen is the approximate bound of a workspace's audit stream; AuditTTL
// drops the stream of a workspace that stopped producing entries.
const (
	AuditLen = 1000
	AuditTTL = 90 * 24 * time.Hour
)

// AuditEntry is one audit record.
type AuditEntry struct {
	// ID is the stream id; Time is when it was written (Redis clock).
	ID     string
	Time   time.Time
	Fields map[string]string
}

// Audit appends an entry to the workspace's bounded audit stream (about the
// last AuditLen entries are kept). Fields must not contain secrets.
func (s *Store) Audit(ctx context.Context, team string, fields map[string]string) error {
	if err := checkPart("team", team); err != nil {
		return err
	}
	if len(fields) == 0 {
		return fmt.Errorf("session: audit %s: no fields", team)
	}
	key := s.k.audit(team)
	pipe := s.rdb.Pipeline()
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, MaxLen: AuditLen, Approx: true, Values: fields})
	pipe.PExpire(ctx, key, AuditTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("audit "+team, err)
	}
	return nil
}

// RecentAudit returns up to n of the workspace's latest audit entries,
// newest first.
func (s *Store) RecentAudit(ctx context.Context, team string, n int) ([]AuditEntry, error) {
	if err := checkPart("team", team); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, nil
	}
	msgs, err := s.rdb.XRevRangeN(ctx, s.k.audit(team), "+", "-", int64(n)).Result()
	if err != nil {
		return nil, s.wrap("recent audit "+team, err)
	}
	out := make([]AuditEntry, 0, len(msgs))
	for _, m := range msgs {
		e := AuditEntry{ID: m.ID, Fields: make(map[string]string, len(m.Values))}
		if ms, _, ok := strings.Cut(m.ID, "-"); ok {
			if v, err := strconv.ParseInt(ms, 10, 64); err == nil {
				e.Time = time.UnixMilli(v).UTC()
			}
		}
		for k, v := range m.Values {
			e.Fields[k] = fmt.Sprint(v)
		}
		out = append(out, e)
	}
	return out, nil
}
