package servers

import (
	"testing"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

// TestImports: servers is a leaf both bot and mcp import.
func TestImports(t *testing.T) {
	importcheck.ForbidExcept(t, ".", importcheck.Module, importcheck.Module+"/agent")
	importcheck.Forbid(t, ".", importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}
