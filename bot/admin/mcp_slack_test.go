package admin

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/bot/internal/jobs"
	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// slackPresetMCP is an MCP with the Slack preset; only what the refusals
// reach is implemented.
type slackPresetMCP struct {
	MCP
	url        string
	missing    []string
	registered []servers.Registration
}

func (m *slackPresetMCP) SlackMCP() (string, []string) { return m.url, m.missing }
func (m *slackPresetMCP) ValidateURL(string) error     { return nil }
func (m *slackPresetMCP) Register(_ context.Context, _ string, r servers.Registration) error {
	m.registered = append(m.registered, r)
	return nil
}

// TestAddSlackNeedsTheAppsClient: without the app's client id and secret,
// /bobbin mcp add slack says which settings are missing and registers
// nothing; without the preset it says it is not available.
func TestAddSlackNeedsTheAppsClient(t *testing.T) {
	r := jobs.New(slog.New(slog.DiscardHandler), time.Second)
	defer r.Close()
	for _, tc := range []struct {
		mcp  MCP
		want string
	}{
		{&slackPresetMCP{url: "https://mcp.slack.com/mcp", missing: []string{"SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET"}},
			"has not set SLACK_CLIENT_ID and SLACK_CLIENT_SECRET. Nothing was saved."},
		{&slackPresetMCP{url: "https://mcp.slack.com/mcp", missing: []string{"SLACK_CLIENT_SECRET"}}, "has not set SLACK_CLIENT_SECRET."},
		{struct{ MCP }{}, "not available as a preset"},
	} {
		a := New(Options{API: &slackapi.Client{}, Store: fakeStore{}, Jobs: r, MCP: tc.mcp,
			People: fakePeople{"UADMIN": {Admin: true, MayUse: true}}})
		for _, text := range []string{"mcp add slack", "mcp add slack https://mcp.slack.example/mcp"} {
			ack := a.Slash(context.Background(), slack.SlashCommand{TeamID: "T1", UserID: "UADMIN", ChannelID: "C1", Text: text})
			got, _ := ack.(map[string]any)["text"].(string)
			if !strings.Contains(got, tc.want) {
				t.Errorf("%q = %q, want %q in it", text, got, tc.want)
			}
		}
		if m, ok := tc.mcp.(*slackPresetMCP); ok && len(m.registered) > 0 {
			t.Errorf("registered %+v", m.registered)
		}
	}
}
