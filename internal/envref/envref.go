// Package envref expands ${NAME} references to environment variables in
// operator configuration (MCP_CONFIG, PROFILES_CONFIG). It is the one
// definition both config loaders use, so both accept and refuse the same
// references.
package envref

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// NameRE matches a valid variable name.
var NameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Expand replaces ${NAME} with getenv(NAME). An unset or empty variable is
// an error naming every such variable, so a missing secret fails loudly
// instead of sending "Bearer ". A lone "$" is kept.
func Expand(s string, getenv func(string) string) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	var unset []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", errors.New("unterminated ${")
		}
		name := s[i+2 : i+j]
		if !NameRE.MatchString(name) {
			return "", fmt.Errorf("invalid variable reference ${%s}", name)
		}
		v := getenv(name)
		if v == "" {
			unset = append(unset, name)
		}
		b.WriteString(s[:i])
		b.WriteString(v)
		s = s[i+j+1:]
	}
	if len(unset) > 0 {
		return "", fmt.Errorf("variable %s is not set", strings.Join(unset, ", "))
	}
	return b.String(), nil
}
