package bot

import (
	"testing"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

func TestImports(t *testing.T) {
	m := importcheck.Module
	importcheck.Forbid(t, ".", m+"/mcp", m+"/cmd", m+"/provider/openai", m+"/provider/anthropic", m+"/provider/providertest", m+"/internal", importcheck.MCPSDK)
}
