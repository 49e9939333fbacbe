package shape

import (
	"testing"

	"github.com/bobbinbot/bobbin/internal/importcheck"
	"github.com/bobbinbot/bobbin/provider"
)

func TestImports(t *testing.T) {
	importcheck.Forbid(t, ".",
		importcheck.Module+"/agent", importcheck.Module+"/bot", importcheck.Module+"/session", importcheck.Module+"/mcp",
		importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}

func TestSpeakerPrefix(t *testing.T) {
	tests := []struct {
		name, id, want string
	}{
		{"Alice", "U123", "[Alice (U123)] "},
		{"Bob", "", "[Bob] "},
		{"", "U9", "[U9] "},
		{"", "", ""},
	}
	for _, tt := range tests {
		m := provider.Message{Role: provider.RoleUser, UserName: tt.name, UserID: tt.id}
		if got := SpeakerPrefix(m); got != tt.want {
			t.Errorf("SpeakerPrefix(name %q, id %q) = %q, want %q", tt.name, tt.id, got, tt.want)
		}
	}
}
