package mcp

import (
	"testing"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

func TestImports(t *testing.T) {
	importcheck.Forbid(t, ".", importcheck.Module+"/bot", importcheck.Module+"/session", importcheck.Module+"/cmd",
		importcheck.SlackGo, importcheck.GoRedis)
}
