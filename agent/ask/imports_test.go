package ask

import (
	"testing"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

// TestImports: ask is a leaf both bot and mcp import.
func TestImports(t *testing.T) {
	importcheck.Forbid(t, ".", importcheck.Module, importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}
