package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Slack installations (issue 16): one per workspace, or one per Enterprise
// Grid org for an org-wide install, each sealed with SECRET_KEY and bound
// to its id (a record copied under another workspace's key fails to open).
//
//	P:{w:ID}:install        sealed Installation (ID = team, or enterprise for org-wide)   no TTL
//	P:{w:ID}:install:lock   token-refresh lock "token"                                      PX ttl
//	P:{w:T}:install:via     id of the org-wide installation serving team T                  indexed
//	P:{w:E}:install:teams   set of teams seen under org-wide installation E                 indexed
//	P:{w:T}:index           set of the workspace's keys that have no TTL                    bounded
//	P:{w:T}:retired         the workspace was uninstalled: its data expires (RetireWorkspace) TTL SessionTTL
//	P:{si:STATE}            pending Slack install (the OAuth state)                         TTL ≤ 10 min, taken once

func (k keys) install(id string) string       { return k.prefix + ":{w:" + id + "}:install" }
func (k keys) installLock(id string) string   { return k.prefix + ":{w:" + id + "}:install:lock" }
func (k keys) installVia(team string) string  { return k.prefix + ":{w:" + team + "}:install:via" }
func (k keys) installTeams(id string) string  { return k.prefix + ":{w:" + id + "}:install:teams" }
func (k keys) workspaceIndex(t string) string { return k.prefix + ":{w:" + t + "}:index" }
func (k keys) retired(team string) string     { return k.prefix + ":{w:" + team + "}:retired" }
func (k keys) installState(st string) string  { return k.prefix + ":{si:" + st + "}" }

// Installation is the app installed in one Slack workspace (or one
// Enterprise Grid org, OrgWide): what oauth.v2.access and auth.test said
// about it. BotToken and RefreshToken are secrets: the store seals the whole
// record, and LogValue and Format leave them out.
type Installation struct {
	// TeamID is the workspace ("" for an org-wide install); EnterpriseID
	// the Grid org, if any.
	TeamID, TeamName             string
	EnterpriseID, EnterpriseName string
	// OrgWide: installed on the whole org; the record is kept under
	// EnterpriseID and serves every workspace of it.
	OrgWide bool
	AppID   string
	// BotToken is the bot's token (xoxb-, or xoxe.xoxb- with rotation);
	// BotUserID and BotID its identity (auth.test).
	BotToken         string
	BotUserID, BotID string
	// Scopes are the bot scopes granted.
	Scopes []string
	// InstallerID is the person who installed (or last re-installed) it.
	InstallerID string
	// RefreshToken and ExpiresAt are set with token rotation; IssuedAt is
	// when BotToken was issued (the start of its lifetime).
	RefreshToken string
	ExpiresAt    time.Time
	IssuedAt     time.Time
	// Installed is the first install; Updated the last write.
	Installed, Updated time.Time
}

// ID is the key the installation is stored under: the enterprise id of
// an org-wide install, else the team id.
func (in Installation) ID() string {
	if in.OrgWide {
		return in.EnterpriseID
	}
	return in.TeamID
}

// Rotating reports whether the token expires and can be refreshed.
func (in Installation) Rotating() bool { return in.RefreshToken != "" && !in.ExpiresAt.IsZero() }

// LogValue keeps the tokens out of logs.
func (in Installation) LogValue() slog.Value {
	return slog.GroupValue(slog.String("team", in.TeamID), slog.String("enterprise", in.EnterpriseID),
		slog.Bool("org_wide", in.OrgWide), slog.String("bot_user", in.BotUserID), slog.String("installer", in.InstallerID),
		slog.Bool("rotating", in.Rotating()))
}

// Format keeps the tokens out of fmt output.
func (in Installation) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "{Team:%s Enterprise:%s OrgWide:%v BotUser:%s BotID:%s Scopes:%v Installer:%s Rotating:%v ExpiresAt:%s}",
		in.TeamID, in.EnterpriseID, in.OrgWide, in.BotUserID, in.BotID, in.Scopes, in.InstallerID, in.Rotating(),
		in.ExpiresAt.Format(time.RFC3339))
}

// storedInstallation is the sealed record's plaintext.
type storedInstallation struct {
	V              int       `json:"v"`
	TeamID         string    `json:"team_id,omitempty"`
	TeamName       string    `json:"team_name,omitempty"`
	EnterpriseID   string    `json:"enterprise_id,omitempty"`
	EnterpriseName string    `json:"enterprise_name,omitempty"`
	OrgWide        bool      `json:"org_wide,omitempty"`
	AppID          string    `json:"app_id,omitempty"`
	BotToken       string    `json:"bot_token"`
	BotUserID      string    `json:"bot_user_id,omitempty"`
	BotID          string    `json:"bot_id,omitempty"`
	Scopes         []string  `json:"scopes,omitempty"`
	InstallerID    string    `json:"installer_id,omitempty"`
	RefreshToken   string    `json:"refresh_token,omitempty"`
	ExpiresAt      time.Time `json:"expires_at,omitzero"`
	IssuedAt       time.Time `json:"issued_at,omitzero"`
	Installed      time.Time `json:"installed,omitzero"`
	Updated        time.Time `json:"updated,omitzero"`
}

// wrappedInstallation is the value at P:{w:ID}:install.
type wrappedInstallation struct {
	OrgWide bool   `json:"org_wide,omitempty"`
	Sealed  string `json:"sealed"`
}

// installField names what an installation record is sealed to besides its
// id: the kind, so a workspace's record cannot pose as an org's.
func installField(orgWide bool) string {
	if orgWide {
		return "org"
	}
	return "team"
}

const installServer = "slack-install"

// PutInstallation stores (or replaces) an installation, sealed, and
// brings back the workspace's data if it was uninstalled within the grace
// (RestoreWorkspace). Installed defaults to now on the first write.
func (s *Store) PutInstallation(ctx context.Context, in Installation) error {
	id := in.ID()
	if err := checkPart("installation id", id); err != nil {
		return err
	}
	if in.BotToken == "" {
		return fmt.Errorf("session: installation %s: no bot token", id)
	}
	now := time.Now().UTC()
	if in.Installed.IsZero() {
		in.Installed = now
	}
	in.Updated = now
	rec, err := json.Marshal(storedInstallation{
		V: 1, TeamID: in.TeamID, TeamName: in.TeamName, EnterpriseID: in.EnterpriseID, EnterpriseName: in.EnterpriseName,
		OrgWide: in.OrgWide, AppID: in.AppID, BotToken: in.BotToken, BotUserID: in.BotUserID, BotID: in.BotID,
		Scopes: in.Scopes, InstallerID: in.InstallerID, RefreshToken: in.RefreshToken, ExpiresAt: in.ExpiresAt,
		IssuedAt: in.IssuedAt, Installed: in.Installed, Updated: in.Updated,
	})
	if err != nil {
		return fmt.Errorf("session: installation %s: %w", id, err)
	}
	v, err := s.sealRecord(id, installServer, installField(in.OrgWide), rec)
	if err != nil {
		return fmt.Errorf("session: installation %s: sealing: %w", id, err)
	}
	b, _ := json.Marshal(wrappedInstallation{OrgWide: in.OrgWide, Sealed: v})
	if err := s.rdb.Set(ctx, s.k.install(id), b, 0).Err(); err != nil {
		return s.wrap("put installation "+id, err)
	}
	return s.RestoreWorkspace(ctx, id)
}

// Installation returns the installation stored under id (a team id, or
// an enterprise id for an org-wide install); ErrNotFound when there is
// none.
func (s *Store) Installation(ctx context.Context, id string) (Installation, error) {
	if err := checkPart("installation id", id); err != nil {
		return Installation{}, err
	}
	key := s.k.install(id)
	v, err := s.rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return Installation{}, fmt.Errorf("session: installation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Installation{}, s.wrap("installation "+id, err)
	}
	// The kind is in clear beside the sealed record and part of its AAD:
	// a record opens only as the kind it was sealed as.
	var w wrappedInstallation
	if err := json.Unmarshal([]byte(v), &w); err != nil {
		return Installation{}, fmt.Errorf("session: corrupt installation in key %s: %v", key, err)
	}
	pt, err := s.openRecord(key, id, installServer, installField(w.OrgWide), w.Sealed)
	if err != nil {
		return Installation{}, err
	}
	var st storedInstallation
	if err := json.Unmarshal(pt, &st); err != nil || st.OrgWide != w.OrgWide {
		return Installation{}, fmt.Errorf("session: corrupt installation in key %s", key)
	}
	in := Installation{
		TeamID: st.TeamID, TeamName: st.TeamName, EnterpriseID: st.EnterpriseID, EnterpriseName: st.EnterpriseName,
		OrgWide: st.OrgWide, AppID: st.AppID, BotToken: st.BotToken, BotUserID: st.BotUserID, BotID: st.BotID,
		Scopes: st.Scopes, InstallerID: st.InstallerID, RefreshToken: st.RefreshToken, ExpiresAt: st.ExpiresAt,
		IssuedAt: st.IssuedAt, Installed: st.Installed, Updated: st.Updated,
	}
	if in.ID() != id {
		return Installation{}, fmt.Errorf("session: corrupt installation in key %s: it names %s", key, in.ID())
	}
	return in, nil
}

// DeleteInstallation removes the installation stored under id (absent is
// not an error) and returns the teams an org-wide installation served
// (InstallAlias), so the caller can retire their data too.
func (s *Store) DeleteInstallation(ctx context.Context, id string) (teams []string, err error) {
	if err := checkPart("installation id", id); err != nil {
		return nil, err
	}
	pipe := s.rdb.TxPipeline()
	members := pipe.SMembers(ctx, s.k.installTeams(id))
	pipe.Del(ctx, s.k.install(id))
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap("delete installation "+id, err)
	}
	teams = members.Val()
	slices.Sort(teams)
	return teams, nil
}

// LockInstallation takes the token-refresh lock of installation id,
// waiting until it is free or ctx ends; the lock expires after ttl even if
// its holder dies. A holder re-reads the installation after locking, so two
// replicas never spend one rotating refresh token.
func (s *Store) LockInstallation(ctx context.Context, id string, ttl time.Duration) (unlock func(), err error) {
	if err := checkPart("installation id", id); err != nil {
		return nil, err
	}
	return s.lockKey(ctx, s.k.installLock(id), ttl, "installation lock")
}

// PutInstallAlias records that team is served by the org-wide
// installation id (learned from an event's authorizations), so every
// replica finds the installation by team. It also brings back the team's
// data if it was uninstalled within the grace.
func (s *Store) PutInstallAlias(ctx context.Context, team, id string) error {
	if err := errors.Join(checkPart("team", team), checkPart("installation id", id)); err != nil {
		return err
	}
	via, teams := s.k.installVia(team), s.k.installTeams(id)
	pipe := s.rdb.TxPipeline()
	pipe.Set(ctx, via, id, 0)
	pipe.SAdd(ctx, s.k.workspaceIndex(team), via)
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("put install alias "+team, err)
	}
	pipe = s.rdb.TxPipeline()
	pipe.SAdd(ctx, teams, team)
	pipe.SAdd(ctx, s.k.workspaceIndex(id), teams)
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("put install alias "+team, err)
	}
	return s.RestoreWorkspace(ctx, team)
}

// InstallAlias returns the id of the org-wide installation serving team,
// "" when none is known.
func (s *Store) InstallAlias(ctx context.Context, team string) (string, error) {
	if err := checkPart("team", team); err != nil {
		return "", err
	}
	v, err := s.rdb.Get(ctx, s.k.installVia(team)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", s.wrap("install alias "+team, err)
	}
	return v, nil
}

// retireScript: KEYS[1] = the retired marker, the rest = the workspace's
// keys; ARGV = grace ms, now. Every key expires within the grace (a
// shorter TTL stays); the marker says when.
var retireScript = redis.NewScript(`
local grace = tonumber(ARGV[1])
for i = 2, #KEYS do
  local t = redis.call('PTTL', KEYS[i])
  if t == -1 or t > grace then redis.call('PEXPIRE', KEYS[i], grace) end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', grace)
return 1
`)

// restoreScript: KEYS[1] = the retired marker, KEYS[2] = the audit
// stream, the rest = indexed keys; ARGV = audit TTL ms → 1 if the
// workspace was retired and is now back.
var restoreScript = redis.NewScript(`
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[1]) end
for i = 3, #KEYS do redis.call('PERSIST', KEYS[i]) end
return 1
`)

// workspaceKeys are team's keys without a TTL of their own: the index's
// members, the keys every workspace may have, and (for data written before
// the index existed) the pins and connections of its registered servers.
// All share the tag {w:team}, so one script may touch them all.
func (s *Store) workspaceKeys(ctx context.Context, team string) ([]string, error) {
	pipe := s.rdb.Pipeline()
	idx := pipe.SMembers(ctx, s.k.workspaceIndex(team))
	regs := pipe.HKeys(ctx, s.k.registrations(team))
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap("workspace keys "+team, err)
	}
	set := map[string]bool{s.k.registrations(team): true, s.k.workspaceIndex(team): true}
	for _, name := range regs.Val() {
		if checkPart("server name", name) == nil {
			set[s.k.pins(team, name)] = true
			set[s.k.oauthConns(team, name)] = true
		}
	}
	tag := s.k.prefix + ":{w:" + team + "}:"
	for _, k := range idx.Val() {
		if len(k) > len(tag) && k[:len(tag)] == tag { // never another workspace's key
			set[k] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}

// RetireWorkspace is the clean-up after the app was uninstalled from team
// (or its org): every key of the workspace that has no TTL (MCP
// registrations, tool pins, OAuth connections and clients, install
// aliases) and its audit stream expire after SessionTTL, the grace its
// sessions already have: threads, their grants and approvals expire by
// themselves SessionTTL after their last write, and nothing writes to an
// uninstalled workspace. Installing again within the grace brings the data
// back (RestoreWorkspace). It touches only the workspace's own keys, found
// through its index (no SCAN), in one script on one Cluster slot.
func (s *Store) RetireWorkspace(ctx context.Context, team string) error {
	if err := checkPart("team", team); err != nil {
		return err
	}
	ks, err := s.workspaceKeys(ctx, team)
	if err != nil {
		return err
	}
	keys := append([]string{s.k.retired(team), s.k.audit(team)}, ks...)
	keys = append(keys, s.usageKeys(team, time.Now())...) // usage.go: expire, never restored
	now := time.Now().UTC().Format(time.RFC3339)
	if err := retireScript.Run(ctx, s.rdb, keys, s.opt.SessionTTL.Milliseconds(), now).Err(); err != nil {
		return s.wrap("retire workspace "+team, err)
	}
	return nil
}

// RestoreWorkspace undoes RetireWorkspace while the grace lasts: the
// workspace's configuration no longer expires. It does nothing for a
// workspace that was not retired.
func (s *Store) RestoreWorkspace(ctx context.Context, team string) error {
	if err := checkPart("team", team); err != nil {
		return err
	}
	n, err := s.rdb.Exists(ctx, s.k.retired(team)).Result()
	if err != nil {
		return s.wrap("restore workspace "+team, err)
	}
	if n == 0 {
		return nil
	}
	ks, err := s.workspaceKeys(ctx, team)
	if err != nil {
		return err
	}
	keys := append([]string{s.k.retired(team), s.k.audit(team)}, ks...)
	if err := restoreScript.Run(ctx, s.rdb, keys, AuditTTL.Milliseconds()).Err(); err != nil {
		return s.wrap("restore workspace "+team, err)
	}
	return nil
}

// Retired reports whether team was uninstalled and its data is expiring.
func (s *Store) Retired(ctx context.Context, team string) (bool, error) {
	if err := checkPart("team", team); err != nil {
		return false, err
	}
	n, err := s.rdb.Exists(ctx, s.k.retired(team)).Result()
	if err != nil {
		return false, s.wrap("retired "+team, err)
	}
	return n == 1, nil
}

// indexed adds key (one of team's keys without a TTL) to the workspace's
// index within pipe, so RetireWorkspace finds it without a SCAN.
func (s *Store) indexed(ctx context.Context, pipe redis.Pipeliner, team, key string) {
	pipe.SAdd(ctx, s.k.workspaceIndex(team), key)
}

// MaxInstallStateTTL bounds how long a pending Slack install lives.
const MaxInstallStateTTL = 10 * time.Minute

// PutInstallState records a pending Slack install under its random state
// for ttl (at most MaxInstallStateTTL). An existing state is never
// replaced.
func (s *Store) PutInstallState(ctx context.Context, state string, ttl time.Duration) error {
	if err := checkState(state); err != nil {
		return err
	}
	if ttl <= 0 || ttl > MaxInstallStateTTL {
		ttl = MaxInstallStateTTL
	}
	ok, err := s.rdb.SetNX(ctx, s.k.installState(state), time.Now().UTC().Format(time.RFC3339), ttl).Result()
	if err != nil {
		return s.wrap("put install state", err)
	}
	if !ok {
		return errors.New("session: install state already exists")
	}
	return nil
}

// TakeInstallState deletes a pending Slack install and reports whether it
// was there: exactly one caller across all replicas gets true. Unknown,
// used and expired states are false.
func (s *Store) TakeInstallState(ctx context.Context, state string) (bool, error) {
	if checkState(state) != nil {
		return false, nil // not a state we could have made
	}
	_, err := takeStateScript.Run(ctx, s.rdb, []string{s.k.installState(state)}).Text()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, s.wrap("take install state", err)
	}
	return true, nil
}

// lockKey takes a lock at key (SET NX PX ttl with a random token),
// polling until it is free or ctx ends; unlock releases it only while it
// is still ours.
func (s *Store) lockKey(ctx context.Context, key string, ttl time.Duration, what string) (unlock func(), err error) {
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	for {
		ok, err := s.rdb.SetNX(ctx, key, token, ttl).Result()
		if err != nil {
			return nil, s.wrap(what, err)
		}
		if ok {
			return func() {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				if err := unlockScript.Run(ctx, s.rdb, []string{key}, token).Err(); err != nil {
					s.log.Warn("session: releasing "+what, "err", err)
				}
			}, nil
		}
		t := time.NewTimer(oauthLockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
