package mcp

import (
	"os"
	"strings"
	"testing"
)

// TestReadmePolicyExample: the MCP_CONFIG example in README.md's Tool
// policies section is a valid config with policy rules.
func TestReadmePolicyExample(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Tool policies\n")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no yaml block in a Tool policies section")
	}
	cfg, err := parseConfig("README.md", []byte(block))
	if err != nil {
		t.Fatalf("the README's example: %v\n%s", err, block)
	}
	if len(cfg.Servers) == 0 || len(cfg.Servers[0].Policy.Rules) < 2 {
		t.Errorf("the README's example has no policy rules:\n%s", block)
	}
}
