package session

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Where a person was last asked to connect an MCP server (the channel and
// thread of a Connect prompt or of /bobbin mcp connect), so the replica that
// receives the OAuth callback, which knows only team, user and server, can
// tell them where they asked. The record is the bot's JSON, short-lived.
//
//	P:{w:T}:oauth:notice:S:U   caller's JSON   TTL as given (the link's lifetime)

func (k keys) oauthNotice(team, server, user string) string {
	return k.prefix + ":{w:" + team + "}:oauth:notice:" + server + ":" + user
}

// PutConnectNotice records where user was asked to connect server, for ttl.
func (s *Store) PutConnectNotice(ctx context.Context, team, server, user string, rec []byte, ttl time.Duration) error {
	if err := errors.Join(checkPart("team", team), checkPart("server name", server), checkPart("user", user)); err != nil {
		return err
	}
	if err := s.rdb.Set(ctx, s.k.oauthNotice(team, server, user), rec, ttl).Err(); err != nil {
		return s.wrap("put connect notice "+server, err)
	}
	return nil
}

// ConnectNotice returns the record PutConnectNotice stored; nil and no
// error when there is none (expired, or never asked).
func (s *Store) ConnectNotice(ctx context.Context, team, server, user string) ([]byte, error) {
	if err := errors.Join(checkPart("team", team), checkPart("server name", server), checkPart("user", user)); err != nil {
		return nil, err
	}
	v, err := s.rdb.Get(ctx, s.k.oauthNotice(team, server, user)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, s.wrap("connect notice "+server, err)
	}
	return v, nil
}
