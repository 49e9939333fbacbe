package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// OAuth state of MCP server connections (issue 13). The mcp package owns
// the records' contents (opaque JSON here) and declares the interfaces these
// methods satisfy; the store seals every record with SECRET_KEY, binding it
// to its workspace, server and principal (a Slack user id, or "" for the
// workspace's own connection), so a record copied under another key fails
// to open.
//
//	P:{w:T}:oauth:conn:S          hash principal → sealed connection (tokens)   no TTL
//	P:{w:T}:oauth:client:H        sealed dynamically registered client (H = sha256(issuer))  no TTL
//	P:{w:T}:oauth:lock:S:P        refresh lock "token", PX ttl
//	P:{w:T}:oauth:wake:S:P        wake-up list for waiters                     TTL 60 s
//	P:{w:T}:oauth:wake:S:P:last   "id|outcome" of the last connect attempt       TTL 10 min
//	P:{o:STATE}                   pending authorization {team, sealed}         TTL ≤ 10 min, taken once

// workspacePrincipal stands for "" (the workspace's connection) in keys and
// AAD; Slack user ids are upper-case, so it cannot collide with one.
const workspacePrincipal = "-"

func principalPart(p string) (string, error) {
	if p == "" {
		return workspacePrincipal, nil
	}
	if p == workspacePrincipal {
		return "", fmt.Errorf("session: invalid principal %q", p)
	}
	return p, checkPart("principal", p)
}

func connField(principal string) string { return "oauth:conn:" + principal }

// sealRecord seals rec under the keyring's current key as JSON.
func (s *Store) sealRecord(team, server, field string, rec []byte) (string, error) {
	sv, err := s.kek.seal(team, server, field, string(rec))
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(sv)
	return string(b), err
}

func (s *Store) openRecord(key, team, server, field, v string) ([]byte, error) {
	var sv sealed
	if err := json.Unmarshal([]byte(v), &sv); err != nil {
		return nil, fmt.Errorf("session: corrupt sealed record in key %s: %v", key, err)
	}
	pt, err := s.kek.open(team, server, field, sv)
	if err != nil {
		return nil, fmt.Errorf("session: record in key %s: %w", key, err)
	}
	return []byte(pt), nil
}

// OAuthConnection returns the connection record of (team, server,
// principal), opened; nil and no error when there is none.
func (s *Store) OAuthConnection(ctx context.Context, team, server, principal string) ([]byte, error) {
	p, err := principalPart(principal)
	if err = errors.Join(err, checkPart("team", team), checkPart("server name", server)); err != nil {
		return nil, err
	}
	key := s.k.oauthConns(team, server)
	v, err := s.rdb.HGet(ctx, key, p).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, s.wrap("oauth connection "+server, err)
	}
	return s.openRecord(key, team, server, connField(p), v)
}

// PutOAuthConnection creates or replaces a connection record, sealed, and
// bumps the workspace's version (other replicas drop their cached tokens).
func (s *Store) PutOAuthConnection(ctx context.Context, team, server, principal string, rec []byte) error {
	p, err := principalPart(principal)
	if err = errors.Join(err, checkPart("team", team), checkPart("server name", server)); err != nil {
		return err
	}
	v, err := s.sealRecord(team, server, connField(p), rec)
	if err != nil {
		return fmt.Errorf("session: oauth connection %s: sealing: %w", server, err)
	}
	key := s.k.oauthConns(team, server)
	pipe := s.rdb.TxPipeline()
	pipe.HSet(ctx, key, p, v)
	s.indexed(ctx, pipe, team, key)
	s.bump(ctx, pipe, team)
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("put oauth connection "+server, err)
	}
	return nil
}

// DeleteOAuthConnection removes a connection record and bumps the
// workspace's version (absent is not an
// error).
func (s *Store) DeleteOAuthConnection(ctx context.Context, team, server, principal string) error {
	p, err := principalPart(principal)
	if err = errors.Join(err, checkPart("team", team), checkPart("server name", server)); err != nil {
		return err
	}
	pipe := s.rdb.TxPipeline()
	pipe.HDel(ctx, s.k.oauthConns(team, server), p)
	s.bump(ctx, pipe, team)
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("delete oauth connection "+server, err)
	}
	return nil
}

// DeleteOAuthConnections removes every connection of a server (when its
// registration is removed).
func (s *Store) DeleteOAuthConnections(ctx context.Context, team, server string) error {
	if err := errors.Join(checkPart("team", team), checkPart("server name", server)); err != nil {
		return err
	}
	key := s.k.oauthConns(team, server)
	pipe := s.rdb.TxPipeline()
	pipe.Del(ctx, key)
	pipe.SRem(ctx, s.k.workspaceIndex(team), key)
	s.bump(ctx, pipe, team)
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("delete oauth connections "+server, err)
	}
	return nil
}

func issuerHash(issuer string) string {
	h := sha256.Sum256([]byte(issuer))
	return hex.EncodeToString(h[:16])
}

// OAuthClient returns the client the workspace registered dynamically with
// the authorization server issuer, opened; nil when there is none.
func (s *Store) OAuthClient(ctx context.Context, team, issuer string) ([]byte, error) {
	if err := checkPart("team", team); err != nil {
		return nil, err
	}
	if issuer == "" {
		return nil, errors.New("session: empty issuer")
	}
	key := s.k.oauthClient(team, issuerHash(issuer))
	v, err := s.rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, s.wrap("oauth client", err)
	}
	return s.openRecord(key, team, "oauth:client", issuer, v)
}

// PutOAuthClient stores a dynamically registered client, sealed and bound
// to its issuer.
func (s *Store) PutOAuthClient(ctx context.Context, team, issuer string, rec []byte) error {
	if err := checkPart("team", team); err != nil {
		return err
	}
	if issuer == "" {
		return errors.New("session: empty issuer")
	}
	v, err := s.sealRecord(team, "oauth:client", issuer, rec)
	if err != nil {
		return fmt.Errorf("session: oauth client: sealing: %w", err)
	}
	key := s.k.oauthClient(team, issuerHash(issuer))
	pipe := s.rdb.TxPipeline()
	pipe.Set(ctx, key, v, 0)
	s.indexed(ctx, pipe, team, key)
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("put oauth client", err)
	}
	return nil
}

// MaxOAuthStateTTL bounds how long a pending authorization lives.
const MaxOAuthStateTTL = 10 * time.Minute

type storedState struct {
	Team   string `json:"team"`
	Sealed string `json:"sealed"`
}

func checkState(state string) error {
	if len(state) < 16 || len(state) > 128 {
		return errors.New("session: oauth state must be 16 to 128 characters")
	}
	return checkPart("oauth state", state)
}

// PutOAuthState records a pending authorization under its random state for
// ttl (at most MaxOAuthStateTTL). The record (it holds the PKCE verifier)
// is sealed, bound to team and state. An existing state is never replaced.
func (s *Store) PutOAuthState(ctx context.Context, state, team string, rec []byte, ttl time.Duration) error {
	if err := errors.Join(checkState(state), checkPart("team", team)); err != nil {
		return err
	}
	if ttl <= 0 || ttl > MaxOAuthStateTTL {
		ttl = MaxOAuthStateTTL
	}
	v, err := s.sealRecord(team, "oauth:state", state, rec)
	if err != nil {
		return fmt.Errorf("session: oauth state: sealing: %w", err)
	}
	b, _ := json.Marshal(storedState{Team: team, Sealed: v})
	ok, err := s.rdb.SetNX(ctx, s.k.oauthState(state), b, ttl).Result()
	if err != nil {
		return s.wrap("put oauth state", err)
	}
	if !ok {
		return errors.New("session: oauth state already exists")
	}
	return nil
}

// takeStateScript reads and deletes a key in one step (GETDEL for servers
// before Redis 6.2).
var takeStateScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then redis.call('DEL', KEYS[1]) end
return v
`)

// TakeOAuthState returns and deletes a pending authorization: exactly one
// caller across all replicas gets it. Unknown, already used and expired
// states all return "", nil, nil.
func (s *Store) TakeOAuthState(ctx context.Context, state string) (team string, rec []byte, err error) {
	if err := checkState(state); err != nil {
		return "", nil, nil // not a state we could have made
	}
	key := s.k.oauthState(state)
	v, err := takeStateScript.Run(ctx, s.rdb, []string{key}).Text()
	if errors.Is(err, redis.Nil) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, s.wrap("take oauth state", err)
	}
	var st storedState
	if err := json.Unmarshal([]byte(v), &st); err != nil || checkPart("team", st.Team) != nil {
		return "", nil, fmt.Errorf("session: corrupt oauth state in key %s", key)
	}
	pt, err := s.openRecord(key, st.Team, "oauth:state", state, st.Sealed)
	if err != nil {
		return "", nil, err
	}
	return st.Team, pt, nil
}

// unlockScript deletes the lock only if it still holds our token.
var unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// oauthLockPoll is how often a waiting LockOAuth retries.
const oauthLockPoll = 25 * time.Millisecond

// LockOAuth takes the refresh lock of (team, server, principal), waiting
// until it is free or ctx ends. The lock expires after ttl even if its
// holder dies; unlock releases it only while it is still ours. Two replicas
// holding it in turn never both spend one rotating refresh token, as long
// as the holder re-reads the connection after locking.
func (s *Store) LockOAuth(ctx context.Context, team, server, principal string, ttl time.Duration) (unlock func(), err error) {
	p, err := principalPart(principal)
	if err = errors.Join(err, checkPart("team", team), checkPart("server name", server)); err != nil {
		return nil, err
	}
	return s.lockKey(ctx, s.k.oauthLock(team, server, p), ttl, "oauth lock")
}

// ClaimOAuthPrompt claims the one Connect prompt of (team, server,
// principal) across replicas: claimed is false when another replica's
// prompt is still out (its turn waits for the connection too, and asks
// again only when that prompt is over). The claim expires after ttl even
// if its holder dies; release ends it while it is still ours.
func (s *Store) ClaimOAuthPrompt(ctx context.Context, team, server, principal string, ttl time.Duration) (release func(), claimed bool, err error) {
	p, err := principalPart(principal)
	if err = errors.Join(err, checkPart("team", team), checkPart("server name", server)); err != nil {
		return nil, false, err
	}
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	key := s.k.oauthPrompt(team, server, p)
	ok, err := s.rdb.SetNX(ctx, key, token, ttl).Result()
	if err != nil {
		return nil, false, s.wrap("oauth prompt "+server, err)
	}
	if !ok {
		return func() {}, false, nil
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := unlockScript.Run(ctx, s.rdb, []string{key}, token).Err(); err != nil {
			s.log.Warn("session: releasing an oauth prompt claim", "err", err)
		}
	}, true, nil
}

// NotifyOAuth wakes whoever waits for (team, server, principal), on any
// replica, with outcome (e.g. "connected" or a short failure text).
func (s *Store) NotifyOAuth(ctx context.Context, team, server, principal, outcome string) error {
	p, err := principalPart(principal)
	if err = errors.Join(err, checkPart("team", team), checkPart("server name", server)); err != nil {
		return err
	}
	if outcome == "" {
		outcome = "connected"
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := s.k.oauthWake(team, server, p)
	pipe := s.rdb.TxPipeline()
	pipe.Set(ctx, key+":last", hex.EncodeToString(b[:])+"|"+outcome, MaxOAuthStateTTL)
	pipe.RPush(ctx, key, "1")
	pipe.LTrim(ctx, key, -64, -1)
	pipe.PExpire(ctx, key, time.Minute)
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("notify oauth", err)
	}
	return nil
}

// WaitOAuth blocks until a NotifyOAuth of (team, server, principal) made
// after it started (on any replica) and returns its outcome, or returns
// ctx's error. Every waiter sees the notification: each compares the last
// outcome with the one it saw at the start, and a wake-up list only cuts
// the wait short (one waiter takes a token; the others notice within a
// second). A notification made just before the call is missed, so callers
// also re-check the connection itself.
func (s *Store) WaitOAuth(ctx context.Context, team, server, principal string) (string, error) {
	p, err := principalPart(principal)
	if err = errors.Join(err, checkPart("team", team), checkPart("server name", server)); err != nil {
		return "", err
	}
	key := s.k.oauthWake(team, server, p)
	last := func() (string, error) {
		v, err := s.rdb.Get(ctx, key+":last").Result()
		if errors.Is(err, redis.Nil) {
			return "", nil
		}
		return v, err
	}
	v0, err := last()
	if err != nil {
		return "", s.wrap("wait oauth", err)
	}
	// A dedicated connection of the waits client (on the key's node): BLPOP
	// holds it.
	conn, err := s.waitConn(ctx, key)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		// BLPOP runs without ctx (a cancelled read would poison the
		// connection); the one-second block bounds the delay instead.
		err := conn.Do(context.WithoutCancel(ctx), "BLPOP", key, strconv.FormatFloat(waitPoll.Seconds(), 'f', 3, 64)).Err()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", s.wrap("wait oauth", err)
		}
		v, err := last()
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", s.wrap("wait oauth", err)
		}
		if v != "" && v != v0 {
			_, outcome, _ := strings.Cut(v, "|")
			return outcome, nil
		}
	}
}
