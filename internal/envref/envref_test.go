package envref

import "testing"

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "1", "B": "two"}
	getenv := func(k string) string { return env[k] }
	for _, c := range []struct{ in, want, err string }{
		{"plain $ and $A", "plain $ and $A", ""},
		{"${A}-${B}", "1-two", ""},
		{"x ${NOPE} ${ALSO}", "", "variable NOPE, ALSO is not set"},
		{"${A", "", "unterminated ${"},
		{"${1A}", "", "invalid variable reference ${1A}"},
	} {
		got, err := Expand(c.in, getenv)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("Expand(%q) error = %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}
