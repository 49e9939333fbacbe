package anthropic

import (
	"testing"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

func TestImports(t *testing.T) {
	m := importcheck.Module
	importcheck.Forbid(t, ".", m+"/agent", m+"/bot", m+"/session", m+"/mcp", m+"/cmd",
		importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}
