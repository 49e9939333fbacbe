package mcp

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bobbinbot/bobbin/agent"
)

func TestFileName(t *testing.T) {
	for _, c := range []struct{ name, mime, want string }{
		{"customers.csv", "text/csv", "customers.csv"},
		{"customers", "text/csv", "customers.csv"},
		{"chart", "image/png", "chart.png"},
		{"photo", "image/jpeg", "photo.jpg"},
		{"notes", "text/plain; charset=utf-8", "notes.txt"},
		{"blob", "", "blob"},
		{"../etc/passwd", "", ".._etc_passwd"},
		{"  ", "application/pdf", "file.pdf"},
	} {
		if got := fileName(c.name, c.mime); got != c.want {
			t.Errorf("fileName(%q, %q) = %q, want %q", c.name, c.mime, got, c.want)
		}
	}
	if got := uriBase("reports://q3/summary.pdf?v=2"); got != "summary.pdf" {
		t.Errorf("uriBase = %q, want summary.pdf", got)
	}
}

func TestParseTable(t *testing.T) {
	got, ok := parseTable("t", []byte(` [{"id":1,"name":"a"},{"name":"b","extra":true,"n":null}] `))
	want := agent.ToolTable{Tool: "t", Columns: []string{"id", "name", "extra", "n"},
		Rows: [][]string{{"1", "a", "", ""}, {"", "b", "true", ""}}}
	if !ok {
		t.Fatal("a flat array is not a table")
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("parseTable (-want +got):\n%s", d)
	}
	for _, in := range []string{`[]`, `[{}]`, `{"a":1}`, `[{"a":{"b":1}}]`, `[{"a":[1]}]`, `[1,2]`, `[{"a":1}] x`, `plain text`} {
		if _, ok := parseTable("t", []byte(in)); ok {
			t.Errorf("parseTable(%s) is a table, want not", in)
		}
	}
}
