package bot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// Installations (issue 16): with SLACK_CLIENT_ID set, workspaces install
// the app through OAuth (install_http.go) and each gets its own bot token,
// kept sealed in Redis. Every event, click and command names its workspace;
// the bot finds that workspace's installation (by team, or by enterprise
// for an org-wide install), and every Web API call for the workspace uses
// its token (Bot.client). A pinned SLACK_BOT_TOKEN may serve one workspace
// beside them. Rotating tokens are refreshed before they expire, under a
// Redis lock, so two replicas never spend one refresh token.

// InstallOptions turn on OAuth installations. The zero value (no ClientID)
// is single-token mode: SLACK_BOT_TOKEN serves every event.
type InstallOptions struct {
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

// installStore is the store's side of installations (*session.Store).
type installStore interface {
	Installation(ctx context.Context, id string) (session.Installation, error)
	PutInstallation(ctx context.Context, in session.Installation) error
	DeleteInstallation(ctx context.Context, id string) ([]string, error)
	LockInstallation(ctx context.Context, id string, ttl time.Duration) (func(), error)
	InstallAlias(ctx context.Context, team string) (string, error)
	PutInstallAlias(ctx context.Context, team, id string) error
	PutInstallState(ctx context.Context, state string, ttl time.Duration) error
	TakeInstallState(ctx context.Context, state string) (bool, error)
	workspaceRetirer
}

// workspaceRetirer expires an uninstalled workspace's data after the
// session grace, and brings it back on a new install.
type workspaceRetirer interface {
	RetireWorkspace(ctx context.Context, team string) error
	RestoreWorkspace(ctx context.Context, team string) error
}

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

// errNotInstalled is a call for a workspace that has no installation.
var errNotInstalled = errors.New("bot: the app is not installed in this workspace")

// installEntry is one installation as this process holds it, with the
// client of its current token.
type installEntry struct {
	// refresh serializes this process's refreshes of the installation
	// (the Redis lock serializes the replicas). Never held by readers.
	refresh sync.Mutex

	mu     sync.Mutex // guards the fields below; a leaf lock
	inst   session.Installation
	api    *slack.Client
	loaded time.Time
}

// get returns the entry's installation, client and load time.
func (e *installEntry) get() (session.Installation, *slack.Client, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.inst, e.api, e.loaded
}

// set replaces the installation (and client, when the token changed).
func (e *installEntry) set(b *Bot, inst session.Installation) {
	e.mu.Lock()
	same := e.api != nil && e.inst.BotToken == inst.BotToken
	e.mu.Unlock()
	var api *slack.Client
	if !same {
		api = b.newClient(inst.BotToken)
	}
	e.mu.Lock()
	if api != nil {
		e.api = api
	}
	e.inst, e.loaded = inst, time.Now()
	e.mu.Unlock()
}

// installs is the process's cache of installations. Safe for concurrent
// use.
type installs struct {
	store installStore
	opts  InstallOptions

	mu     sync.Mutex
	byID   map[string]*installEntry // installation id → entry
	missed map[string]time.Time     // installation id → when it was not found
	via    map[string]string        // team → org-wide installation id
	quiet  map[string]bool          // teams already logged as not installed
}

func newInstalls(store installStore, opts InstallOptions) *installs {
	opts.AuthorizeURL = cmp.Or(opts.AuthorizeURL, DefaultAuthorizeURL)
	return &installs{store: store, opts: opts, byID: map[string]*installEntry{}, missed: map[string]time.Time{},
		via: map[string]string{}, quiet: map[string]bool{}}
}

// identity is who the bot is in one workspace: its own messages are
// ignored and its mention stripped by these.
type identity struct{ userID, botID string }

// is reports whether a message with this bot id and user is the bot's own.
func (id identity) is(botID, user string) bool {
	return (id.botID != "" && botID == id.botID) || (id.userID != "" && user == id.userID)
}

// installRef is what an envelope says about the installation it is for
// (events: authorizations[0] first, as Slack advises for shared channels).
type installRef struct {
	team, enterprise string
	org              bool
}

// cached returns the entry of installation id when this process holds a
// fresh one.
func (in *installs) cached(id string) *installEntry {
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
func (in *installs) forTeam(team string) *installEntry {
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

// putInstall caches inst; the entry (and its client) is kept when this
// process already holds the installation, so one entry's refresh lock
// covers every caller.
func (b *Bot) putInstall(inst session.Installation) *installEntry {
	in := b.inst
	id := inst.ID()
	in.mu.Lock()
	e := in.byID[id]
	if e == nil {
		if len(in.byID) >= maxInstallEntries {
			clear(in.byID)
			clear(in.via)
		}
		e = &installEntry{}
		in.byID[id] = e
	}
	delete(in.missed, id)
	in.mu.Unlock()
	e.set(b, inst)
	return e
}

// drop forgets installation id and the teams it served.
func (in *installs) drop(id string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.byID, id)
	for t, v := range in.via {
		if v == id {
			delete(in.via, t)
		}
	}
}

// loadInstall returns installation id, from this process's cache or Redis; nil
// when there is none.
func (b *Bot) loadInstall(ctx context.Context, id string) (*installEntry, error) {
	in := b.inst
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
	return b.putInstall(inst), nil
}

// noteVia records that team is served by the org-wide installation id,
// in this process and (the first time) in Redis for the other replicas.
func (b *Bot) noteVia(ctx context.Context, team, id string) {
	in := b.inst
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
		b.log.Warn("bot: cannot record which org-wide installation serves a workspace", "team", team, "enterprise", id, "err", err)
		in.mu.Lock()
		delete(in.via, team) // try again next time
		in.mu.Unlock()
	}
}

// findInstall returns the installation serving ref: an org-wide one when
// the envelope says so, else the team's own, else the org-wide one the
// team was seen under or that covers its enterprise. nil when none.
func (b *Bot) findInstall(ctx context.Context, ref installRef) (*installEntry, error) {
	in := b.inst
	if ref.org && ref.enterprise != "" {
		e, err := b.loadInstall(ctx, ref.enterprise)
		if e != nil && e.orgWide() {
			b.noteVia(ctx, ref.team, ref.enterprise)
			return e, nil
		}
		if err != nil {
			return nil, err
		}
	}
	if ref.team == "" {
		return nil, nil
	}
	if e, err := b.loadInstall(ctx, ref.team); e != nil || err != nil {
		return e, err
	}
	in.mu.Lock()
	via := in.via[ref.team]
	in.mu.Unlock()
	if via == "" {
		v, err := in.store.InstallAlias(ctx, ref.team)
		if err != nil {
			return nil, fmt.Errorf("bot: reading the installation of %s: %w", ref.team, err)
		}
		via = v
	}
	if via == "" && ref.enterprise != "" {
		via = ref.enterprise
	}
	if via == "" {
		return nil, nil
	}
	e, err := b.loadInstall(ctx, via)
	if e != nil && e.orgWide() {
		b.noteVia(ctx, ref.team, via)
		return e, nil
	}
	return nil, err
}

// pinnedServes reports whether SLACK_BOT_TOKEN is the token for ref: its
// own workspace, or any when installations are off.
func (b *Bot) pinnedServes(ref installRef) bool {
	if b.opts.BotToken == "" {
		return false
	}
	return b.inst == nil || ref.team == b.teamID || ref.team == ""
}

// admitInstall decides whether the bot serves an envelope for ref: true
// when some token serves its workspace. An envelope from a workspace
// without an installation is ignored (logged once per team); an error
// means Redis could not say.
func (b *Bot) admitInstall(ctx context.Context, ref installRef) (bool, error) {
	if b.inst == nil || b.pinnedServes(ref) {
		return true, nil
	}
	e, err := b.findInstall(ctx, ref)
	if err != nil {
		return false, err
	}
	if e != nil {
		return true, nil
	}
	if b.opts.BotToken != "" && b.pinnedEnterprise != "" && ref.enterprise == b.pinnedEnterprise {
		return true, nil // the pinned token may be the org's
	}
	in := b.inst
	in.mu.Lock()
	first := !in.quiet[ref.team]
	if first {
		if len(in.quiet) >= maxInstallEntries {
			clear(in.quiet)
		}
		in.quiet[ref.team] = true
	}
	in.mu.Unlock()
	if first {
		b.log.Info("bot: ignoring events from a workspace without an installation (logged once per workspace)",
			"team", ref.team, "enterprise", ref.enterprise)
	}
	return false, nil
}

// client is the Web API client for workspace team: its installation's
// (as this process last loaded it), else the pinned SLACK_BOT_TOKEN's.
// pickClient loads and refreshes the installation first.
func (b *Bot) client(team string) *slack.Client {
	if b.inst != nil && team != b.teamID {
		if e := b.inst.forTeam(team); e != nil {
			_, api, _ := e.get()
			return api
		}
	}
	return b.api
}

// botToken is the token the workspace's Web API calls carry: file
// downloads send it themselves (they are not Web API calls). "" when the
// workspace has no installation and no pinned token serves it.
func (b *Bot) botToken(ctx context.Context, team string) string {
	_, _, token, err := b.pickClient(ctx, team)
	switch {
	case err != nil:
		return ""
	case token == "":
		return b.opts.BotToken // the pinned token's workspace
	}
	return token
}

// self is the bot's identity in team.
func (b *Bot) self(team string) identity {
	if b.inst != nil && team != b.teamID {
		if e := b.inst.forTeam(team); e != nil {
			inst, _, _ := e.get()
			return identity{userID: inst.BotUserID, botID: inst.BotID}
		}
	}
	return identity{userID: b.botUserID, botID: b.botID}
}

// pickClient returns the client for a call in team, with the
// installation it belongs to and its token (nil and "" for the pinned
// token): loaded if this process does not hold it fresh, refreshed when
// the token is about to expire.
func (b *Bot) pickClient(ctx context.Context, team string) (*slack.Client, *installEntry, string, error) {
	if b.inst == nil || (b.opts.BotToken != "" && (team == b.teamID || team == "" || team == slackapi.AppScope)) {
		return b.api, nil, "", nil
	}
	e := b.inst.forTeam(team)
	if e != nil {
		if _, _, loaded := e.get(); time.Since(loaded) >= installCacheTTL {
			e = nil
		}
	}
	if e == nil {
		var err error
		if e, err = b.findInstall(ctx, installRef{team: team}); err != nil {
			return nil, nil, "", err
		}
	}
	if e == nil {
		if b.opts.BotToken != "" && b.pinnedEnterprise != "" {
			return b.api, nil, "", nil // perhaps the pinned org-wide token's
		}
		return nil, nil, "", fmt.Errorf("%w (%s)", errNotInstalled, team)
	}
	if inst, _, _ := e.get(); needsRefresh(inst, time.Now()) {
		if err := b.refreshInstall(ctx, e, ""); err != nil {
			b.log.Warn("bot: refreshing the workspace's token failed; using the current one", "team", team, "err", err)
		}
	}
	inst, api, _ := e.get()
	return api, e, inst.BotToken, nil
}

// installAuth is the Authorizer of a multi-workspace bot: each workspace's
// client carries its installation's token (pickClient), refreshed once
// when Slack refuses it. The app's own workspace keeps the app's token.
type installAuth struct{ b *Bot }

func (a installAuth) Client(ctx context.Context, team string) (*slack.Client, func(context.Context) error, error) {
	api, e, token, err := a.b.pickClient(ctx, team)
	if err != nil || e == nil {
		return api, nil, err
	}
	return api, func(ctx context.Context) error { return a.b.refreshInstall(ctx, e, token) }, nil
}

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

// refreshInstall renews e's token: under the installation's Redis lock it
// re-reads the record (another replica may have refreshed it already, or
// replaced the failed token) and only then spends the refresh token.
// failed is the token Slack just refused ("" for a refresh before expiry).
func (b *Bot) refreshInstall(ctx context.Context, e *installEntry, failed string) error {
	e.refresh.Lock()
	defer e.refresh.Unlock()
	cur, _, _ := e.get()
	id := cur.ID()
	if cur.BotToken != failed && !needsRefresh(cur, time.Now()) {
		return nil // done by someone in this process meanwhile
	}
	lctx, cancel := context.WithTimeout(ctx, refreshLockTTL)
	defer cancel()
	unlock, err := b.inst.store.LockInstallation(lctx, id, refreshLockTTL)
	if err != nil {
		return fmt.Errorf("bot: locking the installation of %s: %w", id, err)
	}
	defer unlock()
	inst, err := b.inst.store.Installation(lctx, id)
	if errors.Is(err, session.ErrNotFound) {
		b.inst.drop(id)
		return fmt.Errorf("%w (%s)", errNotInstalled, id)
	}
	if err != nil {
		return fmt.Errorf("bot: reading the installation of %s: %w", id, err)
	}
	if inst.BotToken != failed && !needsRefresh(inst, time.Now()) {
		e.set(b, inst) // another replica refreshed it
		return nil
	}
	if !inst.Rotating() {
		e.set(b, inst)
		return fmt.Errorf("bot: Slack refused the token of %s and it does not rotate", id)
	}
	next, err := b.refreshToken(lctx, inst)
	if err != nil {
		b.m.InstallEvents.WithLabelValues("token_refresh_failed").Inc()
		return err
	}
	// Slack has issued the new pair; if this write fails, the old refresh
	// token still works for a grace period and yields the same successor.
	if err := b.inst.store.PutInstallation(lctx, next); err != nil {
		return fmt.Errorf("bot: storing the refreshed token of %s: %w", id, err)
	}
	e.set(b, next)
	b.m.InstallEvents.WithLabelValues("token_refreshed").Inc()
	b.log.Info("bot: refreshed a workspace's bot token", "team", next.TeamID, "enterprise", next.EnterpriseID,
		"expires_in", time.Until(next.ExpiresAt).Round(time.Second).String())
	return nil
}

func (e *installEntry) orgWide() bool {
	inst, _, _ := e.get()
	return inst.OrgWide
}
