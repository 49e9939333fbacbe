package session

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// isClusterURL reports whether u names Redis Cluster seed nodes: the
// cluster=true query parameter. One explicit marker, because a plain
// redis:// URL with addr= parameters could as well be a typo for Sentinel.
func isClusterURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	return p.Query().Has("cluster")
}

// parseClusterURL reads redis[s]://[user:pass@]host:port[/0]?cluster=true[&addr=host:port…]
// (go-redis's ParseClusterURL plus our marker). Errors never quote the URL:
// it may carry a password.
func parseClusterURL(u string) (*redis.ClusterOptions, error) {
	p, err := url.Parse(u)
	if err != nil {
		return nil, errors.New("session: REDIS_URL is not a valid Redis Cluster URL (redis://node1:6379?cluster=true&addr=node2:6379)")
	}
	q := p.Query()
	if v := q.Get("cluster"); v != "true" && v != "1" {
		return nil, errors.New("session: REDIS_URL: cluster must be true (redis://node1:6379?cluster=true&addr=node2:6379)")
	}
	q.Del("cluster")
	// Redis Cluster has one database; "/0" is accepted, anything else is a
	// mistake worth naming.
	if db := strings.Trim(p.Path, "/"); db != "" && db != "0" {
		return nil, errors.New("session: REDIS_URL: Redis Cluster has only database 0")
	}
	p.Path = ""
	p.RawQuery = q.Encode()
	co, err := redis.ParseClusterURL(p.String())
	if err != nil {
		// go-redis names the offending option, never the password.
		msg := strings.TrimPrefix(err.Error(), "redis: ")
		if strings.Contains(msg, "@") {
			msg = "malformed URL"
		}
		return nil, fmt.Errorf("session: REDIS_URL is not a valid Redis Cluster URL: %s", msg)
	}
	return co, nil
}

// waitConn gives WaitApproval a dedicated connection to the node that owns
// key: on one node any connection of s.waits, in a cluster one of the
// waits client's connections to the key's primary (BLPOP must run there).
func (s *Store) waitConn(ctx context.Context, key string) (*redis.Conn, error) {
	switch c := s.waits.(type) {
	case *redis.Client:
		return c.Conn(), nil
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, s.wrap("wait: locating "+key, err)
		}
		return node.Conn(), nil
	default:
		return nil, fmt.Errorf("session: unexpected redis client %T", s.waits)
	}
}
