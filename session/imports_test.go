package session

import (
	"testing"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

func TestImports(t *testing.T) {
	importcheck.Forbid(t, ".",
		importcheck.Module+"/agent", importcheck.Module+"/bot", importcheck.Module+"/mcp", importcheck.Module+"/cmd",
		importcheck.SlackGo, importcheck.MCPSDK)
}
