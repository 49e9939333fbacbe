package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/internal/oauthtest"
	"github.com/bobbinbot/bobbin/session"
)

// replicas are Managers sharing one Redis (the real one under
// scripts/test.sh, else one in-process miniredis), as several bot
// replicas behind one PUBLIC_URL do.
type replicas struct {
	t       *testing.T
	url     string
	prefix  string
	key     []byte
	stores  []*session.Store
	audit   *auditLog
	logs    []*syncBuffer
	mgrs    []*Manager
	regs    []*fakeRegs
	prompts *promptLog
}

type auditLog struct {
	mu sync.Mutex
	ev []AuditEvent
}

func (a *auditLog) add(_ context.Context, e AuditEvent) {
	a.mu.Lock()
	a.ev = append(a.ev, e)
	a.mu.Unlock()
}

func (a *auditLog) actions() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, e := range a.ev {
		out = append(out, e.Action)
	}
	return out
}

// promptLog is the bot's Connect prompt: it records each prompt and runs
// the test's reaction (a person clicking Connect, or not).
type promptLog struct {
	mu      sync.Mutex
	prompts []ConnectPrompt
	react   func(p ConnectPrompt) error
}

func (p *promptLog) PromptConnect(_ context.Context, c ConnectPrompt) error {
	p.mu.Lock()
	p.prompts = append(p.prompts, c)
	react := p.react
	p.mu.Unlock()
	if react == nil {
		return errors.New("nobody is there to connect")
	}
	return react(c)
}

func (p *promptLog) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.prompts)
}

func newReplicas(t *testing.T, n int, cfg *Config, tweak func(*OAuthOptions), more ...func(*Options)) *replicas {
	t.Helper()
	r := &replicas{t: t, url: os.Getenv("REDIS_URL"), audit: &auditLog{}, prompts: &promptLog{}}
	if r.url == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mr.Close)
		r.url = "redis://" + mr.Addr() + "/0"
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	r.prefix = "mcptest-" + hex.EncodeToString(b[:])
	r.key = make([]byte, 32)
	_, _ = rand.Read(r.key)
	t.Cleanup(func() { r.cleanRedis() })
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := session.Open(ctx, session.Options{URL: r.url, Prefix: r.prefix, SecretKey: r.key})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		oo := OAuthOptions{PublicURL: "https://bobbin.test", Tokens: st, States: st, Locker: st, Waker: st,
			Prompter: r.prompts, Prompts: st, Audit: r.audit.add, ConnectTimeout: 20 * time.Second}
		if tweak != nil {
			tweak(&oo)
		}
		tm := newTestManager(t, cfg, func(o *Options) {
			o.OAuth, o.Pins = oo, st
			for _, f := range more {
				f(o)
			}
		})
		r.regs = append(r.regs, tm.regs)
		r.stores = append(r.stores, st)
		r.logs = append(r.logs, tm.logs)
		r.mgrs = append(r.mgrs, tm.Manager)
	}
	return r
}

// raw returns every value under the prefix as Redis holds it.
func (r *replicas) raw() string {
	ctx := context.Background()
	opt, _ := redis.ParseURL(r.url)
	c := redis.NewClient(opt)
	defer c.Close()
	var b strings.Builder
	iter := c.Scan(ctx, 0, r.prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		switch c.Type(ctx, k).Val() {
		case "string":
			b.WriteString(k + "=" + c.Get(ctx, k).Val() + "\n")
		case "hash":
			for f, v := range c.HGetAll(ctx, k).Val() {
				b.WriteString(k + "/" + f + "=" + v + "\n")
			}
		case "list":
			b.WriteString(k + "=" + strings.Join(c.LRange(ctx, k, 0, -1).Val(), ",") + "\n")
		}
	}
	return b.String()
}

func (r *replicas) cleanRedis() {
	ctx := context.Background()
	opt, err := redis.ParseURL(r.url)
	if err != nil {
		return
	}
	c := redis.NewClient(opt)
	defer c.Close()
	iter := c.Scan(ctx, 0, r.prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
}

// noCanary fails if a token or client secret appears in clear in a log or
// in Redis.
func (r *replicas) noCanary() {
	r.t.Helper()
	for i, l := range r.logs {
		if strings.Contains(l.String(), "canary-") {
			r.t.Errorf("replica %d logged a token or secret:\n%s", i, l.String())
		}
	}
	if raw := r.raw(); strings.Contains(raw, "canary-") {
		r.t.Errorf("a token or secret is in Redis in clear:\n%s", raw)
	}
}

// callback delivers the browser's redirect to replica i's HTTP handler and
// returns the page.
func (r *replicas) callback(i int, q url.Values) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, CallbackPath+"?"+q.Encode(), nil)
	rec := httptest.NewRecorder()
	r.mgrs[i].CallbackHandler(nil).ServeHTTP(rec, req)
	return rec
}

// connect plays a person clicking the Connect link as account user, the
// callback landing on replica i.
func (r *replicas) connect(i int, link, user string) *httptest.ResponseRecorder {
	r.t.Helper()
	q, err := oauthtest.Authorize(context.Background(), link, user)
	if err != nil {
		r.t.Fatalf("authorize: %v", err)
	}
	return r.callback(i, q)
}

func oauthCfg(url, mode string) *Config {
	return &Config{Servers: []ServerConfig{{Name: "acme", URL: url, Auth: mode}}}
}

func reqCtx(t *testing.T, user string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return access.WithCaller(ctx, access.Caller{Team: "T1", User: user, Channel: "C1", Thread: "1700000000.000100"})
}

func TestOAuthWorkspaceConnectCallbackOnAnotherReplica(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	r := newReplicas(t, 2, oauthCfg(srv.URL, AuthWorkspace), nil)
	a, b := r.mgrs[0], r.mgrs[1]
	ctx := reqCtx(t, "UADMIN")

	if tools, _ := a.Tools(ctx, "T1"); len(tools) != 0 {
		t.Fatalf("tools before connecting: %v", toolNames(tools))
	}
	if st, ok, _ := a.ConnectionState(ctx, "T1", "acme", "UADMIN"); !ok || st.Connected || st.Reason != "not connected" {
		t.Fatalf("state before connecting: %+v %v", st, ok)
	}
	link, expires, err := a.StartConnect(ctx, "T1", "acme", "UADMIN")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	q := u.Query()
	if !strings.HasPrefix(link, srv.Issuer+"/authorize?") || q.Get("code_challenge_method") != "S256" ||
		q.Get("resource") != srv.URL || q.Get("redirect_uri") != "https://bobbin.test/oauth/callback" || len(q.Get("state")) < 16 {
		t.Fatalf("Connect link %s", link)
	}
	if time.Until(expires) > 10*time.Minute || time.Until(expires) < 9*time.Minute {
		t.Fatalf("link expires %s", expires)
	}
	page := r.connect(1, link, "admin-account") // the callback reaches replica B
	if page.Code != 200 || !strings.Contains(page.Body.String(), "Connected to acme") {
		t.Fatalf("callback page %d: %s", page.Code, page.Body)
	}
	if c := page.Header().Get("Set-Cookie"); c != "" {
		t.Fatalf("callback set a cookie: %s", c)
	}
	for _, m := range []*Manager{a, b} {
		tools, err := m.Tools(ctx, "T1")
		if err != nil {
			t.Fatal(err)
		}
		out, err := call(t, toolByName(t, tools, "acme__whoami"), `{}`)
		if err != nil || out != "admin-account" {
			t.Fatalf("whoami = %q, %v", out, err)
		}
	}
	// Anyone in the workspace uses the workspace connection.
	tools, _ := a.Tools(ctx, "T1")
	out, err := toolByName(t, tools, "acme__whoami").Call(reqCtx(t, "UOTHER"), nil)
	if err != nil || out != "admin-account" {
		t.Fatalf("whoami for another member = %q, %v", out, err)
	}
	if st, _, _ := b.ConnectionState(ctx, "T1", "acme", ""); !st.Connected || st.ConnectedBy != "UADMIN" {
		t.Fatalf("state after connecting: %+v", st)
	}
	if got := srv.Stats(); got.Registrations != 1 || got.CodeExchanges != 1 {
		t.Fatalf("stats %+v", got)
	}
	// A second Connect (another replica) reuses the client registered with
	// this issuer.
	link2, _, err := b.StartConnect(ctx, "T1", "acme", "UADMIN")
	if err != nil {
		t.Fatal(err)
	}
	if page := r.connect(0, link2, "admin-account"); page.Code != 200 {
		t.Fatalf("second connect %d", page.Code)
	}
	if got := srv.Stats(); got.Registrations != 1 {
		t.Fatalf("registered again: %+v", got)
	}
	// Disconnect revokes and keeps the registration.
	if err := a.Disconnect(ctx, "T1", "acme", "UADMIN"); err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.Revocations == 0 {
		t.Fatalf("no revocation: %+v", st)
	}
	if st, ok, _ := b.ConnectionState(ctx, "T1", "acme", ""); !ok || st.Connected {
		t.Fatalf("state after disconnect: %+v", st)
	}
	if _, err := a.ServerTools(ctx, "T1", "acme"); !errors.Is(err, servers.ErrNotConnected) {
		t.Fatalf("listing after disconnect: %v", err)
	}
	want := []string{"oauth_connect", "oauth_connect", "oauth_disconnect"}
	if got := r.audit.actions(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("audit %v, want %v", got, want)
	}
	r.noCanary()
}

func TestOAuthPerUserTokensNeverMixed(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	r := newReplicas(t, 2, oauthCfg(srv.URL, AuthUser), nil)
	a := r.mgrs[0]
	// Alice connects from Slack (/bobbin mcp connect): the tools are then
	// listed through her connection.
	alice := reqCtx(t, "UALICE")
	link, _, err := a.StartConnect(alice, "T1", "acme", "UALICE")
	if err != nil {
		t.Fatal(err)
	}
	if page := r.connect(1, link, "alice"); page.Code != 200 {
		t.Fatalf("alice's callback: %d %s", page.Code, page.Body)
	}
	// Bob has not connected: his first call prompts him (ephemerally, in
	// the bot) and waits; he connects, the callback lands on replica B,
	// and the call goes on with his own token.
	r.prompts.react = func(p ConnectPrompt) error {
		if p.Caller.User != "UBOB" || p.Mode != AuthUser || p.Reason != "not connected" {
			t.Errorf("prompt %+v", p)
		}
		go func() {
			q, err := oauthtest.Authorize(context.Background(), p.URL, "bob")
			if err != nil {
				t.Errorf("authorize: %v", err)
				return
			}
			r.callback(1, q)
		}()
		return nil
	}
	bob := reqCtx(t, "UBOB")
	tools, err := a.Tools(bob, "T1")
	if err != nil {
		t.Fatal(err)
	}
	whoami := toolByName(t, tools, "acme__whoami")
	var wg sync.WaitGroup
	results := map[string][]string{}
	var mu sync.Mutex
	for i := 0; i < 3; i++ {
		for _, c := range []struct {
			ctx  context.Context
			user string
		}{{alice, "alice"}, {bob, "bob"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := whoami.Call(c.ctx, nil)
				if err != nil {
					t.Errorf("%s: %v", c.user, err)
				}
				mu.Lock()
				results[c.user] = append(results[c.user], out)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for user, outs := range results {
		for _, o := range outs {
			if o != user {
				t.Fatalf("%s's call ran as %q", user, o)
			}
		}
	}
	if n := r.prompts.count(); n != 1 {
		t.Fatalf("%d prompts, want 1 (bob's parallel calls share one)", n)
	}
	// Carol never connects: her call fails and nobody else's token is used.
	r.prompts.react = func(ConnectPrompt) error { return errors.New("carol dismissed it") }
	if out, err := whoami.Call(reqCtx(t, "UCAROL"), nil); err == nil {
		t.Fatalf("carol's call ran as %q", out)
	}
	if _, err := whoami.Call(context.Background(), nil); err == nil {
		t.Fatal("a call without a requester ran")
	}
	if st, _, _ := a.ConnectionState(bob, "T1", "acme", "UBOB"); !st.Connected || st.Mode != AuthUser {
		t.Fatalf("bob's state %+v", st)
	}
	if st, _, _ := a.ConnectionState(bob, "T1", "acme", "UCAROL"); st.Connected {
		t.Fatalf("carol's state %+v", st)
	}
	for user, want := range map[string]bool{"UBOB": true, "UCAROL": false} {
		sts := a.StatusFor(bob, "T1", user)
		if len(sts) != 1 || sts[0].Auth != AuthUser || sts[0].OAuth == nil || sts[0].OAuth.Connected != want {
			t.Fatalf("StatusFor %s: %+v", user, sts)
		}
	}
	r.noCanary()
}

func TestOAuthExpiredTokenRefreshedOnceAcrossReplicas(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	r := newReplicas(t, 2, oauthCfg(srv.URL, AuthWorkspace), nil)
	ctx := reqCtx(t, "UADMIN")
	link, _, err := r.mgrs[0].StartConnect(ctx, "T1", "acme", "UADMIN")
	if err != nil {
		t.Fatal(err)
	}
	r.connect(0, link, "admin-account")
	// Both replicas connected and holding the same access token.
	var calls []func() (string, error)
	for _, m := range r.mgrs {
		ts, err := m.Tools(ctx, "T1")
		if err != nil {
			t.Fatal(err)
		}
		tl := toolByName(t, ts, "acme__whoami")
		if out, err := tl.Call(ctx, nil); err != nil || out != "admin-account" {
			t.Fatalf("first call %q, %v", out, err)
		}
		calls = append(calls, func() (string, error) { return tl.Call(ctx, nil) })
	}
	// The server now refuses the token we still think valid: each replica
	// gets a 401, one refreshes (once, under the shared lock) and both
	// retry with the new token.
	srv.ExpireAccessTokens()
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		for _, c := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if out, err := c(); err != nil || out != "admin-account" {
					t.Errorf("call after expiry %q, %v (stats %+v)", out, err, srv.Stats())
				}
			}()
		}
	}
	wg.Wait()
	st := srv.Stats()
	if st.Refreshes != 1 || st.RefreshReuse != 0 {
		t.Fatalf("refreshes %d, reuse %d; want 1, 0", st.Refreshes, st.RefreshReuse)
	}
	if len(st.RefreshResources) != 1 || st.RefreshResources[0] != srv.URL {
		t.Fatalf("refresh resource %v, want %s", st.RefreshResources, srv.URL)
	}
	if r.prompts.count() != 0 {
		t.Log(r.logs[0].String())
		t.Fatal("a refresh asked someone to reconnect")
	}
	r.noCanary()
}

func TestOAuthRevokedRefreshTokenNeedsReconnect(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	r := newReplicas(t, 1, oauthCfg(srv.URL, AuthUser), nil)
	m := r.mgrs[0]
	ctx := reqCtx(t, "UALICE")
	link, _, err := m.StartConnect(ctx, "T1", "acme", "UALICE")
	if err != nil {
		t.Fatal(err)
	}
	r.connect(0, link, "alice")
	tools, err := m.Tools(ctx, "T1")
	if err != nil {
		t.Fatal(err)
	}
	whoami := toolByName(t, tools, "acme__whoami")
	srv.RevokeAll() // alice revoked the app at the provider
	r.prompts.react = func(p ConnectPrompt) error {
		if p.Reason != "reconnect needed" {
			t.Errorf("prompt reason %q", p.Reason)
		}
		return errors.New("not now")
	}
	if out, err := whoami.Call(ctx, nil); err == nil {
		t.Fatalf("call with a revoked token returned %q", out)
	}
	if st, _, _ := m.ConnectionState(ctx, "T1", "acme", "UALICE"); st.Connected || st.Reason != "reconnect needed" {
		t.Fatalf("state %+v", st)
	}
	if got := strings.Join(r.audit.actions(), ","); !strings.Contains(got, "oauth_refresh_failed") {
		t.Fatalf("audit %s", got)
	}
	// Reconnecting makes it work again.
	r.prompts.react = func(p ConnectPrompt) error { r.connect(0, p.URL, "alice"); return nil }
	if out, err := whoami.Call(ctx, nil); err != nil || out != "alice" {
		t.Fatalf("after reconnect %q, %v", out, err)
	}
	r.noCanary()
}

func TestOAuthCallbackRefusals(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	r := newReplicas(t, 2, oauthCfg(srv.URL, AuthWorkspace), func(o *OAuthOptions) { o.StateTTL = 300 * time.Millisecond })
	ctx := reqCtx(t, "UADMIN")
	start := func() url.Values {
		link, _, err := r.mgrs[0].StartConnect(ctx, "T1", "acme", "UADMIN")
		if err != nil {
			t.Fatal(err)
		}
		q, err := oauthtest.Authorize(ctx, link, "admin")
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	t.Run("replayed", func(t *testing.T) {
		q := start()
		if p := r.callback(1, q); p.Code != 200 {
			t.Fatalf("first use %d", p.Code)
		}
		p := r.callback(0, q)
		if p.Code != 400 || !strings.Contains(p.Body.String(), "expired or was already used") {
			t.Fatalf("replay %d %s", p.Code, p.Body)
		}
	})
	t.Run("expired", func(t *testing.T) {
		q := start()
		time.Sleep(400 * time.Millisecond)
		if p := r.callback(1, q); p.Code != 400 {
			t.Fatalf("expired state %d", p.Code)
		}
	})
	t.Run("forged", func(t *testing.T) {
		q := start()
		q.Set("state", q.Get("state")+"x")
		if p := r.callback(1, q); p.Code != 400 || strings.Contains(p.Body.String(), q.Get("code")) {
			t.Fatalf("forged state %d %s", p.Code, p.Body)
		}
	})
	t.Run("another team", func(t *testing.T) {
		// A state whose sealed binding names another workspace than the
		// one it is filed under is refused.
		rec := []byte(`{"v":1,"team":"T2","server":"acme","created":"` + time.Now().UTC().Format(time.RFC3339) + `"}`)
		state := "forged-state-for-another-team-0001"
		if err := r.stores[0].PutOAuthState(ctx, state, "T1", rec, time.Minute); err != nil {
			t.Fatal(err)
		}
		if p := r.callback(1, url.Values{"state": {state}, "code": {"x"}}); p.Code != 400 {
			t.Fatalf("state for another team %d", p.Code)
		}
	})
	t.Run("hostile error_description", func(t *testing.T) {
		q := start()
		q.Del("code")
		q.Set("error", "access_denied")
		q.Set("error_description", `<script>alert(1)</script><img src=x onerror=alert(2)>`)
		p := r.callback(1, q)
		body := p.Body.String()
		if p.Code != 400 || strings.Contains(body, "<script>") || strings.Contains(body, "<img") ||
			!strings.Contains(body, "&lt;script&gt;") {
			t.Fatalf("page %d:\n%s", p.Code, body)
		}
		if p.Header().Get("Set-Cookie") != "" || !strings.Contains(p.Header().Get("Content-Security-Policy"), "default-src 'none'") {
			t.Fatalf("headers %v", p.Header())
		}
	})
	t.Run("wrong iss", func(t *testing.T) {
		q := start()
		q.Set("iss", "https://evil.test")
		if p := r.callback(1, q); p.Code != 400 || !strings.Contains(p.Body.String(), "another issuer") {
			t.Fatalf("wrong iss %d %s", p.Code, p.Body)
		}
	})
	if st, _, _ := r.mgrs[0].ConnectionState(ctx, "T1", "acme", ""); !st.Connected {
		t.Fatalf("the replayed callback's first use should have connected: %+v", st)
	}
	r.noCanary()
}

func TestOAuthRefusedWithoutPublicURL(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	tm := newTestManager(t, oauthCfg(srv.URL, AuthWorkspace), func(o *Options) { o.AllowPrivateNetworks = true })
	ctx := reqCtx(t, "UADMIN")
	if _, _, err := tm.StartConnect(ctx, "T1", "acme", "UADMIN"); !errors.Is(err, servers.ErrOAuthUnavailable) {
		t.Fatalf("StartConnect without PUBLIC_URL: %v", err)
	}
	if err := tm.ProbeAuth(ctx, "linear", srv.URL); !errors.Is(err, servers.ErrOAuthUnavailable) {
		t.Fatalf("ProbeAuth without PUBLIC_URL: %v", err)
	}
	if _, err := tm.Probe(ctx, "linear", srv.URL, nil); !errors.Is(err, servers.ErrOAuthUnavailable) {
		t.Fatalf("Probe without PUBLIC_URL: %v", err)
	}
	r := newReplicas(t, 1, nil, func(o *OAuthOptions) {})
	r.mgrs[0].opts.AllowPrivateNetworks = true
	if err := r.mgrs[0].ProbeAuth(ctx, "linear", srv.URL); !errors.Is(err, servers.ErrNeedsOAuth) {
		t.Fatalf("ProbeAuth: %v", err)
	}
}

func TestOAuthRegisteredUserServerListsThroughRegistrar(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	r := newReplicas(t, 2, nil, nil, func(o *Options) { o.AllowPrivateNetworks = true })
	for _, regs := range r.regs {
		regs.set("T1", Registered{Name: "acme", URL: srv.URL, Auth: AuthUser, CreatedBy: "UADMIN"})
	}
	a, b := r.mgrs[0], r.mgrs[1]
	admin, bob := reqCtx(t, "UADMIN"), reqCtx(t, "UBOB")
	if tools, _ := b.Tools(bob, "T1"); len(tools) != 0 {
		t.Fatalf("tools before the admin connected: %v", toolNames(tools))
	}
	if sts := b.StatusFor(bob, "T1", "UADMIN"); len(sts) != 1 || sts[0].OAuth == nil || sts[0].OAuth.Connected {
		t.Fatalf("status before connecting: %+v", sts)
	}
	// The admin connects from the answer to /bobbin mcp add.
	link, _, err := a.StartConnect(admin, "T1", "acme", "UADMIN")
	if err != nil {
		t.Fatal(err)
	}
	if page := r.connect(1, link, "admin"); page.Code != 200 {
		t.Fatalf("callback %d %s", page.Code, page.Body)
	}
	// Bob sees the tools (listed through the admin's connection), but his
	// call runs as him once he connected.
	tools, err := b.Tools(bob, "T1")
	if err != nil {
		t.Fatal(err)
	}
	whoami := toolByName(t, tools, "acme__whoami")
	r.prompts.react = func(p ConnectPrompt) error { r.connect(0, p.URL, "bob"); return nil }
	if out, err := whoami.Call(bob, nil); err != nil || out != "bob" {
		t.Fatalf("bob's call %q, %v", out, err)
	}
	if out, err := whoami.Call(admin, nil); err != nil || out != "admin" {
		t.Fatalf("admin's call %q, %v", out, err)
	}
	if n := r.prompts.count(); n != 1 {
		t.Fatalf("%d prompts, want 1 (bob)", n)
	}
	r.noCanary()
}

func TestOAuthPreregisteredClientOfAnotherIssuer(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	cfg := &Config{Servers: []ServerConfig{{Name: "acme", URL: srv.URL, Auth: AuthWorkspace,
		ClientID: "preregistered", ClientSecret: "s", ClientIssuer: "https://old-as.example"}}}
	r := newReplicas(t, 1, cfg, nil)
	_, _, err := r.mgrs[0].StartConnect(reqCtx(t, "UADMIN"), "T1", "acme", "UADMIN")
	if err == nil || !strings.Contains(err.Error(), "belongs to https://old-as.example") {
		t.Fatalf("StartConnect: %v", err)
	}
	if srv.Stats().Registrations != 0 {
		t.Fatal("registered a client instead")
	}
}
