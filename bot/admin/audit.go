package admin

import (
	"fmt"
	"strings"

	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/session"
)

// Audit events of administration (the root writes them with the others).
const (
	auditMCPAdd       = "mcp_add"
	auditMCPRemove    = "mcp_remove"
	auditMCPApprove   = "mcp_approve"
	auditAdminRefused = "admin_refused"
)

// auditLimit is how many entries /bobbin audit shows.
const auditLimit = 25

// formatAudit renders audit entries, newest first, for an admin.
func formatAudit(entries []session.AuditEntry) string {
	if len(entries) == 0 {
		return "The audit log of this workspace is empty."
	}
	var s strings.Builder
	fmt.Fprintf(&s, "*Latest %d audit entries* (newest first)\n", len(entries))
	for _, e := range entries {
		f := e.Fields
		s.WriteString("• ")
		s.WriteString(e.Time.UTC().Format("2006-01-02 15:04:05Z"))
		s.WriteString(" `" + mrkdwn.EscapeText(f["event"]) + "`")
		for _, k := range []string{"user", "by", "server", "tool", "outcome", "policy", "decision", "duration_ms", "channel", "thread", "url", "args_digest"} {
			v := f[k]
			if v == "" {
				continue
			}
			switch k {
			case "user", "by":
				fmt.Fprintf(&s, " %s <@%s>", k, mrkdwn.EscapeText(v))
			default:
				fmt.Fprintf(&s, " %s=%s", k, mrkdwn.EscapeText(mrkdwn.Clip(v, 120)))
			}
		}
		s.WriteByte('\n')
	}
	return s.String()
}
