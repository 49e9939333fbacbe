package session

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxRegistrations bounds the MCP servers one workspace may register, and
// MaxToolPins the pinned tools of one server.
const (
	MaxRegistrations = 100
	MaxToolPins      = 1000
)

// Registration is an MCP server a workspace admin added. Record is opaque
// JSON the caller owns (URL, transport, options); Secrets (header values,
// API keys) are encrypted at rest and decrypted on read.
type Registration struct {
	Name      string
	Record    json.RawMessage
	Secrets   map[string]string
	CreatedBy string
	Created   time.Time

	// rev is the revision this registration was read at ("" when the
	// caller built it): PutRegistration replaces only that revision.
	rev string
}

// LogValue keeps secret values out of logs: only their field names appear.
func (r Registration) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", r.Name), slog.String("created_by", r.CreatedBy),
		slog.Any("secret_fields", slices.Sorted(maps.Keys(r.Secrets))))
}

// Format keeps secret values out of fmt output (%v, %+v, %#v, %s).
func (r Registration) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "{Name:%s Record:%s Secrets:%v CreatedBy:%s Created:%s}", r.Name, r.Record,
		slices.Sorted(maps.Keys(r.Secrets)), r.CreatedBy, r.Created.Format(time.RFC3339))
}

// storedRegistration is a Registration as kept in Redis: secrets sealed.
type storedRegistration struct {
	V         int               `json:"v"`
	Name      string            `json:"name"`
	Record    json.RawMessage   `json:"record,omitempty"`
	Secrets   map[string]sealed `json:"secrets,omitempty"`
	CreatedBy string            `json:"created_by,omitempty"`
	Created   time.Time         `json:"created"`
}

// putRegistrationScript writes a registration if the one it was based on
// is still there. KEYS = the workspace's registrations, its index, its
// version; ARGV = name, value, max, rev. rev "" creates: -1 when the name
// is taken, 0 when the workspace is at its bound. Otherwise rev is the
// SHA-1 of the stored value the write is based on: -2 when the name is
// gone (removed meanwhile), -3 when the value changed meanwhile. 1 when
// written, with the workspace's version bumped.
var putRegistrationScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[4] == '' then
  if cur then return -1 end
  if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
else
  if not cur then return -2 end
  if redis.sha1hex(cur) ~= ARGV[4] then return -3 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[2], KEYS[1], KEYS[3])
redis.call('INCR', KEYS[3])
return 1
`)

// PutRegistration stores a registration (by Name) with compare-and-set
// semantics, so concurrent admin commands cannot undo each other:
//   - a Registration built by the caller (not read from the store) is
//     created; when the name is already registered it fails with ErrExists
//     (of two concurrent adds of one name, one wins);
//   - a Registration read from the store (Registration, Registrations),
//     perhaps changed, replaces the stored one only if that is still the
//     one read: ErrNotFound when it was removed meanwhile (a scope change
//     never resurrects a removed server), ErrConflict when it changed.
//
// Every write bumps the workspace's version (WorkspaceVersion), so every
// replica sees it at its next turn. Secret values are sealed with the
// current SECRET_KEY, bound to team, server name and field; with secrets
// and no key it fails with ErrNoSecretKey. Created defaults to now.
// Registrations have no TTL: they are configuration, bounded by
// MaxRegistrations per workspace.
func (s *Store) PutRegistration(ctx context.Context, team string, r Registration) error {
	if err := errors.Join(checkPart("team", team), checkPart("server name", r.Name)); err != nil {
		return err
	}
	if len(r.Record) > 0 && !json.Valid(r.Record) {
		return fmt.Errorf("session: registration %s: record is not valid JSON", r.Name)
	}
	st := storedRegistration{V: 1, Name: r.Name, Record: r.Record, CreatedBy: r.CreatedBy, Created: r.Created}
	if st.Created.IsZero() {
		st.Created = time.Now().UTC()
	}
	if len(r.Secrets) > 0 {
		st.Secrets = make(map[string]sealed, len(r.Secrets))
		for f, v := range r.Secrets {
			sv, err := s.kek.seal(team, r.Name, f, v)
			if err != nil {
				return fmt.Errorf("session: registration %s: sealing %s: %w", r.Name, f, err)
			}
			st.Secrets[f] = sv
		}
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("session: registration %s: %w", r.Name, err)
	}
	n, err := putRegistrationScript.Run(ctx, s.rdb, []string{s.k.registrations(team), s.k.workspaceIndex(team), s.k.version(team)},
		r.Name, b, MaxRegistrations, r.rev).Int()
	if err != nil {
		return s.wrap("put registration "+r.Name, err)
	}
	switch n {
	case 0:
		return fmt.Errorf("session: registration %s: %w (at most %d per workspace)", r.Name, ErrTooMany, MaxRegistrations)
	case -1:
		return fmt.Errorf("session: registration %s: %w", r.Name, ErrExists)
	case -2:
		return fmt.Errorf("session: registration %s: %w (removed meanwhile)", r.Name, ErrNotFound)
	case -3:
		return fmt.Errorf("session: registration %s: %w", r.Name, ErrConflict)
	}
	return nil
}

// revision names a stored value for putRegistrationScript (redis.sha1hex).
func revision(v string) string {
	h := sha1.Sum([]byte(v))
	return hex.EncodeToString(h[:])
}

// Registration returns one registration with its secrets decrypted.
func (s *Store) Registration(ctx context.Context, team, name string) (Registration, error) {
	if err := errors.Join(checkPart("team", team), checkPart("server name", name)); err != nil {
		return Registration{}, err
	}
	key := s.k.registrations(team)
	v, err := s.rdb.HGet(ctx, key, name).Result()
	if errors.Is(err, redis.Nil) {
		return Registration{}, fmt.Errorf("session: registration %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return Registration{}, s.wrap("registration "+name, err)
	}
	return s.openRegistration(key, team, name, v)
}

// Registrations lists a workspace's registrations by name, secrets
// decrypted. A record that does not decode or whose secrets do not open
// fails the whole call with an error naming key and server (ErrNoSecretKey
// when the key is missing): the caller must not quietly mount fewer servers.
func (s *Store) Registrations(ctx context.Context, team string) ([]Registration, error) {
	if err := checkPart("team", team); err != nil {
		return nil, err
	}
	key := s.k.registrations(team)
	h, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, s.wrap("registrations "+team, err)
	}
	out := make([]Registration, 0, len(h))
	for name, v := range h {
		r, err := s.openRegistration(key, team, name, v)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Registration) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *Store) openRegistration(key, team, name, v string) (Registration, error) {
	var st storedRegistration
	if err := json.Unmarshal([]byte(v), &st); err != nil {
		return Registration{}, fmt.Errorf("session: corrupt registration %q in key %s: %v", name, key, err)
	}
	if st.Name != name {
		return Registration{}, fmt.Errorf("session: corrupt registration %q in key %s: record names %q", name, key, st.Name)
	}
	r := Registration{Name: st.Name, Record: st.Record, CreatedBy: st.CreatedBy, Created: st.Created, rev: revision(v)}
	if len(st.Secrets) > 0 {
		r.Secrets = make(map[string]string, len(st.Secrets))
		for f, sv := range st.Secrets {
			pt, err := s.kek.open(team, name, f, sv)
			if err != nil {
				return Registration{}, fmt.Errorf("session: registration %q in key %s: secret %q: %w", name, key, f, err)
			}
			r.Secrets[f] = pt
		}
	}
	return r, nil
}

// DeleteRegistration removes a registration and its tool pins, and bumps
// the workspace's version. Deleting an unknown name returns ErrNotFound.
func (s *Store) DeleteRegistration(ctx context.Context, team, name string) error {
	if err := errors.Join(checkPart("team", team), checkPart("server name", name)); err != nil {
		return err
	}
	pipe := s.rdb.TxPipeline()
	del := pipe.HDel(ctx, s.k.registrations(team), name)
	pipe.Del(ctx, s.k.pins(team, name))
	pipe.SRem(ctx, s.k.workspaceIndex(team), s.k.pins(team, name))
	s.bump(ctx, pipe, team)
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("delete registration "+name, err)
	}
	if del.Val() == 0 {
		return fmt.Errorf("session: registration %s: %w", name, ErrNotFound)
	}
	return nil
}

// ToolPins returns the pinned definition hashes of a server's tools (tool
// name → hash), or an empty map when none are pinned yet.
func (s *Store) ToolPins(ctx context.Context, team, server string) (map[string]string, error) {
	if err := errors.Join(checkPart("team", team), checkPart("server name", server)); err != nil {
		return nil, err
	}
	m, err := s.rdb.HGetAll(ctx, s.k.pins(team, server)).Result()
	if err != nil {
		return nil, s.wrap("tool pins "+server, err)
	}
	return m, nil
}

// PutToolPins replaces a server's pins atomically (an empty map removes
// them) and bumps the workspace's version. At most MaxToolPins tools.
func (s *Store) PutToolPins(ctx context.Context, team, server string, pins map[string]string) error {
	if err := errors.Join(checkPart("team", team), checkPart("server name", server)); err != nil {
		return err
	}
	if len(pins) > MaxToolPins {
		return fmt.Errorf("session: tool pins %s: %w (%d > %d)", server, ErrTooMany, len(pins), MaxToolPins)
	}
	key := s.k.pins(team, server)
	pipe := s.rdb.TxPipeline()
	pipe.Del(ctx, key)
	if len(pins) > 0 {
		pipe.HSet(ctx, key, pins)
		s.indexed(ctx, pipe, team, key)
	} else {
		pipe.SRem(ctx, s.k.workspaceIndex(team), key)
	}
	s.bump(ctx, pipe, team) // an approval on one replica enables the tools on all
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("put tool pins "+server, err)
	}
	return nil
}
