package providertest

import (
	"testing"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

func TestImports(t *testing.T) {
	importcheck.Forbid(t, ".",
		importcheck.Module+"/agent", importcheck.Module+"/bot", importcheck.Module+"/session", importcheck.Module+"/mcp",
		importcheck.Module+"/provider/openai", importcheck.Module+"/provider/anthropic",
		importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}
