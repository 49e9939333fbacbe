package mcp

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoadConfigChecked is LoadConfig plus CheckVars, for start-up: every
// problem of the file, unset ${VARS} included, in one error.
func LoadConfigChecked(path string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mcp config: %w", err)
	}
	cfg, errs := decodeConfig(path, data)
	if cfg != nil {
		if err := cfg.CheckVars(path, getenv); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// CheckVars reports every ${VAR} reference in the servers' env, headers and
// client_secret
// that getenv leaves unset or empty, or that is malformed. At connect time
// such a server fails on its own; checked at start-up, all of them are
// reported together with the rest of the configuration. Errors name the
// file (path), the server, the field and the variable, never a value.
func (c *Config) CheckVars(path string, getenv func(string) string) error {
	var errs []error
	check := func(where string, s *ServerConfig) {
		for _, field := range []struct {
			name string
			m    map[string]string
		}{{"env", s.Env}, {"headers", s.Headers}} {
			keys := make([]string, 0, len(field.m))
			for k := range field.m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if _, err := expandVars(field.m[k], getenv); err != nil {
					errs = append(errs, fmt.Errorf("mcp config %s: %s (%s): %s: %s: %w", path, where, s.Name, field.name, k, err))
				}
			}
		}
		if s.ClientSecret != "" {
			if _, err := expandVars(s.ClientSecret, getenv); err != nil {
				errs = append(errs, fmt.Errorf("mcp config %s: %s (%s): client_secret: %w", path, where, s.Name, err))
			}
		}
	}
	for i := range c.Servers {
		check(fmt.Sprintf("servers[%d]", i), &c.Servers[i])
	}
	teams := make([]string, 0, len(c.Workspaces))
	for team := range c.Workspaces {
		teams = append(teams, team)
	}
	slices.Sort(teams)
	for _, team := range teams {
		ws := c.Workspaces[team]
		for i := range ws.Servers {
			check(fmt.Sprintf("workspaces.%s.servers[%d]", team, i), &ws.Servers[i])
		}
	}
	return errors.Join(errs...)
}

var (
	yamlUnknownField = regexp.MustCompile(`^(line \d+): field (\S+) not found in type \S+$`)
	yamlWrongType    = regexp.MustCompile("^(line \\d+): cannot unmarshal (!!\\w+)(?: `.*`)? into (\\S+)$")
)

// decodeProblems rewrites yaml's type errors, which name Go types and quote
// values, into one error per line of the file: unknown fields and values of
// the wrong kind.
func decodeProblems(path string, te *yaml.TypeError) []error {
	errs := make([]error, 0, len(te.Errors))
	for _, e := range te.Errors {
		if m := yamlUnknownField.FindStringSubmatch(e); m != nil {
			errs = append(errs, fmt.Errorf("mcp config %s: %s: unknown field %q", path, m[1], m[2]))
			continue
		}
		if m := yamlWrongType.FindStringSubmatch(e); m != nil {
			errs = append(errs, fmt.Errorf("mcp config %s: %s: expected %s, got %s", path, m[1], goKind(m[3]), yamlKind(m[2])))
			continue
		}
		errs = append(errs, fmt.Errorf("mcp config %s: %s", path, e))
	}
	return errs
}

// goKind names what a Go type of the config looks like in YAML.
func goKind(t string) string {
	switch {
	case t == "time.Duration":
		return "a duration such as 30s"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "mcp."):
		return "a mapping"
	}
	return "another kind of value"
}

// yamlKind names a YAML tag.
func yamlKind(tag string) string {
	switch tag {
	case "!!str":
		return "a string"
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "true or false"
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	case "!!null":
		return "nothing"
	}
	return "a " + strings.TrimPrefix(tag, "!!")
}
