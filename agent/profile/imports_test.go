package profile

import (
	"testing"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

func TestImports(t *testing.T) {
	importcheck.Forbid(t, ".",
		importcheck.Module+"/bot", importcheck.Module+"/session", importcheck.Module+"/mcp", importcheck.Module+"/provider",
		importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}
