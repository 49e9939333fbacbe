package admin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/session"
)

func TestAdminFormatting(t *testing.T) {
	if got := publicURL("https://h/mcp?token=abc#x"); strings.Contains(got, "abc") {
		t.Errorf("publicURL kept the query: %q", got)
	}
	tools := []servers.ToolInfo{
		{Name: "rm`rf", Exposed: "srv__rm_rf", Description: "Deletes <!channel> & more\nlines", Hints: agent.Hints{Destructive: true},
			Disabled: true, DisabledReason: "definition changed", Flags: []string{"instructions"}, InputSchema: json.RawMessage(`{"type":"object","description":"<@U1>"}`)},
	}
	got := formatTools(tools, 300, true)
	for _, want := range []string{"`rm'rf`", "srv__rm_rf", "destructive", "unverified server", "&lt;!channel&gt; &amp; more lines", "disabled (definition changed)", "flagged: instructions", "&lt;@U1&gt;"} {
		if !strings.Contains(got, want) {
			t.Errorf("formatTools lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "<!channel>") || strings.Contains(got, "<@U1>") {
		t.Errorf("formatTools left a live mention:\n%s", got)
	}
	if got := scrubSecrets("401 from server: bad key sk-12345", map[string]string{"X-Key": "sk-12345"}); strings.Contains(got, "sk-12345") {
		t.Errorf("scrubSecrets = %q", got)
	}
	audit := formatAudit([]session.AuditEntry{{Fields: map[string]string{"event": "tool_call", "user": "U1", "tool": "<!here>"}}})
	if !strings.Contains(audit, "<@U1>") || strings.Contains(audit, "<!here>") {
		t.Errorf("formatAudit = %q", audit)
	}
}
