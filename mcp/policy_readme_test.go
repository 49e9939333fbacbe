package mcp

import "testing"

// TestReadmePolicyExample: the policy example in README.md is a valid
// MCP_CONFIG.
func TestReadmePolicyExample(t *testing.T) {
	y := `servers:
  - name: crm
    url: https://crm.example.com/mcp
    trusted: true
    policy:
      "lookup*": auto private
      "delete_*": admin
`
	if _, err := parseConfig("mcp.yaml", []byte(y)); err != nil {
		t.Fatal(err)
	}
}
