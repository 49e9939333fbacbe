package admin

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/internal/jobs"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

type fakePeople map[string]Standing

func (p fakePeople) Standing(_ context.Context, _, user, _ string) Standing { return p[user] }
func (p fakePeople) CheckGroup(context.Context, string, string) error       { return nil }

type fakeStore struct{ Store }

func (fakeStore) RecentAudit(context.Context, string, int) ([]session.AuditEntry, error) {
	return []session.AuditEntry{{Time: time.Unix(0, 0), Fields: map[string]string{"event": "mcp_add", "by": "U1"}}}, nil
}

// TestSlashRights: the answers Slash gives at once, by who asks; refused
// admin commands are audited.
func TestSlashRights(t *testing.T) {
	var audited []map[string]string
	r := jobs.New(slog.New(slog.DiscardHandler), time.Second)
	defer r.Close()
	a := New(Options{API: &slackapi.Client{}, Store: fakeStore{}, Jobs: r,
		People: fakePeople{
			"UADMIN": {Admin: true, MayUse: true},
			"UMEM":   {MayUse: true},
			"UGUEST": {MayUse: true, Why: "guest"},
			"UBOT":   {Why: "bot"},
			"ULOST":  {Unchecked: true, Why: "lookup failed"},
		},
		Audit: func(_ context.Context, _ string, f map[string]string) { audited = append(audited, f) }})
	text := func(ack any) string {
		if ack == nil {
			return ""
		}
		return ack.(map[string]any)["text"].(string)
	}
	slash := func(user, cmd string) string {
		return text(a.Slash(context.Background(), slack.SlashCommand{TeamID: "T1", UserID: user, ChannelID: "C1", Text: cmd}))
	}
	for _, tc := range []struct{ user, cmd, want string }{
		{"UMEM", "", "*Bobbin commands*"},
		{"UMEM", "frobnicate", "I don't know the command"},
		{"UBOT", "mcp list", "not available to you (bot)"},
		{"ULOST", "mcp list", "couldn't check your account"},
		{"UGUEST", "mcp list", "MCP servers are not enabled"},
		{"UMEM", "audit", "Only workspace admins can use `/bobbin audit`"},
		{"ULOST", "audit", "couldn't check your account"},
		{"UADMIN", "audit", "`mcp_add` by <@U1>"},
		{"UADMIN", "mcp remove x", "MCP servers are not enabled"},
	} {
		if got := slash(tc.user, tc.cmd); !strings.Contains(got, tc.want) {
			t.Errorf("%s %q = %q, want %q in it", tc.user, tc.cmd, got, tc.want)
		}
	}
	if len(audited) != 2 || audited[0]["event"] != auditAdminRefused || audited[0]["outcome"] != opAudit {
		t.Errorf("audited %v", audited)
	}
}
