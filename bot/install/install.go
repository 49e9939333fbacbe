package install

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// Options turn on OAuth installations. The zero value (no ClientID) is
// single-token mode: the root then does not build an Installs at all.
type Options struct {
	// ClientID and ClientSecret are the app's credentials (Basic
	// Information → App Credentials).
	ClientID, ClientSecret string
	// RedirectURL is where Slack sends the browser back:
	// PUBLIC_URL/slack/oauth_redirect. It must be one of the app's
	// Redirect URLs.
	RedirectURL string
	// AuthorizeURL is Slack's authorize page (default
	// https://slack.com/oauth/v2/authorize).
	AuthorizeURL string
}

// DefaultAuthorizeURL is Slack's OAuth v2 authorize page.
const DefaultAuthorizeURL = "https://slack.com/oauth/v2/authorize"

// Store is the store's side of installations (*session.Store).
type Store interface {
	Installation(ctx context.Context, id string) (session.Installation, error)
	PutInstallation(ctx context.Context, in session.Installation) error
	DeleteInstallation(ctx context.Context, id string) ([]string, error)
	LockInstallation(ctx context.Context, id string, ttl time.Duration) (func(), error)
	InstallAlias(ctx context.Context, team string) (string, error)
	PutInstallAlias(ctx context.Context, team, id string) error
	PutInstallState(ctx context.Context, state string, ttl time.Duration) error
	TakeInstallState(ctx context.Context, state string) (bool, error)
	// RetireWorkspace expires an uninstalled workspace's data after the
	// session grace; RestoreWorkspace brings it back on a new install.
	RetireWorkspace(ctx context.Context, team string) error
	RestoreWorkspace(ctx context.Context, team string) error
	// Take spends one token of a shared bucket (the install pages' rate).
	Take(ctx context.Context, bucket string, perMinute, burst int) (bool, time.Duration, error)
}

// Env is what the root gives an Installs: the Slack plumbing it builds
// once for every client, and the pinned token.
type Env struct {
	// Governor budgets oauth.v2.access and the auth.test of a new install.
	Governor *slackapi.Governor
	// HTTPClient is the governed client every Slack client uses.
	HTTPClient *http.Client
	// APIURL is the Web API base (oauth.v2.access goes there too).
	APIURL string
	// NewClient is a Web API client for a bot token.
	NewClient func(token string) *slack.Client
	// Pinned is the app's own SLACK_BOT_TOKEN, if any.
	Pinned Pinned
	Log    *slog.Logger
	// Count counts an installation event (bobbin_slack_install_events_total):
	// installed, install_failed, uninstalled, token_refreshed,
	// token_refresh_failed.
	Count func(event string)
}

// Pinned is SLACK_BOT_TOKEN beside the installations: it serves its own
// workspace (and, when it is an org's, that org's teams nobody
// installed in).
type Pinned struct {
	// API is the token's client; Token is "" when there is none.
	API   *slack.Client
	Token string
	// Workspace reports the token's team and enterprise (auth.test at
	// start-up: read on every lookup).
	Workspace func() (team, enterprise string)
}

// Installations (issue 16): with SLACK_CLIENT_ID set, workspaces install
// the app through OAuth (http.go) and each gets its own bot token, kept
// sealed in Redis. Every event, click and command names its workspace;
// Installs finds that workspace's installation (by team, or by enterprise
// for an org-wide install), and every Web API call for the workspace uses
// its token (Client). A pinned SLACK_BOT_TOKEN may serve one workspace
// beside them. Rotating tokens are refreshed before they expire, under a
// Redis lock, so two replicas never spend one refresh token.

const (
	// installCacheTTL is how long this process trusts an installation it
	// read: another replica's refresh or an uninstall shows within it.
	installCacheTTL = time.Minute
	// installMissTTL is how long "not installed" is remembered.
	installMissTTL = 5 * time.Second
	// maxInstallEntries bounds the cache; past it, it starts over.
	maxInstallEntries = 10000
	// refreshLockTTL bounds a refresh (oauth.v2.access and one write).
	refreshLockTTL = 30 * time.Second
	// maxRefreshMargin is how long before expiry a token is refreshed at
	// most (a quarter of its lifetime for short-lived ones): Slack's live
	// 12 h, so 10 min.
	maxRefreshMargin = 10 * time.Minute
)

// ErrNotInstalled is a call for a workspace that has no installation.
var ErrNotInstalled = errors.New("bot: the app is not installed in this workspace")

// entry is one installation as this process holds it, with the client of
// its current token.
type entry struct {
	// refresh serializes this process's refreshes of the installation
	// (the Redis lock serializes the replicas). Never held by readers.
	refresh sync.Mutex

	mu     sync.Mutex // guards the fields below; a leaf lock
	inst   session.Installation
	api    *slack.Client
	loaded time.Time
}

// get returns the entry's installation, client and load time.
func (e *entry) get() (session.Installation, *slack.Client, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.inst, e.api, e.loaded
}

// set replaces the installation (and client, when the token changed).
func (e *entry) set(in *Installs, inst session.Installation) {
	e.mu.Lock()
	same := e.api != nil && e.inst.BotToken == inst.BotToken
	e.mu.Unlock()
	var api *slack.Client
	if !same {
		api = in.env.NewClient(inst.BotToken)
	}
	e.mu.Lock()
	if api != nil {
		e.api = api
	}
	e.inst, e.loaded = inst, time.Now()
	e.mu.Unlock()
}

func (e *entry) orgWide() bool {
	inst, _, _ := e.get()
	return inst.OrgWide
}

// Installs is the process's view of the installations: a cache of them
// over Store, the install pages, the token refresh, and the
// slackapi.Authorizer of a multi-workspace app. Safe for concurrent use.
type Installs struct {
	store Store
	opts  Options
	env   Env

	mu     sync.Mutex
	byID   map[string]*entry    // installation id → entry
	missed map[string]time.Time // installation id → when it was not found
	via    map[string]string    // team → org-wide installation id
	quiet  map[string]bool      // teams already logged as not installed
}

// New builds the installations of a multi-workspace app. opts.ClientID,
// ClientSecret and RedirectURL must be set (the root checks them).
func New(store Store, opts Options, env Env) *Installs {
	opts.AuthorizeURL = cmp.Or(opts.AuthorizeURL, DefaultAuthorizeURL)
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	if env.Count == nil {
		env.Count = func(string) {}
	}
	if env.Pinned.Workspace == nil {
		env.Pinned.Workspace = func() (string, string) { return "", "" }
	}
	if env.HTTPClient == nil {
		env.HTTPClient = http.DefaultClient
	}
	env.APIURL = cmp.Or(env.APIURL, slack.APIURL)
	if env.NewClient == nil {
		env.NewClient = func(token string) *slack.Client {
			return slack.New(token, slack.OptionAPIURL(env.APIURL), slack.OptionHTTPClient(env.HTTPClient))
		}
	}
	return &Installs{store: store, opts: opts, env: env, byID: map[string]*entry{}, missed: map[string]time.Time{},
		via: map[string]string{}, quiet: map[string]bool{}}
}

// Identity is who the bot is in one workspace: its own messages are
// ignored and its mention stripped by these.
type Identity struct{ UserID, BotID string }

// Ref is what an envelope says about the installation it is for (events:
// authorizations[0] first, as Slack advises for shared channels).
type Ref struct {
	Team, Enterprise string
	Org              bool
}

// cached returns the entry of installation id when this process holds a
// fresh one.
func (in *Installs) cached(id string) *entry {
	in.mu.Lock()
	e := in.byID[id]
	in.mu.Unlock()
	if e == nil {
		return nil
	}
	if _, _, loaded := e.get(); time.Since(loaded) < installCacheTTL {
		return e
	}
	return nil
}

// forTeam returns the cached entry serving team (its own installation or
// the org-wide one it was seen under), fresh or not; nil when unknown.
func (in *Installs) forTeam(team string) *entry {
	in.mu.Lock()
	defer in.mu.Unlock()
	if e := in.byID[team]; e != nil {
		return e
	}
	if id := in.via[team]; id != "" {
		return in.byID[id]
	}
	return nil
}

// put caches inst; the entry (and its client) is kept when this process
// already holds the installation, so one entry's refresh lock covers
// every caller.
func (in *Installs) put(inst session.Installation) *entry {
	id := inst.ID()
	in.mu.Lock()
	e := in.byID[id]
	if e == nil {
		if len(in.byID) >= maxInstallEntries {
			clear(in.byID)
			clear(in.via)
		}
		e = &entry{}
		in.byID[id] = e
	}
	delete(in.missed, id)
	in.mu.Unlock()
	e.set(in, inst)
	return e
}

// drop forgets installation id and the teams it served.
func (in *Installs) drop(id string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.byID, id)
	for t, v := range in.via {
		if v == id {
			delete(in.via, t)
		}
	}
}

// load returns installation id, from this process's cache or Redis; nil
// when there is none.
func (in *Installs) load(ctx context.Context, id string) (*entry, error) {
	if id == "" {
		return nil, nil
	}
	if e := in.cached(id); e != nil {
		return e, nil
	}
	in.mu.Lock()
	missAt, missed := in.missed[id]
	in.mu.Unlock()
	if missed && time.Since(missAt) < installMissTTL {
		return nil, nil
	}
	inst, err := in.store.Installation(ctx, id)
	if errors.Is(err, session.ErrNotFound) {
		in.mu.Lock()
		if len(in.missed) >= maxInstallEntries {
			clear(in.missed)
		}
		in.missed[id] = time.Now()
		delete(in.byID, id)
		in.mu.Unlock()
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bot: reading the installation of %s: %w", id, err)
	}
	return in.put(inst), nil
}

// noteVia records that team is served by the org-wide installation id,
// in this process and (the first time) in Redis for the other replicas.
func (in *Installs) noteVia(ctx context.Context, team, id string) {
	if team == "" || team == id {
		return
	}
	in.mu.Lock()
	known := in.via[team] == id
	if !known {
		in.via[team] = id
	}
	in.mu.Unlock()
	if known {
		return
	}
	if err := in.store.PutInstallAlias(ctx, team, id); err != nil {
		in.env.Log.Warn("bot: cannot record which org-wide installation serves a workspace", "team", team, "enterprise", id, "err", err)
		in.mu.Lock()
		delete(in.via, team) // try again next time
		in.mu.Unlock()
	}
}

// find returns the installation serving ref: an org-wide one when the
// envelope says so, else the team's own, else the org-wide one the team
// was seen under or that covers its enterprise. nil when none.
func (in *Installs) find(ctx context.Context, ref Ref) (*entry, error) {
	if ref.Org && ref.Enterprise != "" {
		e, err := in.load(ctx, ref.Enterprise)
		if e != nil && e.orgWide() {
			in.noteVia(ctx, ref.Team, ref.Enterprise)
			return e, nil
		}
		if err != nil {
			return nil, err
		}
	}
	if ref.Team == "" {
		return nil, nil
	}
	if e, err := in.load(ctx, ref.Team); e != nil || err != nil {
		return e, err
	}
	in.mu.Lock()
	via := in.via[ref.Team]
	in.mu.Unlock()
	if via == "" {
		v, err := in.store.InstallAlias(ctx, ref.Team)
		if err != nil {
			return nil, fmt.Errorf("bot: reading the installation of %s: %w", ref.Team, err)
		}
		via = v
	}
	if via == "" && ref.Enterprise != "" {
		via = ref.Enterprise
	}
	if via == "" {
		return nil, nil
	}
	e, err := in.load(ctx, via)
	if e != nil && e.orgWide() {
		in.noteVia(ctx, ref.Team, via)
		return e, nil
	}
	return nil, err
}

// pinnedServes reports whether SLACK_BOT_TOKEN is the token for ref: its
// own workspace.
func (in *Installs) pinnedServes(ref Ref) bool {
	if in.env.Pinned.Token == "" {
		return false
	}
	team, _ := in.env.Pinned.Workspace()
	return ref.Team == team || ref.Team == ""
}

// Admit decides whether the bot serves an envelope for ref: true when
// some token serves its workspace. An envelope from a workspace without
// an installation is ignored (logged once per team); an error means
// Redis could not say.
func (in *Installs) Admit(ctx context.Context, ref Ref) (bool, error) {
	if in.pinnedServes(ref) {
		return true, nil
	}
	e, err := in.find(ctx, ref)
	if err != nil {
		return false, err
	}
	if e != nil {
		return true, nil
	}
	if _, ent := in.env.Pinned.Workspace(); in.env.Pinned.Token != "" && ent != "" && ref.Enterprise == ent {
		return true, nil // the pinned token may be the org's
	}
	in.mu.Lock()
	first := !in.quiet[ref.Team]
	if first {
		if len(in.quiet) >= maxInstallEntries {
			clear(in.quiet)
		}
		in.quiet[ref.Team] = true
	}
	in.mu.Unlock()
	if first {
		in.env.Log.Info("bot: ignoring events from a workspace without an installation (logged once per workspace)",
			"team", ref.Team, "enterprise", ref.Enterprise)
	}
	return false, nil
}

// client is the Web API client for workspace team: its installation's
// (as this process last loaded it), else the pinned SLACK_BOT_TOKEN's.
// pick loads and refreshes the installation first.
func (in *Installs) client(team string) *slack.Client {
	if pt, _ := in.env.Pinned.Workspace(); team != pt {
		if e := in.forTeam(team); e != nil {
			_, api, _ := e.get()
			return api
		}
	}
	return in.env.Pinned.API
}

// Token is the bot token the workspace's Web API calls carry (file
// downloads and raw calls send it themselves): its installation's,
// loaded and refreshed as a call would, else the pinned token. An error
// when the workspace has no installation and no pinned token serves it.
func (in *Installs) Token(ctx context.Context, team string) (string, error) {
	_, _, token, err := in.pick(ctx, team)
	if err != nil {
		return "", err
	}
	return cmp.Or(token, in.env.Pinned.Token), nil
}

// Scopes are the scopes team's installation was granted; nil when the
// pinned token serves team (its scopes are not known here).
func (in *Installs) Scopes(ctx context.Context, team string) ([]string, error) {
	_, e, _, err := in.pick(ctx, team)
	if err != nil || e == nil {
		return nil, err
	}
	inst, _, _ := e.get()
	return inst.Scopes, nil
}

// Self is the bot's identity in team when an installation this process
// holds serves it; false for the pinned token's workspace and unknown
// ones (the caller then uses the pinned identity).
func (in *Installs) Self(team string) (Identity, bool) {
	if pt, _ := in.env.Pinned.Workspace(); team != pt {
		if e := in.forTeam(team); e != nil {
			inst, _, _ := e.get()
			return Identity{UserID: inst.BotUserID, BotID: inst.BotID}, true
		}
	}
	return Identity{}, false
}

// pick returns the client for a call in team, with the installation it
// belongs to and its token (nil and "" for the pinned token): loaded if
// this process does not hold it fresh, refreshed when the token is about
// to expire.
func (in *Installs) pick(ctx context.Context, team string) (*slack.Client, *entry, string, error) {
	pt, pe := in.env.Pinned.Workspace()
	if in.env.Pinned.Token != "" && (team == pt || team == "" || team == slackapi.AppScope) {
		return in.env.Pinned.API, nil, "", nil
	}
	e := in.forTeam(team)
	if e != nil {
		if _, _, loaded := e.get(); time.Since(loaded) >= installCacheTTL {
			e = nil
		}
	}
	if e == nil {
		var err error
		if e, err = in.find(ctx, Ref{Team: team}); err != nil {
			return nil, nil, "", err
		}
	}
	if e == nil {
		if in.env.Pinned.Token != "" && pe != "" {
			return in.env.Pinned.API, nil, "", nil // perhaps the pinned org-wide token's
		}
		return nil, nil, "", fmt.Errorf("%w (%s)", ErrNotInstalled, team)
	}
	if inst, _, _ := e.get(); needsRefresh(inst, time.Now()) {
		if err := in.refresh(ctx, e, "", false); err != nil {
			in.env.Log.Warn("bot: refreshing the workspace's token failed; using the current one", "team", team, "err", err)
		}
	}
	inst, api, _ := e.get()
	return api, e, inst.BotToken, nil
}

// Client implements slackapi.Authorizer: each workspace's client carries
// its installation's token (pick), refreshed once when Slack refuses it.
// The pinned token's workspace keeps the pinned token.
func (in *Installs) Client(ctx context.Context, team string) (*slack.Client, func(context.Context) error, error) {
	api, e, token, err := in.pick(ctx, team)
	if err != nil || e == nil {
		return api, nil, err
	}
	return api, func(ctx context.Context) error { return in.refresh(ctx, e, token, false) }, nil
}

// Renew gets team's installation a new token after Slack refused its
// current one with refused, where a new token can help: a rotating token
// that expired, or one that was revoked. With rotation auth.revoke kills
// one token and keeps the installation; an uninstall revokes the refresh
// token too: the refresh is what tells the two apart (issue 23's
// tokens_revoked check). It reports whether a new token was issued. false
// with no error means the refusal is final: the token does not rotate,
// Slack's code is one no new token helps (invalid_auth,
// account_inactive, not_authed), its refresh token is refused too, or no
// installation serves team. A refused refresh token is then the answer
// sought, not a failure: it is not counted as token_refresh_failed.
func (in *Installs) Renew(ctx context.Context, team string, refused error) (bool, error) {
	var se slack.SlackErrorResponse
	if !errors.As(refused, &se) || se.Err != "token_expired" && se.Err != "token_revoked" {
		return false, nil
	}
	_, e, token, err := in.pick(ctx, team)
	switch {
	case errors.Is(err, ErrNotInstalled):
		return false, nil
	case err != nil:
		return false, err
	case e == nil:
		return false, nil // the pinned token: nothing to refresh
	}
	if inst, _, _ := e.get(); !inst.Rotating() {
		return false, nil
	}
	err = in.refresh(ctx, e, token, true)
	if errors.Is(err, ErrNotInstalled) || refreshRefused(err) {
		return false, nil
	}
	return err == nil, err
}

// refreshRefused reports whether err is Slack refusing the refresh token
// itself (revoked with the installation, or spent long ago).
func refreshRefused(err error) bool {
	var ie *Error
	return errors.As(err, &ie) && ie.Code == "invalid_refresh_token"
}

var _ slackapi.Authorizer = (*Installs)(nil)

// refreshMargin is how long before expiry inst's token is refreshed.
func refreshMargin(inst session.Installation) time.Duration {
	life := inst.ExpiresAt.Sub(inst.IssuedAt)
	if inst.IssuedAt.IsZero() || life <= 0 {
		return maxRefreshMargin
	}
	return min(maxRefreshMargin, life/4)
}

// needsRefresh reports whether inst's token expires within its margin.
func needsRefresh(inst session.Installation, now time.Time) bool {
	return inst.Rotating() && !now.Before(inst.ExpiresAt.Add(-refreshMargin(inst)))
}

// refresh renews e's token: under the installation's Redis lock it
// re-reads the record (another replica may have refreshed it already, or
// replaced the failed token) and only then spends the refresh token.
// failed is the token Slack just refused ("" for a refresh before expiry);
// expected says a refused refresh token is a possible answer (Renew), not
// a failure to count.
func (in *Installs) refresh(ctx context.Context, e *entry, failed string, expected bool) error {
	e.refresh.Lock()
	defer e.refresh.Unlock()
	cur, _, _ := e.get()
	id := cur.ID()
	if cur.BotToken != failed && !needsRefresh(cur, time.Now()) {
		return nil // done by someone in this process meanwhile
	}
	lctx, cancel := context.WithTimeout(ctx, refreshLockTTL)
	defer cancel()
	unlock, err := in.store.LockInstallation(lctx, id, refreshLockTTL)
	if err != nil {
		return fmt.Errorf("bot: locking the installation of %s: %w", id, err)
	}
	defer unlock()
	inst, err := in.store.Installation(lctx, id)
	if errors.Is(err, session.ErrNotFound) {
		in.drop(id)
		return fmt.Errorf("%w (%s)", ErrNotInstalled, id)
	}
	if err != nil {
		return fmt.Errorf("bot: reading the installation of %s: %w", id, err)
	}
	if inst.BotToken != failed && !needsRefresh(inst, time.Now()) {
		e.set(in, inst) // another replica refreshed it
		return nil
	}
	if !inst.Rotating() {
		e.set(in, inst)
		return fmt.Errorf("bot: Slack refused the token of %s and it does not rotate", id)
	}
	next, err := in.refreshToken(lctx, inst)
	if err != nil {
		if !expected || !refreshRefused(err) {
			in.env.Count("token_refresh_failed")
		}
		return err
	}
	// Slack has issued the new pair; if this write fails, the old refresh
	// token still works for a grace period and yields the same successor.
	if err := in.store.PutInstallation(lctx, next); err != nil {
		return fmt.Errorf("bot: storing the refreshed token of %s: %w", id, err)
	}
	e.set(in, next)
	in.env.Count("token_refreshed")
	in.env.Log.Info("bot: refreshed a workspace's bot token", "team", next.TeamID, "enterprise", next.EnterpriseID,
		"expires_in", time.Until(next.ExpiresAt).Round(time.Second).String())
	return nil
}
