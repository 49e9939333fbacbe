package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/session"
)

// Multi-workspace installs end to end: the whole program, the Slack
// emulator's OAuth v2 flow driven by an HTTP client with a cookie jar (the
// browser), real Redis.

// wsTeam is one emulated workspace with random ids, so tests sharing a
// Redis never see each other's keys.
type wsTeam struct {
	ID, Name, Channel, User, Admin, BotUser string
}

func newWSTeam(name string) wsTeam {
	var b [4]byte
	_, _ = rand.Read(b[:])
	r := strings.ToUpper(hex.EncodeToString(b[:]))
	return wsTeam{ID: "T" + r, Name: name, Channel: "C" + r, User: "UM" + r, Admin: "UA" + r, BotUser: "UB" + r}
}

func (w wsTeam) team(pinnedToken string) slackemu.Team {
	return slackemu.Team{
		ID: w.ID, Name: w.Name, Domain: strings.ToLower(w.Name), BotUserID: w.BotUser, BotID: "B" + w.ID[1:], BotName: "bobbin",
		BotToken: pinnedToken,
		Users: []slackemu.User{
			{ID: w.User, Name: "member", RealName: "Member " + w.Name, DisplayName: "member"},
			{ID: w.Admin, Name: "admin", RealName: "Admin " + w.Name, DisplayName: "admin", IsAdmin: true},
		},
		Channels: []slackemu.Channel{{ID: w.Channel, Name: "general", BotMember: true}},
	}
}

// installRig is the emulator, the model and the environment of a
// multi-workspace deployment; start runs replicas of the program on it.
type installRig struct {
	t    *testing.T
	emu  *slackemu.Server
	llm  *llmemu.Server
	addr string // the first replica's HTTP address: PUBLIC_URL
	env  map[string]string
	key  []byte
}

func newInstallRig(t *testing.T, teams []slackemu.Team, oauth slackemu.OAuthOptions, extra map[string]string) *installRig {
	t.Helper()
	addr := freeAddr(t)
	oauth.RedirectURLs = []string{"http://" + addr + "/slack/oauth_redirect"}
	emu := slackemu.New(slackemu.Options{Teams: teams, OAuth: oauth, NoRateLimits: true})
	t.Cleanup(emu.Close)
	llm := llmemu.New(llmemu.Options{TokenInterval: time.Millisecond})
	t.Cleanup(llm.Close)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	env := map[string]string{
		"SLACK_APP_TOKEN":            slackemu.AppToken,
		"SLACK_API_URL":              emu.APIURL(),
		"SLACK_CLIENT_ID":            slackemu.ClientID,
		"SLACK_CLIENT_SECRET":        slackemu.ClientSecret,
		"SLACK_OAUTH_AUTHORIZE_URL":  emu.AuthorizeURL(),
		"PUBLIC_URL":                 "http://" + addr,
		"SECRET_KEY":                 base64.StdEncoding.EncodeToString(key),
		"REDIS_URL":                  os.Getenv("REDIS_URL"),
		"LLM_PROVIDER":               "openai",
		"LLM_BASE_URL":               llm.URL() + "/v1",
		"LLM_API_KEY":                "sk-test",
		"LLM_MODEL":                  "gpt-4o",
		"HTTP_ADDR":                  addr,
		"LOG_LEVEL":                  "debug",
		"MCP_ALLOW_PRIVATE_NETWORKS": "true",
		"STREAM_EDIT_INTERVAL":       "100ms",
		"SHUTDOWN_GRACE":             "4s",
		// The emulator runs without limits; so does the governor here.
		"SLACK_RATE_LIMITS": "*=off",
	}
	for k, v := range extra {
		env[k] = v
	}
	return &installRig{t: t, emu: emu, llm: llm, addr: addr, env: env, key: key}
}

// replica is one running program.
type installReplica struct {
	addr string
	logs *syncBuffer
}

// start runs a replica; addr "" is the rig's (PUBLIC_URL's) address. It
// returns once /readyz answers 200.
func (r *installRig) start(addr string, env map[string]string) *installReplica {
	r.t.Helper()
	e := map[string]string{}
	for k, v := range r.env {
		e[k] = v
	}
	for k, v := range env {
		e[k] = v
	}
	if addr == "" {
		addr = r.addr
	}
	e["HTTP_ADDR"] = addr
	rep := &installReplica{addr: addr, logs: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, envFunc(e), rep.logs, io.Discard) }()
	r.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			r.t.Errorf("run: %v", err)
		}
		if r.t.Failed() {
			r.t.Logf("logs of %s:\n%s", addr, rep.logs.String())
		}
	})
	r.wait("ready", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return rep
}

func (r *installRig) wait(what string, cond func() bool) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.emu.WaitFor(ctx, cond); err != nil {
		r.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// browser is an HTTP client with a cookie jar; follow=false stops at
// each redirect.
func browser(follow bool) *http.Client {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	if !follow {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return c
}

func getPage(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// install runs the whole flow for team in a fresh browser and returns the
// result page.
func (r *installRig) install(team string) (int, string) {
	r.t.Helper()
	r.emu.SetConsent(slackemu.Consent{Team: team})
	resp, body := getPage(r.t, browser(true), "http://"+r.addr+"/slack/install")
	return resp.StatusCode, body
}

// ask mentions the bot in w's channel and waits for the finished reply.
func (r *installRig) ask(w wsTeam, text string) string {
	r.t.Helper()
	p := r.emu.Mention(w.ID, w.Channel, w.User, text, "")
	var got string
	r.wait("a reply in "+w.Name, func() bool {
		rs := r.emu.BotReplies(w.Channel, p.TS)
		if len(rs) != 1 || strings.Contains(string(rs[0].Blocks), "bobbin_stop") {
			return false
		}
		got = rs[0].Text
		return strings.Contains(got, text)
	})
	return got
}

// slash runs /bobbin as user in w and returns what they were shown.
func (r *installRig) slash(w wsTeam, user, text string, want int) string {
	r.t.Helper()
	before := len(r.emu.Ephemerals(user))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.emu.SlashCommand(w.ID, w.Channel, user, "/bobbin", text).Wait(ctx); err != nil {
		r.t.Fatalf("/bobbin %s: %v", text, err)
	}
	var got []string
	r.wait("/bobbin "+text, func() bool {
		got = got[:0]
		for _, e := range r.emu.Ephemerals(user)[before:] {
			got = append(got, e.Text)
		}
		return len(got) >= want
	})
	return strings.Join(got, "\n")
}

// secrets are every token and secret the run handled.
func (r *installRig) secrets() []string {
	out := []string{slackemu.ClientSecret, slackemu.AppToken, r.env["SECRET_KEY"]}
	for _, in := range r.emu.Installations() {
		out = append(out, in.BotTokens...)
		out = append(out, in.BotToken, in.RefreshToken)
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// redisKeys returns the keys of the bot's Redis (prefix "bobbin") that
// mention one of ids, with their TTLs; a nil map when no real Redis runs.
func redisKeys(t *testing.T, ids ...string) map[string]time.Duration {
	t.Helper()
	u := os.Getenv("REDIS_URL")
	if u == "" {
		return nil
	}
	o, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	defer c.Close()
	ctx := context.Background()
	out := map[string]time.Duration{}
	iter := c.Scan(ctx, 0, "bobbin:*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		for _, id := range ids {
			if strings.Contains(k, id) {
				out[k] = c.PTTL(ctx, k).Val()
			}
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// redisHolds reports which of secrets appear in clear in any bobbin key.
func redisHolds(t *testing.T, secrets []string) []string {
	t.Helper()
	u := os.Getenv("REDIS_URL")
	if u == "" {
		return nil
	}
	o, _ := redis.ParseURL(u)
	c := redis.NewClient(o)
	defer c.Close()
	ctx := context.Background()
	var found []string
	iter := c.Scan(ctx, 0, "bobbin:*", 1000).Iterator()
	for iter.Next(ctx) {
		v, err := c.Dump(ctx, iter.Val()).Result()
		if err != nil {
			continue
		}
		for _, s := range secrets {
			if strings.Contains(v, s) {
				found = append(found, iter.Val())
			}
		}
	}
	return found
}

// TestInstallTwoWorkspaces: with no SLACK_BOT_TOKEN, two workspaces
// install the app through /slack/install → Slack's authorize page →
// /slack/oauth_redirect; a mention in each is answered with its own
// token (the emulator refuses a token in another team), under its own
// workspace's name and bot identity; an MCP server registered in one is
// offered there only; no token reaches a log line or Redis in clear.
func TestInstallTwoWorkspaces(t *testing.T) {
	// First, so its Close (a cleanup) runs after the program stopped.
	mcpURL, _, _ := loopbackMCP(t, "ws-secret-123")
	a, b, c := newWSTeam("Acme"), newWSTeam("Globex"), newWSTeam("Initech")
	rig := newInstallRig(t, []slackemu.Team{a.team(""), b.team(""), c.team("")}, slackemu.OAuthOptions{}, nil)
	rep := rig.start("", nil)

	// Not installed yet: acked, ignored, logged once.
	for range 2 {
		rig.waitAck(rig.emu.Mention(c.ID, c.Channel, c.User, "anyone there?", ""))
	}
	for _, w := range []wsTeam{a, b} {
		code, body := rig.install(w.ID)
		if code != 200 || !strings.Contains(body, "Bobbin is installed") || !strings.Contains(body, w.Name) {
			t.Fatalf("install of %s = %d\n%s", w.Name, code, body)
		}
	}
	if got := rig.ask(a, "hello acme"); got == "" {
		t.Fatal("no reply in Acme")
	}
	rig.ask(b, "hello globex")

	// Each workspace's calls used its own token: the emulator would have
	// answered channel_not_found, invalid_auth or not_authed otherwise.
	for _, call := range rig.emu.Journal() {
		if !call.OK && call.Method != "oauth.v2.access" {
			t.Errorf("Slack call %s in %q failed: %s", call.Method, call.Team, call.Error)
		}
	}
	// The system prompt names the workspace; the mention of the bot of
	// that workspace is stripped.
	prompts := map[string]bool{}
	for _, req := range rig.llm.Requests() {
		for _, m := range req.Messages {
			switch m.Role {
			case "system":
				for _, w := range []wsTeam{a, b} {
					if strings.Contains(m.Text, "Workspace: "+w.Name+".") {
						prompts[w.Name] = true
					}
				}
			case "user":
				if strings.Contains(m.Text, "<@") {
					t.Errorf("the bot's mention reached the model: %q", m.Text)
				}
			}
		}
	}
	if !prompts[a.Name] || !prompts[b.Name] {
		t.Errorf("system prompts named %v, want both workspaces", prompts)
	}

	// MCP servers mounted per workspace stay apart.
	if got := rig.slash(a, a.Admin, "mcp add loop "+mcpURL+" X-Api-Key: ws-secret-123", 2); !strings.Contains(got, "Registered `loop`") {
		t.Fatalf("mcp add in Acme answered %q", got)
	}
	offered := func(w wsTeam) []string {
		t.Helper()
		n := len(rig.llm.Requests())
		rig.ask(w, "which tools in "+w.Name)
		for _, req := range rig.llm.Requests()[n:] {
			return req.Tools
		}
		return nil
	}
	if tools := offered(a); !slices.Contains(tools, "loop__echo") {
		t.Errorf("tools in Acme = %v, want loop__echo", tools)
	}
	if tools := offered(b); slices.Contains(tools, "loop__echo") {
		t.Errorf("tools in Globex = %v: Acme's server leaked", tools)
	}
	if got := rig.slash(b, b.Admin, "mcp list", 1); strings.Contains(got, "loop") {
		t.Errorf("mcp list in Globex shows Acme's server: %q", got)
	}

	// A tokens_revoked while the workspace's token still works (a token
	// replaced, not the app removed) removes nothing.
	env, _ := rig.emu.DeliverEvent(a.ID, map[string]any{"type": "tokens_revoked",
		"tokens": map[string]any{"oauth": []string{}, "bot": []string{a.BotUser}}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := rig.emu.WaitAck(ctx, env); err != nil {
		t.Fatal(err)
	}
	rig.ask(a, "still installed?")

	logs := rep.logs.String()
	if !strings.Contains(logs, "tokens_revoked, but the workspace's bot token still works") {
		t.Error("a tokens_revoked with a live token was not recognised")
	}
	if n := strings.Count(logs, "ignoring events from a workspace without an installation"); n != 1 {
		t.Errorf("the not-installed workspace was logged %d times, want once", n)
	}
	for _, s := range rig.secrets() {
		if strings.Contains(logs, s) {
			t.Errorf("logs contain a secret (%.12s…)", s)
		}
	}
	if keys := redisHolds(t, rig.secrets()); len(keys) > 0 {
		t.Errorf("Redis keys hold a token in clear: %v", keys)
	}
}

// TestInstallRefusals: the install link's state is single-use and bound
// to the browser that started it; the install asks for exactly the
// manifest's bot scopes; pages escape what they show; Slack refusing the
// app's credentials gives a clear page and an ERROR line.
func TestInstallRefusals(t *testing.T) {
	a := newWSTeam("Acme")
	rig := newInstallRig(t, []slackemu.Team{a.team("")}, slackemu.OAuthOptions{}, nil)
	rig.start("", nil)
	base := "http://" + rig.addr
	rig.emu.SetConsent(slackemu.Consent{Team: a.ID})

	// start returns the browser, its authorize URL, and where Slack sends
	// it back.
	start := func() (*http.Client, *url.URL, string) {
		t.Helper()
		br := browser(false)
		resp, _ := getPage(t, br, base+"/slack/install")
		if resp.StatusCode != http.StatusFound {
			t.Fatalf("/slack/install = %d", resp.StatusCode)
		}
		authz, err := url.Parse(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		var ck *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == "bobbin_slack_install" {
				ck = c
			}
		}
		if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.MaxAge <= 0 || ck.MaxAge > 600 || ck.Path != "/slack/" {
			t.Fatalf("state cookie = %+v", ck)
		}
		if ck.Value != authz.Query().Get("state") || len(ck.Value) < 32 {
			t.Fatalf("cookie %q and state %q differ", ck.Value, authz.Query().Get("state"))
		}
		back, _ := getPage(t, br, authz.String())
		if back.StatusCode != http.StatusFound {
			t.Fatalf("authorize = %d", back.StatusCode)
		}
		return br, authz, back.Header.Get("Location")
	}

	br, authz, back := start()
	// Exactly the manifest's bot scopes.
	raw, err := os.ReadFile("../../manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var man struct {
		OAuth struct{ Scopes struct{ Bot []string } } `yaml:"oauth_config"`
	}
	if err := yaml.Unmarshal(raw, &man); err != nil {
		t.Fatal(err)
	}
	asked := strings.Split(authz.Query().Get("scope"), ",")
	slices.Sort(asked)
	slices.Sort(man.OAuth.Scopes.Bot)
	if !slices.Equal(asked, man.OAuth.Scopes.Bot) {
		t.Errorf("install asks for %v, manifest.yaml lists %v", asked, man.OAuth.Scopes.Bot)
	}
	if authz.Query().Get("client_id") != slackemu.ClientID || authz.Query().Get("redirect_uri") != base+"/slack/oauth_redirect" {
		t.Errorf("authorize query = %v", authz.Query())
	}

	// Without the cookie (another browser): refused, and the state is not
	// spent by the attempt.
	resp, body := getPage(t, browser(false), back)
	if resp.StatusCode != 400 || !strings.Contains(body, "expired") || strings.Contains(body, "installed in") {
		t.Errorf("redirect without the cookie = %d\n%s", resp.StatusCode, body)
	}
	// With it: installed.
	resp, body = getPage(t, br, back)
	if resp.StatusCode != 200 || !strings.Contains(body, "Bobbin is installed") {
		t.Fatalf("redirect = %d\n%s", resp.StatusCode, body)
	}
	// Replayed (even with a cookie put back): refused.
	u, _ := url.Parse(back)
	br.Jar.SetCookies(u, []*http.Cookie{{Name: "bobbin_slack_install", Value: u.Query().Get("state"), Path: "/slack/"}})
	resp, body = getPage(t, br, back)
	if resp.StatusCode != 400 || !strings.Contains(body, "expired") {
		t.Errorf("replayed redirect = %d\n%s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("refusal page headers: %v", resp.Header)
	}
	// What Slack sends back is escaped.
	br2, _, back2 := start()
	u2, _ := url.Parse(back2)
	q := u2.Query()
	q.Del("code")
	q.Set("error", `<script>alert(1)</script>`)
	u2.RawQuery = q.Encode()
	resp, body = getPage(t, br2, u2.String())
	if strings.Contains(body, "<script>") || !strings.Contains(body, "&lt;script&gt;") || !strings.Contains(body, "cancelled") {
		t.Errorf("error page = %d\n%s", resp.StatusCode, body)
	}

	// A wrong client secret: a clear page and log line, the secret nowhere.
	hooli := newWSTeam("Hooli")
	bad := newInstallRig(t, []slackemu.Team{hooli.team("")}, slackemu.OAuthOptions{},
		map[string]string{"SLACK_CLIENT_SECRET": "wrong-secret-CANARY-42"})
	rep := bad.start("", nil)
	code, page := bad.install(hooli.ID)
	if code != http.StatusBadGateway || !strings.Contains(page, "refused this app&#39;s credentials (bad_client_secret)") {
		t.Errorf("install with a bad secret = %d\n%s", code, page)
	}
	logs := rep.logs.String()
	if !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, "bad_client_secret") || !strings.Contains(logs, "SLACK_CLIENT_SECRET") {
		t.Errorf("no ERROR line naming bad_client_secret and SLACK_CLIENT_SECRET:\n%s", logs)
	}
	if strings.Contains(logs, "wrong-secret-CANARY-42") || strings.Contains(page, "wrong-secret-CANARY-42") {
		t.Error("the client secret was shown")
	}
}

// TestInstallRotationTwoReplicas: a pinned SLACK_BOT_TOKEN serves its
// workspace beside an installation with token rotation; when Slack
// refuses the installation's expired token on both replicas, the refresh
// token is spent once and both continue with the new token.
func TestInstallRotationTwoReplicas(t *testing.T) {
	if os.Getenv("REDIS_URL") == "" {
		t.Skip("two replicas need a shared Redis (REDIS_URL)")
	}
	pinned, rot := newWSTeam("Pinned"), newWSTeam("Rotor")
	pinnedToken := "xoxb-" + pinned.ID + "-pinned"
	rig := newInstallRig(t, []slackemu.Team{pinned.team(pinnedToken), rot.team("")},
		slackemu.OAuthOptions{TokenRotation: true, TokenLifetime: time.Hour}, map[string]string{"SLACK_BOT_TOKEN": pinnedToken})
	r1 := rig.start("", nil)
	r2 := rig.start(freeAddr(t), nil)
	rig.wait("both replicas' sockets", func() bool { return rig.emu.LiveConnections() >= 2 })
	if code, body := rig.install(rot.ID); code != 200 {
		t.Fatalf("install = %d\n%s", code, body)
	}
	rig.ask(pinned, "pinned hello")
	// Mentions land on a random replica's socket: ask until both hold the
	// installation (with the token about to be refused).
	served := func(r *installReplica) bool {
		return strings.Contains(r.logs.String(), `"msg":"bot: turn done","team":"`+rot.ID+`"`)
	}
	for i := 0; i < 30 && !(served(r1) && served(r2)); i++ {
		rig.ask(rot, fmt.Sprintf("rotor hello %d", i))
	}
	if !served(r1) || !served(r2) {
		t.Fatal("not both replicas served the workspace")
	}

	refreshes := func() int {
		n := 0
		for _, c := range rig.emu.Journal() {
			if c.Method == "oauth.v2.access" && c.Params["grant_type"] == "refresh_token" {
				n++
			}
		}
		return n
	}
	ins := rig.emu.Installations()
	var old string
	for _, in := range ins {
		if in.TeamID == rot.ID && !in.Pinned {
			old = in.BotToken
		}
	}
	if old == "" || !strings.HasPrefix(old, "xoxe.xoxb-") {
		t.Fatalf("no rotating installation: %+v", ins)
	}
	rig.emu.ExpireToken(old)
	// Mentions land on a random replica's socket: ask until both met the
	// expired token (each tries one refresh).
	refused := func(r *installReplica) bool {
		return strings.Contains(r.logs.String(), "Slack refused the workspace's token; refreshing it once")
	}
	for i := 0; i < 30 && !(refused(r1) && refused(r2)); i++ {
		rig.ask(rot, fmt.Sprintf("after expiry %d", i))
	}
	if !refused(r1) || !refused(r2) {
		t.Fatalf("not both replicas met the expired token (%v, %v)", refused(r1), refused(r2))
	}
	if n := refreshes(); n != 1 {
		t.Errorf("%d refresh grants, want 1", n)
	}
	rig.ask(pinned, "pinned still")
	for _, s := range rig.secrets() {
		for _, r := range []*installReplica{r1, r2} {
			if strings.Contains(r.logs.String(), s) {
				t.Errorf("logs contain a secret (%.12s…)", s)
			}
		}
	}
	if keys := redisHolds(t, rig.secrets()); len(keys) > 0 {
		t.Errorf("Redis keys hold a token in clear: %v", keys)
	}
}

// TestUninstallCleansUpOneWorkspace: uninstalling deletes the
// workspace's installation at once and its sessions, registrations,
// grants and connections after the session grace; the other workspace
// keeps everything and is still answered.
func TestUninstallCleansUpOneWorkspace(t *testing.T) {
	if os.Getenv("REDIS_URL") == "" {
		t.Skip("the clean-up is checked on a real Redis (REDIS_URL)")
	}
	mcpURL, _, _ := loopbackMCP(t, "k-1") // first: closed after the program
	gone, kept := newWSTeam("Gone"), newWSTeam("Kept")
	rig := newInstallRig(t, []slackemu.Team{gone.team(""), kept.team("")}, slackemu.OAuthOptions{},
		map[string]string{"SESSION_TTL": "3s"})
	rep := rig.start("", nil)
	for _, w := range []wsTeam{gone, kept} {
		if code, body := rig.install(w.ID); code != 200 {
			t.Fatalf("install %s = %d\n%s", w.Name, code, body)
		}
		rig.ask(w, "hello "+w.Name)
		if got := rig.slash(w, w.Admin, "mcp add loop "+mcpURL+" X-Api-Key: k-1", 2); !strings.Contains(got, "Registered `loop`") {
			t.Fatalf("mcp add in %s answered %q", w.Name, got)
		}
	}
	if keys := redisKeys(t, gone.ID); len(keys) == 0 {
		t.Fatal("no keys for the workspace before the uninstall")
	}
	if err := rig.emu.Uninstall(gone.ID); err != nil {
		t.Fatal(err)
	}
	store, err := session.Open(context.Background(), session.Options{URL: os.Getenv("REDIS_URL"), SecretKey: rig.key})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// The installation goes at once; the data is set to expire (within
	// the 3 s grace it is still there).
	rig.wait("the workspace retired", func() bool {
		ok, err := store.Retired(context.Background(), gone.ID)
		return ok && err == nil
	})
	if _, err := store.Installation(context.Background(), gone.ID); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("installation after the uninstall: %v", err)
	}
	// After the grace only event identities (kept 24 h, no content) and
	// rate-budget state with their own TTLs remain.
	content := func() map[string]time.Duration {
		left := map[string]time.Duration{}
		for k, ttl := range redisKeys(t, gone.ID) {
			if strings.Contains(k, ":dedupe:") || strings.Contains(k, ":slack:") || strings.Contains(k, ":slots:") || strings.HasPrefix(k, "bobbin:{r:") {
				if ttl == -1 {
					t.Errorf("key %s has no TTL", k)
				}
				continue
			}
			left[k] = ttl
		}
		return left
	}
	rig.wait("the workspace's data expired", func() bool { return len(content()) == 0 })
	if regs, err := store.Registrations(context.Background(), gone.ID); err != nil || len(regs) != 0 {
		t.Errorf("registrations after the clean-up = %v, %v", regs, err)
	}

	// The other workspace keeps its installation and registration (no
	// TTL) and is still answered with its tools.
	if _, err := store.Installation(context.Background(), kept.ID); err != nil {
		t.Errorf("kept installation: %v", err)
	}
	for k, ttl := range redisKeys(t, kept.ID) {
		if (strings.HasSuffix(k, ":mcp") || strings.HasSuffix(k, ":install")) && ttl != -1 {
			t.Errorf("kept key %s got TTL %v", k, ttl)
		}
	}
	n := len(rig.llm.Requests())
	rig.ask(kept, "still here")
	if reqs := rig.llm.Requests(); len(reqs) <= n || !slices.Contains(reqs[n].Tools, "loop__echo") {
		t.Errorf("the kept workspace lost its tools")
	}
	// The uninstalled workspace is ignored now (acked, logged once).
	rig.waitAck(rig.emu.Mention(gone.ID, gone.Channel, gone.User, "hello?", ""))
	logs := rep.logs.String()
	if !strings.Contains(logs, "bot: uninstalled") || !strings.Contains(logs, `"team":"`+gone.ID+`"`) {
		t.Error("no uninstall log line")
	}
	if !strings.Contains(logs, "ignoring events from a workspace without an installation") {
		t.Error("the uninstalled workspace's mention was not ignored")
	}
}

// waitAck waits until the bot acked p's envelope.
func (r *installRig) waitAck(p slackemu.Posted) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := r.emu.WaitAck(ctx, p.Envelope); err != nil {
		r.t.Fatalf("envelope %s not acked: %v", p.Envelope, err)
	}
}

// TestInstallOrgWide: an org-wide install serves every workspace of the
// Enterprise Grid org with one token (learned per workspace from events'
// authorizations); uninstalling the org deletes it and retires the data of
// every workspace it served.
func TestInstallOrgWide(t *testing.T) {
	x, y := newWSTeam("Umbra"), newWSTeam("Penumbra")
	ent := "E" + x.ID[1:]
	tx, ty := x.team(""), y.team("")
	for _, tm := range []*slackemu.Team{&tx, &ty} {
		tm.EnterpriseID, tm.EnterpriseName = ent, "Umbrella Corp"
		tm.BotUserID, tm.BotID = "", "" // the org's bot, made by the install
	}
	rig := newInstallRig(t, []slackemu.Team{tx, ty}, slackemu.OAuthOptions{}, nil)
	rep := rig.start("", nil)
	rig.emu.SetConsent(slackemu.Consent{Team: x.ID, OrgWide: true})
	resp, body := getPage(t, browser(true), "http://"+rig.addr+"/slack/install")
	if resp.StatusCode != 200 || !strings.Contains(body, "organization Umbrella Corp") ||
		!strings.Contains(body, "https://app.slack.com/manage/"+ent+"/integrations/profile/") {
		t.Fatalf("org install = %d\n%s", resp.StatusCode, body)
	}
	rig.ask(x, "hello umbra")
	rig.ask(y, "hello penumbra")
	for _, call := range rig.emu.Journal() {
		if !call.OK {
			t.Errorf("Slack call %s in %q failed: %s", call.Method, call.Team, call.Error)
		}
	}
	store, err := session.Open(context.Background(), session.Options{URL: os.Getenv("REDIS_URL"), SecretKey: rig.key})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if in, err := store.Installation(context.Background(), ent); err != nil || !in.OrgWide || in.TeamID != "" {
		t.Fatalf("org installation = %v, %v", in, err)
	}
	if os.Getenv("REDIS_URL") == "" {
		return // the embedded Redis is the program's own: the rest reads it
	}
	if err := rig.emu.Uninstall(ent); err != nil {
		t.Fatal(err)
	}
	rig.wait("both workspaces retired", func() bool {
		a, _ := store.Retired(context.Background(), x.ID)
		b, _ := store.Retired(context.Background(), y.ID)
		return a && b
	})
	if _, err := store.Installation(context.Background(), ent); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("org installation after the uninstall: %v", err)
	}
	if !strings.Contains(rep.logs.String(), `"installation":"`+ent+`"`) {
		t.Error("no uninstall line naming the org installation")
	}
}
