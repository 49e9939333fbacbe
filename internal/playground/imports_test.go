package playground

import (
	"testing"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

func TestImports(t *testing.T) {
	m := importcheck.Module
	importcheck.Forbid(t, ".", m+"/bot", m+"/session", m+"/agent", m+"/mcp", m+"/provider", m+"/cmd",
		m+"/internal/llmemu", m+"/internal/faulttest", importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}
