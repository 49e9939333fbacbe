package faulttest

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestSoak with -soak-workspaces N > 1 spreads its channels over N
// emulated workspaces installed through the program's own OAuth v2 flow
// (/slack/install → Slack's authorize page → /slack/oauth_redirect), as a
// multi-workspace deployment runs: each workspace has its own Slack
// budgets (the emulator's buckets are per method and workspace, as
// Slack's are).

// soakPlace is the workspace of a soak channel and the person who
// mentions the bot there and clicks "Allow once" (only the asker or an
// admin may).
type soakPlace struct{ team, user string }

// soakTeams returns n workspaces, not installed (no bot token), with one
// member each, and the place of each channel: channel i lies in workspace
// i mod n.
func soakTeams(n, channels int) ([]slackemu.Team, []soakPlace) {
	teams := make([]slackemu.Team, n)
	for i := range teams {
		id := fmt.Sprintf("%02d", i)
		teams[i] = slackemu.Team{
			ID: "TS" + id, Name: "Soak " + id, Domain: "soak" + id,
			BotUserID: "UBS" + id, BotID: "BS" + id, BotName: "bobbin",
			Users: []slackemu.User{{ID: "UAS" + id, Name: "alice", RealName: "Alice " + id, DisplayName: "alice"}},
		}
	}
	places := make([]soakPlace, channels)
	for i := range places {
		tm := teams[i%n]
		places[i] = soakPlace{team: tm.ID, user: tm.Users[0].ID}
	}
	return teams, places
}

// installOpts returns the emulator's OAuth settings and the environment
// of a multi-workspace deployment (no SLACK_BOT_TOKEN) whose PUBLIC_URL
// is the replica at addr; SLACK_OAUTH_AUTHORIZE_URL is added once the
// emulator runs (TestSoak).
func installOpts(addr string) (slackemu.OAuthOptions, map[string]string) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return slackemu.OAuthOptions{RedirectURLs: []string{"http://" + addr + "/slack/oauth_redirect"}},
		map[string]string{
			"SLACK_BOT_TOKEN":     "", // unset: tokens come from installs
			"SLACK_CLIENT_ID":     slackemu.ClientID,
			"SLACK_CLIENT_SECRET": slackemu.ClientSecret,
			"PUBLIC_URL":          "http://" + addr,
			"SECRET_KEY":          base64.StdEncoding.EncodeToString(key),
		}
}

// installAll installs the app in each workspace through the program at
// base (PUBLIC_URL), as a person does in a browser: a fresh cookie jar
// per install (the state cookie binds the flow to it), redirects
// followed, the result page checked; then checks the emulator holds a
// live installation of each.
func installAll(t *testing.T, emu *slackemu.Server, base string, teams []slackemu.Team) {
	t.Helper()
	for _, tm := range teams {
		emu.SetConsent(slackemu.Consent{Team: tm.ID})
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Jar: jar, Timeout: 20 * time.Second}
		resp, err := browser.Get(base + "/slack/install")
		if err != nil {
			t.Fatalf("install of %s: %v", tm.ID, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Bobbin is installed") {
			t.Fatalf("install of %s = %d\n%s", tm.ID, resp.StatusCode, body)
		}
	}
	installed := map[string]bool{}
	for _, in := range emu.Installations() {
		if in.BotToken != "" && !in.Uninstalled {
			installed[in.TeamID] = true
		}
	}
	for _, tm := range teams {
		if !installed[tm.ID] {
			t.Fatalf("no installation of %s in the emulator: %+v", tm.ID, emu.Installations())
		}
	}
}

// limitedByTeam counts the emulator's 429 answers per workspace and
// method (from its journal; "" is a call whose token named none).
func limitedByTeam(emu *slackemu.Server) map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, c := range emu.Journal() {
		if c.Status != http.StatusTooManyRequests {
			continue
		}
		if out[c.Team] == nil {
			out[c.Team] = map[string]int{}
		}
		out[c.Team][c.Method]++
	}
	return out
}
