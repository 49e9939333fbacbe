package main

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/internal/oauthtest"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// connectVia plays the person's browser: it opens the Connect link as
// account and brings the callback to replica r; it returns the page.
func (rs *replicaSet) connectVia(r *replica, link, account string) (int, string, url.Values) {
	rs.t.Helper()
	q, err := oauthtest.Authorize(rs.ctx, link, account)
	if err != nil {
		rs.t.Fatalf("authorize %s: %v", link, err)
	}
	code, page := rs.get(r, "/oauth/callback?"+q.Encode())
	return code, page, q
}

// TestOAuthServersFromSlack runs two replicas against OAuth-protected MCP
// servers (internal/oauthtest: an authorization server with dynamic
// registration, PKCE and rotating refresh tokens, and a go-sdk server
// behind go-sdk's bearer middleware): an admin registers a workspace
// server and a per-user one, each Connect's callback lands on the replica
// that did not make the link; calls carry the right person's token;
// expired tokens are refreshed once; a revoked refresh token asks for a
// reconnect and Stop withdraws it; the App Home shows and removes
// connections; the callback refuses replays and escapes a hostile
// error_description; tokens appear nowhere in Slack, logs or Redis.
func TestOAuthServersFromSlack(t *testing.T) {
	ws := oauthtest.New(t, oauthtest.Options{})
	pu := oauthtest.New(t, oauthtest.Options{})
	rs := newReplicaSet(t, map[string]string{"PUBLIC_URL": "https://bobbin.test"})
	// One replica registers; the second starts after, so it reads the
	// registrations at once (replicas re-read them every 10 s).
	rs.start(1)
	admin, alice, bob := slackemu.UserAdmin, slackemu.UserAlice, slackemu.UserBob

	// Workspace server: the add answer carries a Connect button whose url
	// is the authorization endpoint itself.
	e := rs.slash(admin, "mcp add lin "+ws.URL, "bobbin_connect_link")
	if !strings.Contains(e.Text+string(e.Blocks), "OAuth (workspace)") {
		t.Errorf("add answered %s", ephemeralText(e))
	}
	link := buttonURL(t, e.Blocks, "bobbin_connect_link")
	u, _ := url.Parse(link)
	if !strings.HasPrefix(link, ws.Issuer+"/authorize?") || u.Query().Get("state") == "" || u.Query().Get("code_challenge") == "" ||
		u.Query().Get("resource") != ws.URL || u.Query().Get("redirect_uri") != "https://bobbin.test/oauth/callback" {
		t.Fatalf("Connect url = %s", link)
	}
	for _, who := range []string{alice, bob} {
		for _, eph := range rs.emu.Ephemerals(who) {
			if strings.Contains(ephemeralText(eph), ws.Issuer) {
				t.Fatalf("%s was shown the admin's Connect link", who)
			}
		}
	}
	// Before anyone connects, the list says so.
	if l := ephemeralText(rs.slash(alice, "mcp list", "MCP servers")); !strings.Contains(l, "no connection yet") || !strings.Contains(l, "OAuth, workspace: not connected for the workspace") {
		t.Errorf("list before any connection:\n%s", l)
	}

	// Per-user server: the admin's own connection lists its tools.
	e2 := rs.slash(admin, "mcp add me "+pu.URL+" --per-user", "bobbin_connect_link")
	if !strings.Contains(ephemeralText(e2), "OAuth (per-user)") {
		t.Errorf("add --per-user answered %s", ephemeralText(e2))
	}

	// Both callbacks reach the replica that did not make the links.
	rs.start(1)
	n := len(rs.emu.Ephemerals(admin))
	code, page, firstCallback := rs.connectVia(rs.reps[1], link, "acct-ws")
	if code != 200 || !strings.Contains(page, "Connected to lin") {
		t.Fatalf("callback = %d %s", code, page)
	}
	rs.ephemeral(admin, n, "Connected to `lin`", "connect done")
	if code, page, _ := rs.connectVia(rs.reps[1], buttonURL(t, e2.Blocks, "bobbin_connect_link"), "acct-admin"); code != 200 {
		t.Fatalf("callback = %d %s", code, page)
	}
	list := ephemeralText(rs.slash(alice, "mcp list", "MCP servers"))
	if !strings.Contains(list, "OAuth, workspace: connected for the workspace") || !strings.Contains(list, "OAuth, per-user: not connected for you") {
		t.Errorf("alice's mcp list:\n%s", list)
	}

	// Bob's first call of a per-user tool: an ephemeral Connect prompt to
	// him alone; once he connects (callback on the other replica) the call
	// goes on with his token.
	nb := len(rs.emu.Ephemerals(bob))
	th := rs.mention(bob, "call me__whoami")
	rs.allow(bob, th)
	prompt := rs.ephemeral(bob, nb, "bobbin_connect_link", "bob's Connect prompt")
	if prompt.ThreadTS != th || !strings.Contains(prompt.Text+string(prompt.Blocks), "connect your account") {
		t.Errorf("prompt %+v", prompt)
	}
	for _, who := range []string{alice, admin} {
		for _, eph := range rs.emu.Ephemerals(who) {
			if strings.Contains(ephemeralText(eph), buttonURL(t, prompt.Blocks, "bobbin_connect_link")) {
				t.Fatalf("%s saw bob's Connect link", who)
			}
		}
	}
	if code, page, _ := rs.connectVia(rs.other(`"event":"oauth_connect_requested"`, `"user":"`+bob+`"`), buttonURL(t, prompt.Blocks, "bobbin_connect_link"), "acct-bob"); code != 200 {
		t.Fatalf("bob's callback = %d %s", code, page)
	}
	rs.waitThread(th, "RESULT: acct-bob")
	th = rs.mention(admin, "call me__whoami")
	rs.allow(admin, th)
	rs.waitThread(th, "RESULT: acct-admin")
	th = rs.mention(alice, "call lin__whoami")
	rs.allow(alice, th)
	rs.waitThread(th, "RESULT: acct-ws")

	// Expired access tokens: three calls at once on the workspace
	// connection, spread over the replicas, refresh it once.
	ws.ExpireAccessTokens()
	before := ws.Stats().Refreshes
	var threads []string
	for range 3 {
		threads = append(threads, rs.mention(admin, "call lin__whoami"))
	}
	for _, th := range threads {
		rs.allow(admin, th)
	}
	for _, th := range threads {
		rs.waitThread(th, "RESULT: acct-ws")
	}
	if st := ws.Stats(); st.Refreshes-before != 1 || st.RefreshReuse != 0 {
		t.Errorf("refreshes %d (reuse %d), want 1 and 0", st.Refreshes-before, st.RefreshReuse)
	}

	// App Home: bob's connection with Disconnect; pressing it removes the
	// connection (not the registration) and the Home then offers Connect,
	// a link button whose click is acked.
	rs.emu.OpenHome(rs.team, bob, "home")
	rs.waitFor("bob's Home with his connection", func() bool {
		v, ok := rs.emu.HomeView(rs.team, bob)
		return ok && strings.Contains(string(v.Blocks), "bobbin_home_disconnect:me")
	})
	in, err := rs.emu.ClickHome(rs.team, bob, "bobbin_home_disconnect:me", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Wait(rs.ctx); err != nil {
		t.Fatal(err)
	}
	rs.waitFor("bob's Home offering Connect", func() bool {
		v, _ := rs.emu.HomeView(rs.team, bob)
		return strings.Contains(string(v.Blocks), "bobbin_home_connect:me") && !strings.Contains(string(v.Blocks), "bobbin_home_disconnect:me")
	})
	v, _ := rs.emu.HomeView(rs.team, bob)
	if l := buttonURL(t, v.Blocks, "bobbin_home_connect:me"); !strings.HasPrefix(l, pu.Issuer+"/authorize?") {
		t.Errorf("Home Connect url %s", l)
	}
	if in, err = rs.emu.ClickHome(rs.team, bob, "bobbin_home_connect:me", ""); err != nil {
		t.Fatal(err)
	} else if _, err := in.Wait(rs.ctx); err != nil || in.URL == "" {
		t.Errorf("Connect link click: %v (url %q)", err, in.URL)
	}
	if l := ephemeralText(rs.slash(bob, "mcp list", "MCP servers")); !strings.Contains(l, "OAuth, per-user: not connected for you") || !strings.Contains(l, "`me`") {
		t.Errorf("bob's list after disconnect:\n%s", l)
	}

	// A revoked refresh token: the admin is asked to reconnect; Stop
	// withdraws the waiting call; the other server is unaffected.
	pu.RevokeAll()
	na := len(rs.emu.Ephemerals(admin))
	th = rs.mention(admin, "call me__whoami")
	rs.allow(admin, th)
	rs.ephemeral(admin, na, "reconnect needed", "reconnect prompt")
	if l := ephemeralText(rs.slash(admin, "mcp list", "MCP servers")); !strings.Contains(l, "reconnect needed") {
		t.Errorf("admin's list while reconnect is needed:\n%s", l)
	}
	rs.click(admin, rs.buttonMessage(th, "bobbin_stop"), "bobbin_stop")
	rs.waitThread(th, "Stopped by")
	th = rs.mention(alice, "call lin__whoami")
	rs.allow(alice, th)
	rs.waitThread(th, "RESULT: acct-ws")

	// The callback: a used state is refused; a hostile error_description
	// is escaped (and the admin hears it failed).
	if code, page := rs.get(rs.reps[0], "/oauth/callback?"+firstCallback.Encode()); code != 400 || !strings.Contains(page, "expired or was already used") {
		t.Errorf("replayed callback = %d %s", code, page)
	}
	e = rs.slash(admin, "mcp connect lin", "bobbin_connect_link")
	cu, _ := url.Parse(buttonURL(t, e.Blocks, "bobbin_connect_link"))
	na = len(rs.emu.Ephemerals(admin))
	hostile := url.Values{"state": {cu.Query().Get("state")}, "error": {"access_denied"}, "iss": {ws.Issuer},
		"error_description": {`<script>alert("x")</script><img src=x onerror=alert(1)>`}}
	code, page = rs.get(rs.reps[1], "/oauth/callback?"+hostile.Encode())
	if code != 400 || strings.Contains(page, "<script>alert") || strings.Contains(page, "<img") || !strings.Contains(page, "&lt;script&gt;") {
		t.Errorf("hostile callback = %d %s", code, page)
	}
	rs.ephemeral(admin, na, "didn't work", "failed connect notice")

	// Disconnect keeps the registration; only admins for a workspace server.
	if got := ephemeralText(rs.slash(alice, "mcp disconnect lin", "lin")); !strings.Contains(got, "only a workspace admin") {
		t.Errorf("alice's disconnect answered %s", got)
	}
	revoked := ws.Stats().Revocations
	if got := ephemeralText(rs.slash(admin, "mcp disconnect lin", "lin")); !strings.Contains(got, "is removed") {
		t.Errorf("admin's disconnect answered %s", got)
	}
	if ws.Stats().Revocations <= revoked {
		t.Error("disconnect did not revoke the token")
	}
	if l := ephemeralText(rs.slash(alice, "mcp list", "MCP servers")); !strings.Contains(l, "`lin`") || !strings.Contains(l, "not connected for the workspace") {
		t.Errorf("list after disconnect:\n%s", l)
	}
	// The audit stream has the connects, disconnects and refresh failures.
	var events []string
	for _, m := range rs.redis.XRange(rs.ctx, "bobbin:{w:"+rs.team+"}:audit", "-", "+").Val() {
		ev, _ := m.Values["event"].(string)
		events = append(events, ev)
	}
	for _, ev := range []string{"oauth_connect", "oauth_disconnect", "oauth_refresh_failed", "oauth_connect_requested", "oauth_connect_failed"} {
		if !slices.Contains(events, ev) {
			t.Errorf("audit lacks %s: %v", ev, events)
		}
	}
	// Removing a registration deletes its connections.
	rs.slash(admin, "mcp remove me", "Removed")
	if raw := rs.rawRedis(); strings.Contains(raw, ":{w:"+rs.team+"}:oauth:conn:me\n") {
		t.Error("the removed server's connections are still stored")
	}

	if where := rs.leaks("canary-"); len(where) > 0 {
		t.Errorf("a token or client secret appears in %v", where)
	}
}

// TestOAuthServerRefusedWithoutPublicURL: without PUBLIC_URL an OAuth
// server is refused at registration, saying why, and nothing is saved.
func TestOAuthServerRefusedWithoutPublicURL(t *testing.T) {
	ws := oauthtest.New(t, oauthtest.Options{})
	rs := newReplicaSet(t, nil)
	rs.start(1)
	got := ephemeralText(rs.slash(slackemu.UserAdmin, "mcp add lin "+ws.URL, "PUBLIC_URL"))
	if !strings.Contains(got, "Nothing was saved") {
		t.Errorf("answered %s", got)
	}
	if l := ephemeralText(rs.slash(slackemu.UserAdmin, "mcp list", "MCP servers")); strings.Contains(l, "lin") {
		t.Errorf("list after a refused add:\n%s", l)
	}
}
