package slackemu_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

const redirectURL = "http://127.0.0.1:9/slack/oauth_redirect"

// authorize runs the browser step and returns the redirect it ends in.
func authorize(t *testing.T, emu *slackemu.Server, params url.Values) *url.URL {
	t.Helper()
	resp, body := get(t, noRedirects, emu.AuthorizeURL()+"?"+params.Encode(), "")
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize %v: HTTP %d %s", params, resp.StatusCode, body)
	}
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func installParams(team string) url.Values {
	v := url.Values{"client_id": {slackemu.ClientID}, "scope": {"chat:write,channels:history,files:read"}, "redirect_uri": {redirectURL}, "state": {"st-1"}}
	if team != "" {
		v.Set("team", team)
	}
	return v
}

func access(code, redirect string, opts ...slack.OAuthOption) (*slack.OAuthV2Response, error) {
	return slack.GetOAuthV2ResponseContext(context.Background(), http.DefaultClient, slackemu.ClientID, slackemu.ClientSecret, code, redirect, opts...)
}

func TestOAuthInstallPerTeamTokens(t *testing.T) {
	emu := newEmu(t, slackemu.Options{OAuth: slackemu.OAuthOptions{RedirectURLs: []string{redirectURL}}})
	apiURL := slack.OAuthOptionAPIURL(emu.APIURL())

	back := authorize(t, emu, installParams(slackemu.TeamID2))
	if back.Host != "127.0.0.1:9" || back.Path != "/slack/oauth_redirect" || back.Query().Get("state") != "st-1" || back.Query().Get("code") == "" {
		t.Fatalf("redirect back = %s", back)
	}
	code := back.Query().Get("code")
	resp, err := access(code, redirectURL, apiURL)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Team.ID != slackemu.TeamID2 || resp.TokenType != "bot" || !strings.HasPrefix(resp.AccessToken, "xoxb-") || resp.BotUserID != "U0BOT2" ||
		resp.Scope != "chat:write,channels:history,files:read" || resp.AppID != slackemu.AppID || resp.IsEnterpriseInstall || resp.AuthedUser.ID != slackemu.UserT2 || resp.ExpiresIn != 0 {
		t.Errorf("oauth.v2.access = %+v", resp)
	}
	if _, err := access(code, redirectURL, apiURL); errString(err) != "invalid_code" {
		t.Errorf("code used twice: %v, want invalid_code", err)
	}

	// The new token is T222's: its own identity, refused on T111's channels.
	api := slack.New(resp.AccessToken, slack.OptionAPIURL(emu.APIURL()))
	at, err := api.AuthTest()
	if err != nil || at.TeamID != slackemu.TeamID2 || at.UserID != "U0BOT2" || at.BotID != "B0BOT2" {
		t.Errorf("AuthTest = %+v, %v", at, err)
	}
	if _, _, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("x", false)); errString(err) != "channel_not_found" {
		t.Errorf("T222 token on a T111 channel: %v", err)
	}
	if _, _, err := api.PostMessage(slackemu.ChannelT2, slack.MsgOptionText("hello", false)); err != nil {
		t.Errorf("T222 token on its channel: %v", err)
	}
	// Scopes are enforced for OAuth tokens.
	if _, err := api.GetUserInfo(slackemu.UserT2); errString(err) != "missing_scope" {
		t.Errorf("users.info without users:read: %v", err)
	}
	// team.info with and without the team argument, per team.
	if ti, err := botClient(emu).GetTeamInfo(); err != nil || ti.ID != slackemu.TeamID {
		t.Errorf("T111 team.info = %+v, %v", ti, err)
	}
	if _, err := botClient(emu).GetOtherTeamInfo(slackemu.TeamID2); errString(err) != "team_not_found" {
		t.Errorf("team.info for an unrelated workspace: %v", err)
	}
	if ti, err := slack.New(slackemu.BotToken2, slack.OptionAPIURL(emu.APIURL())).GetOtherTeamInfo(slackemu.TeamID2); err != nil || ti.Name != "Globex" {
		t.Errorf("T222 team.info = %+v, %v", ti, err)
	}
	ins := emu.Installations()
	if i := slices.IndexFunc(ins, func(in slackemu.Installation) bool { return !in.Pinned }); i < 0 || ins[i].TeamID != slackemu.TeamID2 || ins[i].BotToken != resp.AccessToken {
		t.Errorf("Installations = %+v", ins)
	}
	// Reinstalling adds scopes and keeps the (non-rotating) token.
	p := installParams(slackemu.TeamID2)
	p.Set("scope", "users:read")
	again, err := access(authorize(t, emu, p).Query().Get("code"), redirectURL, apiURL)
	if err != nil || again.AccessToken != resp.AccessToken || again.Scope != "chat:write,channels:history,files:read,users:read" {
		t.Errorf("reinstall = %+v, %v", again, err)
	}
	if _, err := api.GetUserInfo(slackemu.UserT2); err != nil {
		t.Errorf("users.info after adding users:read: %v", err)
	}
}

func TestOAuthErrors(t *testing.T) {
	emu := newEmu(t, slackemu.Options{OAuth: slackemu.OAuthOptions{RedirectURLs: []string{redirectURL, "https://bot.example.com/slack"}}})
	apiURL := slack.OAuthOptionAPIURL(emu.APIURL())

	for _, tc := range []struct {
		name  string
		edit  func(url.Values)
		want  string
		redir bool
	}{
		{"unknown client", func(v url.Values) { v.Set("client_id", "9.9") }, "invalid_client_id", false},
		{"unconfigured redirect", func(v url.Values) { v.Set("redirect_uri", "https://evil.example.com/cb") }, "bad_redirect_uri", false},
		{"fragment", func(v url.Values) { v.Set("redirect_uri", "https://bot.example.com/slack#x") }, "bad_redirect_uri", false},
		{"no scope", func(v url.Values) { v.Del("scope") }, "invalid_scope", false},
		{"bad scope", func(v url.Values) { v.Set("scope", "chat:write,<script>") }, "invalid_scope", false},
	} {
		v := installParams("")
		tc.edit(v)
		resp, body := get(t, noRedirects, emu.AuthorizeURL()+"?"+v.Encode(), "")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.want) || strings.Contains(string(body), "<script>") {
			t.Errorf("%s: HTTP %d %s", tc.name, resp.StatusCode, body)
		}
	}
	// A subdirectory of a configured URL is fine.
	v := installParams("")
	v.Set("redirect_uri", "https://bot.example.com/slack/oauth_redirect")
	if back := authorize(t, emu, v); back.Host != "bot.example.com" {
		t.Errorf("subdirectory redirect = %s", back)
	}
	// Denial comes back with error and state.
	emu.SetConsent(slackemu.Consent{Deny: true})
	if back := authorize(t, emu, installParams("")); back.Query().Get("error") != "access_denied" || back.Query().Get("state") != "st-1" || back.Query().Has("code") {
		t.Errorf("denied = %s", back)
	}
	emu.SetConsent(slackemu.Consent{})

	code := authorize(t, emu, installParams("")).Query().Get("code")
	if _, err := access(code, "https://bot.example.com/slack", apiURL); errString(err) != "bad_redirect_uri" {
		t.Errorf("other redirect_uri: %v", err)
	}
	if _, err := slack.GetOAuthV2Response(http.DefaultClient, "9.9", slackemu.ClientSecret, code, redirectURL, apiURL); errString(err) != "invalid_client_id" {
		t.Errorf("unknown client: %v", err)
	}
	if _, err := slack.GetOAuthV2Response(http.DefaultClient, slackemu.ClientID, "wrong", code, redirectURL, apiURL); errString(err) != "bad_client_secret" {
		t.Errorf("bad secret: %v", err)
	}
	if _, err := slack.GetOAuthV2Response(http.DefaultClient, slackemu.ClientID, "", code, redirectURL, apiURL); errString(err) != "bad_client_secret" {
		t.Errorf("no secret without PKCE: %v", err)
	}
	if _, err := access("nope", redirectURL, apiURL); errString(err) != "invalid_code" {
		t.Errorf("unknown code: %v", err)
	}
	post := func(form url.Values, basic bool) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, emu.APIURL()+"oauth.v2.access", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if basic {
			req.SetBasicAuth(slackemu.ClientID, slackemu.ClientSecret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	if out := post(url.Values{"grant_type": {"password"}}, true); out["error"] != "invalid_grant_type" {
		t.Errorf("grant_type=password: %v", out)
	}
	// HTTP Basic client authentication, as Slack recommends.
	if out := post(url.Values{"code": {code}, "redirect_uri": {redirectURL}}, true); out["ok"] != true || out["access_token"] == "" {
		t.Errorf("Basic auth exchange: %v", out)
	}
	// The journal keeps no secrets.
	for _, c := range emu.Calls("oauth.v2.access") {
		if s, ok := c.Params["client_secret"]; ok && s != "[redacted]" {
			t.Errorf("journal keeps the client secret: %v", c.Params)
		}
	}
}

func TestOAuthPKCEAndUserToken(t *testing.T) {
	emu := newEmu(t, slackemu.Options{OAuth: slackemu.OAuthOptions{RedirectURLs: []string{redirectURL}}})
	apiURL := slack.OAuthOptionAPIURL(emu.APIURL())
	verifier, err := slack.GenerateCodeVerifier()
	if err != nil {
		t.Fatal(err)
	}
	v := installParams("")
	v.Set("user_scope", "search:read")
	v.Set("code_challenge", slack.GenerateCodeChallenge(verifier))
	v.Set("code_challenge_method", "S256")
	code := authorize(t, emu, v).Query().Get("code")
	if _, err := slack.GetOAuthV2Response(http.DefaultClient, slackemu.ClientID, "", code, redirectURL, apiURL, slack.OAuthOptionCodeVerifier("wrong")); errString(err) != "invalid_code_verifier" {
		t.Errorf("wrong verifier: %v", err)
	}
	resp, err := slack.GetOAuthV2Response(http.DefaultClient, slackemu.ClientID, "", code, redirectURL, apiURL, slack.OAuthOptionCodeVerifier(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if resp.AuthedUser.ID != slackemu.UserAdmin || !strings.HasPrefix(resp.AuthedUser.AccessToken, "xoxp-") || resp.AuthedUser.TokenType != "user" || resp.AuthedUser.Scope != "search:read" {
		t.Errorf("authed_user = %+v", resp.AuthedUser)
	}
	user := slack.New(resp.AuthedUser.AccessToken, slack.OptionAPIURL(emu.APIURL()))
	if at, err := user.AuthTest(); err != nil || at.UserID != slackemu.UserAdmin || at.BotID != "" {
		t.Errorf("user AuthTest = %+v, %v", at, err)
	}
	if _, _, err := user.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("x", false)); errString(err) != "not_allowed_token_type" {
		t.Errorf("user token posting: %v", err)
	}
}

func TestTokenRotation(t *testing.T) {
	emu := newEmu(t, slackemu.Options{OAuth: slackemu.OAuthOptions{
		RedirectURLs: []string{redirectURL}, TokenRotation: true, TokenLifetime: time.Hour, RefreshGrace: 300 * time.Millisecond,
	}})
	apiURL := slack.OAuthOptionAPIURL(emu.APIURL())
	first, err := access(authorize(t, emu, installParams("")).Query().Get("code"), redirectURL, apiURL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.AccessToken, "xoxe.xoxb-1-") || !strings.HasPrefix(first.RefreshToken, "xoxe-1-") || first.ExpiresIn != 3600 {
		t.Fatalf("rotation install = %+v", first)
	}
	refresh := func(rt string) (*slack.OAuthV2Response, error) {
		return slack.RefreshOAuthV2Token(http.DefaultClient, slackemu.ClientID, slackemu.ClientSecret, rt, apiURL)
	}
	second, err := refresh(first.RefreshToken)
	if err != nil || second.AccessToken == first.AccessToken || second.RefreshToken == first.RefreshToken || second.ExpiresIn != 3600 || second.Team.ID != slackemu.TeamID {
		t.Fatalf("refresh = %+v, %v", second, err)
	}
	// Within the grace the old refresh token still works (two replicas
	// racing) and converges on the same next refresh token.
	raced, err := refresh(first.RefreshToken)
	if err != nil || raced.RefreshToken != second.RefreshToken {
		t.Fatalf("refresh within grace = %+v, %v", raced, err)
	}
	// At most two live access tokens: the first is gone now.
	for tok, want := range map[string]string{first.AccessToken: "token_revoked", second.AccessToken: "", raced.AccessToken: ""} {
		_, err := slack.New(tok, slack.OptionAPIURL(emu.APIURL())).AuthTest()
		if errString(err) != want {
			t.Errorf("AuthTest(%s…): %v, want %q", tok[:14], err, want)
		}
	}
	// After the grace the used refresh token is dead.
	eventually(t, "refresh grace to pass", func() bool {
		_, err := refresh(first.RefreshToken)
		return errString(err) == "invalid_refresh_token"
	})
	third, err := refresh(second.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	// An expired access token fails on every method.
	emu.ExpireToken(third.AccessToken)
	api := slack.New(third.AccessToken, slack.OptionAPIURL(emu.APIURL()))
	if _, err := api.AuthTest(); errString(err) != "token_expired" {
		t.Errorf("expired AuthTest: %v", err)
	}
	if _, _, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("x", false)); errString(err) != "token_expired" {
		t.Errorf("expired PostMessage: %v", err)
	}
	if exp, ok := emu.TokenExpiry(third.RefreshToken); ok || !exp.IsZero() {
		t.Errorf("TokenExpiry(refresh token) = %v, %v", exp, ok)
	}
	if exp, ok := emu.TokenExpiry(raced.AccessToken); !ok || exp.IsZero() {
		t.Errorf("TokenExpiry = %v, %v", exp, ok)
	}
}

func TestTokensExpireOnTheirOwn(t *testing.T) {
	emu := newEmu(t, slackemu.Options{OAuth: slackemu.OAuthOptions{TokenRotation: true, TokenLifetime: 200 * time.Millisecond}})
	in, err := emu.Install(slackemu.InstallRequest{Team: slackemu.TeamID2, Scopes: []string{"chat:write"}})
	if err != nil {
		t.Fatal(err)
	}
	api := slack.New(in.BotToken, slack.OptionAPIURL(emu.APIURL()))
	eventually(t, "the token to expire", func() bool {
		_, err := api.AuthTest()
		return errString(err) == "token_expired"
	})
	next, err := slack.RefreshOAuthV2Token(http.DefaultClient, slackemu.ClientID, slackemu.ClientSecret, in.RefreshToken, slack.OAuthOptionAPIURL(emu.APIURL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := slack.New(next.AccessToken, slack.OptionAPIURL(emu.APIURL())).AuthTest(); err != nil {
		t.Errorf("refreshed token: %v", err)
	}
}

func TestOrgWideInstall(t *testing.T) {
	teams := slackemu.DefaultTeams()
	for i := range teams {
		teams[i].EnterpriseID, teams[i].EnterpriseName = "E111", "Acme Corp"
	}
	emu := newEmu(t, slackemu.Options{Teams: teams, OAuth: slackemu.OAuthOptions{RedirectURLs: []string{redirectURL}}})
	emu.SetConsent(slackemu.Consent{Team: slackemu.TeamID, OrgWide: true})
	v := installParams("")
	v.Set("scope", "chat:write,usergroups:read")
	resp, err := access(authorize(t, emu, v).Query().Get("code"), redirectURL, slack.OAuthOptionAPIURL(emu.APIURL()))
	if err != nil {
		t.Fatal(err)
	}
	if !resp.IsEnterpriseInstall || resp.Team.ID != "" || resp.Enterprise.ID != "E111" || resp.Enterprise.Name != "Acme Corp" || !strings.HasPrefix(resp.BotUserID, "W") {
		t.Fatalf("org install = %+v", resp)
	}
	org := slack.New(resp.AccessToken, slack.OptionAPIURL(emu.APIURL()))
	for _, ch := range []string{slackemu.ChannelGen, slackemu.ChannelT2} {
		if _, _, err := org.PostMessage(ch, slack.MsgOptionText("hi", false)); err != nil {
			t.Errorf("org token in %s: %v", ch, err)
		}
	}
	g := emu.AddUsergroup(slackemu.Usergroup{Team: slackemu.TeamID2, Handle: "oncall", Users: []string{slackemu.UserT2}})
	if _, err := org.GetUserGroupMembers(g); errString(err) != "missing_argument" {
		t.Errorf("org token without team_id: %v", err)
	}
	if users, err := org.GetUserGroupMembers(g, slack.GetUserGroupMembersOptionTeamID(slackemu.TeamID2)); err != nil || !slices.Equal(users, []string{slackemu.UserT2}) {
		t.Errorf("org token with team_id: %v, %v", users, err)
	}

	ws := dialRaw(t, emu)
	readFrame(t, ws) // hello
	p := emu.Mention(slackemu.TeamID2, slackemu.ChannelT2, slackemu.UserT2, "hi", "")
	payload := readFrame(t, ws)["payload"].(map[string]any)
	auths := payload["authorizations"].([]any)
	a := auths[0].(map[string]any)
	if len(auths) != 1 || a["is_enterprise_install"] != true || a["enterprise_id"] != "E111" || a["team_id"] != nil || a["user_id"] != resp.BotUserID || payload["enterprise_id"] != "E111" {
		t.Errorf("org event payload: %v", payload)
	}
	if !strings.Contains(payload["event"].(map[string]any)["text"].(string), "<@"+resp.BotUserID+">") {
		t.Errorf("mention text does not name the org bot: %v", payload["event"])
	}
	_ = p
}

func TestEventAuthorizationsAndSharedChannels(t *testing.T) {
	teams := slackemu.DefaultTeams()
	teams[0].Channels = append(teams[0].Channels, slackemu.Channel{ID: "CSHARED", Name: "acme-globex", BotMember: true, SharedTeams: []string{slackemu.TeamID2}})
	emu := newEmu(t, slackemu.Options{Teams: teams})
	ws := dialRaw(t, emu)
	readFrame(t, ws)
	emu.Message(slackemu.TeamID, "CSHARED", slackemu.UserAlice, "hello both", "")
	payload := readFrame(t, ws)["payload"].(map[string]any)
	if payload["is_ext_shared_channel"] != true || payload["context_team_id"] != slackemu.TeamID {
		t.Errorf("shared channel payload: %v", payload)
	}
	api := slack.New(slackemu.BotToken, slack.OptionAppLevelToken(slackemu.AppToken), slack.OptionAPIURL(emu.APIURL()))
	auths, err := api.ListEventAuthorizations(payload["event_context"].(string))
	if err != nil {
		t.Fatal(err)
	}
	var teamsSeen []string
	for _, a := range auths {
		teamsSeen = append(teamsSeen, a.TeamID)
	}
	slices.Sort(teamsSeen)
	if !slices.Equal(teamsSeen, []string{slackemu.TeamID, slackemu.TeamID2}) {
		t.Errorf("apps.event.authorizations.list teams = %v", teamsSeen)
	}
	if _, err := api.ListEventAuthorizations("4-garbage"); errString(err) != "invalid_event_context" {
		t.Errorf("bad event_context: %v", err)
	}
	// Both workspaces' tokens may use the shared channel; users of the
	// other side are visible through it.
	t2 := slack.New(slackemu.BotToken2, slack.OptionAPIURL(emu.APIURL()))
	if _, _, err := t2.PostMessage("CSHARED", slack.MsgOptionText("from globex", false)); err != nil {
		t.Errorf("T222 in the shared channel: %v", err)
	}
	if u, err := t2.GetUserInfo(slackemu.UserAlice); err != nil || u.TeamID != slackemu.TeamID {
		t.Errorf("T222 sees alice through the shared channel: %+v, %v", u, err)
	}
}

func TestUninstall(t *testing.T) {
	emu := newEmu(t, fastOpts())
	in, err := emu.Install(slackemu.InstallRequest{Team: slackemu.TeamID2, Scopes: []string{"chat:write"}, UserScopes: []string{"search:read"}})
	if err != nil {
		t.Fatal(err)
	}
	c := startSocket(t, emu, true)
	c.next(t, socketmode.EventTypeHello)
	if err := emu.Uninstall(slackemu.TeamID2); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for range 2 {
		api := c.next(t, socketmode.EventTypeEventsAPI).Data.(slackevents.EventsAPIEvent)
		if api.TeamID != slackemu.TeamID2 {
			t.Errorf("uninstall event for team %s", api.TeamID)
		}
		switch ev := api.InnerEvent.Data.(type) {
		case *slackevents.TokensRevokedEvent:
			got["tokens_revoked"] = true
			if !slices.Contains(ev.Tokens.Bot, "U0BOT2") || !slices.Equal(ev.Tokens.Oauth, []string{slackemu.UserT2}) {
				t.Errorf("tokens_revoked = %+v", ev.Tokens)
			}
		case *slackevents.AppUninstalledEvent:
			got["app_uninstalled"] = true
		default:
			t.Errorf("event %T", ev)
		}
	}
	if !got["tokens_revoked"] || !got["app_uninstalled"] {
		t.Errorf("events %v", got)
	}
	for _, tok := range []string{in.BotToken, slackemu.BotToken2, in.UserToken} {
		if _, err := slack.New(tok, slack.OptionAPIURL(emu.APIURL())).AuthTest(); errString(err) != "token_revoked" {
			t.Errorf("token after uninstall: %v", err)
		}
	}
	// The other workspace is untouched; apps.uninstall removes it too.
	api := botClient(emu)
	if _, err := api.AuthTest(); err != nil {
		t.Errorf("T111 after T222's uninstall: %v", err)
	}
	if err := api.UninstallApp(slackemu.ClientID, "wrong"); errString(err) != "bad_client_secret" {
		t.Errorf("apps.uninstall with a bad secret: %v", err)
	}
	if err := api.UninstallApp(slackemu.ClientID, slackemu.ClientSecret); err != nil {
		t.Fatal(err)
	}
	if _, err := api.AuthTest(); errString(err) != "token_revoked" {
		t.Errorf("after apps.uninstall: %v", err)
	}
	if err := emu.Uninstall(slackemu.TeamID2); err == nil {
		t.Error("uninstalling twice: no error")
	}
	var se slack.SlackErrorResponse
	_, err = api.AuthTest()
	if !errors.As(err, &se) {
		t.Errorf("error type %T", err)
	}
}
