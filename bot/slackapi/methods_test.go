package slackapi

import (
	"slices"
	"testing"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

func TestImports(t *testing.T) {
	m := importcheck.Module
	// The platform layer knows nothing of the app or its features; of this
	// module it uses session's budget types, the mrkdwn leaf and the pause
	// helper only.
	importcheck.Forbid(t, ".", m+"/agent", m+"/mcp", m+"/provider", m+"/cmd", m+"/internal", importcheck.MCPSDK)
	importcheck.ForbidExcept(t, ".", m+"/bot", m+"/bot/mrkdwn", m+"/bot/internal/pause")
}

// TestMethodTable: every method constant has its row (slack-go methods,
// scopes) in webMethods, and every row a constant.
func TestMethodTable(t *testing.T) {
	for _, m := range methods {
		if !slices.ContainsFunc(webMethods, func(w WebMethod) bool { return w.Name == m }) {
			t.Errorf("method constant %q has no row in webMethods (scopes.go)", m)
		}
	}
	for _, w := range webMethods {
		if !slices.Contains(methods, w.Name) {
			t.Errorf("webMethods row %q has no constant in methods.go", w.Name)
		}
	}
}
