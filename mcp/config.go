package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/bobbinbot/bobbin/internal/envref"
)

// Config is the operator's MCP configuration file (MCP_CONFIG).
type Config struct {
	// Servers are mounted in every workspace.
	Servers []ServerConfig `yaml:"servers"`
	// Workspaces adds servers for one team id each.
	Workspaces map[string]WorkspaceConfig `yaml:"workspaces"`
}

// WorkspaceConfig lists the servers of one workspace.
type WorkspaceConfig struct {
	Servers []ServerConfig `yaml:"servers"`
}

// ServerConfig describes one MCP server. Exactly one of Command (stdio),
// URL (HTTP) and Builtin (in-process) is set.
type ServerConfig struct {
	// Name identifies the server in tool names (<name>__<tool>) and commands.
	Name string `yaml:"name"`
	// Command is the executable and its arguments; no shell is involved.
	Command []string `yaml:"command"`
	// Env is the child's environment on top of PATH and HOME. Values may
	// reference ${VARS} of the bot's environment.
	Env map[string]string `yaml:"env"`
	// URL is the streamable HTTP (or legacy SSE) endpoint.
	URL string `yaml:"url"`
	// Builtin names a server built into Bobbin, run in-process ("demo":
	// a small notes store with a read-only and a writing tool).
	Builtin string `yaml:"builtin"`
	// Headers are sent with every HTTP request; values may reference ${VARS}.
	Headers map[string]string `yaml:"headers"`
	// Allow lists tools that run without asking.
	Allow []string `yaml:"allow"`
	// Deny lists tools that never run.
	Deny []string `yaml:"deny"`
	// Trusted lets the server's annotations set its tools' default policy
	// (read-only and closed-world: auto-in-dm; destructive: ask every time).
	Trusted bool `yaml:"trusted"`
	// Policy is the tool policy: one line for every tool ("auto-in-dm",
	// "ask private") or a mapping from tool glob to such a line.
	Policy PolicyConfig `yaml:"policy"`
	// Transport forces a transport for URL servers: "" (streamable HTTP with
	// SSE fallback), "streamable" (no fallback) or "sse" (legacy HTTP+SSE).
	Transport string `yaml:"transport"`
	// Timeout bounds each tool call; zero means Options.CallTimeout.
	Timeout time.Duration `yaml:"timeout"`
	// StartupTimeout is how long a stdio server may take to start and
	// answer its first connect (a cold npx or uvx download included);
	// zero means Options.StartupTimeout. Turns do not wait for it: they
	// start with the servers that are ready.
	StartupTimeout time.Duration `yaml:"startup_timeout"`
	// Auth is "none" (static headers; the default), "workspace" (an admin
	// connects once with OAuth, every call uses that connection) or "user"
	// (each person connects their own account).
	Auth string `yaml:"auth"`
	// ClientID and ClientSecret name a client pre-registered with the
	// server's authorization server (else Bobbin uses a Client ID Metadata
	// Document or dynamic registration); ClientSecret may reference
	// ${VARS}. Scopes overrides the scopes Bobbin asks for (a server's
	// WWW-Authenticate scope still wins).
	ClientID     string   `yaml:"client_id"`
	ClientSecret string   `yaml:"client_secret"`
	Scopes       []string `yaml:"scopes"`
	// ClientIssuer is the authorization server client_id was registered
	// with; when the server moves to another one, Bobbin says so instead of
	// presenting the client there (SEP-2352).
	ClientIssuer string `yaml:"client_issuer"`
	// Preset is set on servers registered from Slack with a preset
	// (servers.Registration.Preset): their OAuth client comes from
	// Options.Presets. Never read from the file.
	Preset string `yaml:"-"`
	// Scope (channels, users, usergroups, guests, dm) is who may use the
	// server's tools, and where.
	Scope `yaml:",inline"`
}

const (
	sourceConfig     = "config"
	sourceRegistered = "registered"
)

var (
	serverNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)
	envNameRE    = envref.NameRE
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// LoadConfig reads and validates the YAML file at path. Unknown fields are
// errors; every problem is reported, each naming the file, the server (or the
// line) and the field. ${VAR} references are kept as written: they are
// expanded when a server is connected, with Options.Getenv (CheckVars finds
// the unset ones up front).
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mcp config: %w", err)
	}
	return parseConfig(path, data)
}

func parseConfig(path string, data []byte) (*Config, error) {
	cfg, errs := decodeConfig(path, data)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// decodeConfig decodes and validates a config file, returning what could
// be decoded (nil after a syntax error) and every problem found.
func decodeConfig(path string, data []byte) (*Config, []error) {
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var errs []error
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		// Unknown fields and wrong kinds leave the rest decoded: report
		// them with what validate finds. A syntax error leaves nothing.
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, []error{fmt.Errorf("mcp config %s: %w", path, err)}
		}
		errs = decodeProblems(path, te)
	}
	if err := cfg.validate(path); err != nil {
		errs = append(errs, err)
	}
	return &cfg, errs
}

func (c *Config) validate(path string) error {
	var errs []error
	global := map[string]bool{}
	for i := range c.Servers {
		errs = append(errs, c.Servers[i].validate(path, fmt.Sprintf("servers[%d]", i))...)
		if n := c.Servers[i].Name; n != "" {
			if global[n] {
				errs = append(errs, fmt.Errorf("mcp config %s: servers[%d] (%s): name: duplicate server name", path, i, n))
			}
			global[n] = true
		}
	}
	for team, ws := range c.Workspaces {
		if strings.TrimSpace(team) == "" {
			errs = append(errs, fmt.Errorf("mcp config %s: workspaces: empty team id", path))
		}
		seen := map[string]bool{}
		for i := range ws.Servers {
			where := fmt.Sprintf("workspaces.%s.servers[%d]", team, i)
			errs = append(errs, ws.Servers[i].validate(path, where)...)
			n := ws.Servers[i].Name
			if n == "" {
				continue
			}
			if global[n] || seen[n] {
				errs = append(errs, fmt.Errorf("mcp config %s: %s (%s): name: duplicate server name", path, where, n))
			}
			seen[n] = true
		}
	}
	return errors.Join(errs...)
}

func (s *ServerConfig) validate(path, where string) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("mcp config %s: %s (%s): %s: %s", path, where, s.Name, field, fmt.Sprintf(format, args...)))
	}
	if !serverNameRE.MatchString(s.Name) {
		bad("name", "must match [a-zA-Z0-9_-]{1,32}, got %q", s.Name)
	}
	kinds := 0
	for _, set := range []bool{len(s.Command) > 0, s.URL != "", s.Builtin != ""} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds > 1 && s.Builtin != "":
		bad("builtin", "set one of command, url and builtin, not several")
	case kinds > 1:
		bad("command", "set either command or url, not both")
	case kinds == 0:
		bad("url", "set either command (stdio) or url (HTTP), or builtin: %s", BuiltinDemo)
	}
	if s.Builtin != "" {
		if !validBuiltin(s.Builtin) {
			bad("builtin", "unknown built-in server %q (known: %s)", s.Builtin, strings.Join(builtinKinds, ", "))
		}
		if len(s.Env) > 0 {
			bad("env", "env applies to command servers only")
		}
		if len(s.Headers) > 0 {
			bad("headers", "headers apply to url servers only")
		}
		if s.Transport != "" {
			bad("transport", "transport applies to url servers only")
		}
	}
	if len(s.Command) > 0 {
		if strings.TrimSpace(s.Command[0]) == "" {
			bad("command", "the executable is empty")
		}
		if len(s.Headers) > 0 {
			bad("headers", "headers apply to url servers only")
		}
		if s.Transport != "" {
			bad("transport", "transport applies to url servers only")
		}
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		switch {
		case err != nil:
			bad("url", "%v", err)
		case u.Scheme != "https" && u.Scheme != "http":
			bad("url", "scheme must be http or https, got %q", u.Scheme)
		case u.Host == "":
			bad("url", "missing host")
		case u.User != nil:
			bad("url", "credentials in the URL are not allowed; use headers")
		}
		if len(s.Env) > 0 {
			bad("env", "env applies to command servers only")
		}
	}
	for k := range s.Env {
		if !envNameRE.MatchString(k) {
			bad("env", "invalid variable name %q", k)
		}
	}
	for k, v := range s.Headers {
		if !headerNameRE.MatchString(k) {
			bad("headers", "invalid header name %q", k)
		}
		if strings.ContainsAny(v, "\r\n") {
			bad("headers", "value of %s contains a line break", k)
		}
	}
	switch s.Transport {
	case "", transportStreamable, transportSSE:
	default:
		bad("transport", "must be empty, %q or %q, got %q", transportStreamable, transportSSE, s.Transport)
	}
	if !validAuthMode(s.Auth) {
		bad("auth", "must be %q, %q or %q, got %q", AuthNone, AuthWorkspace, AuthUser, s.Auth)
	}
	oauth := s.Auth == AuthWorkspace || s.Auth == AuthUser
	if oauth && (len(s.Command) > 0 || s.Builtin != "") {
		bad("auth", "OAuth applies to url servers only (stdio servers take credentials from env)")
	}
	if oauth && s.Transport == transportSSE {
		bad("auth", "OAuth needs the streamable HTTP transport, not sse")
	}
	if !oauth && (s.ClientID != "" || s.ClientSecret != "" || s.ClientIssuer != "" || len(s.Scopes) > 0) {
		bad("client_id", "client_id, client_secret and scopes need auth: workspace or user")
	}
	if (s.ClientSecret != "" || s.ClientIssuer != "") && s.ClientID == "" {
		bad("client_secret", "client_secret and client_issuer need client_id")
	}
	for _, sc := range s.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\r\n\"") {
			bad("scopes", "invalid scope %q", sc)
		}
	}
	if s.Timeout < 0 {
		bad("timeout", "must not be negative")
	}
	if s.StartupTimeout < 0 {
		bad("startup_timeout", "must not be negative")
	}
	if s.StartupTimeout > 0 && len(s.Command) == 0 {
		bad("startup_timeout", "startup_timeout applies to command servers only")
	}
	s.Scope.Validate(bad)
	for _, p := range s.Policy.Problems {
		bad("policy", "%s", p)
	}
	for _, list := range []struct {
		field string
		names []string
	}{{"allow", s.Allow}, {"deny", s.Deny}} {
		for _, n := range list.names {
			if strings.TrimSpace(n) == "" {
				bad(list.field, "empty tool name")
			}
		}
	}
	return errs
}

// expandVars replaces ${NAME} with getenv(NAME) (envref.Expand: an unset
// or empty variable is an error naming it; a lone "$" is kept).
func expandVars(s string, getenv func(string) string) (string, error) {
	return envref.Expand(s, getenv)
}

func expandMap(m map[string]string, getenv func(string) string, what string) (map[string]string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		x, err := expandVars(v, getenv)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, k, err)
		}
		out[k] = x
	}
	return out, nil
}
