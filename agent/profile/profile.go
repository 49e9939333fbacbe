// Package profile reads the operator's agent profiles (PROFILES_CONFIG):
// per-channel system prompt additions, model and provider, the MCP servers
// offered, how the bot answers, an output cap and budgets, plus the prices
// that turn metered tokens into cost. It resolves which profile applies to
// a place (an admin's binding, then channels:, then dm: or default:).
//
// It knows nothing of Slack, Redis or MCP and imports no other package of
// ours: cmd/bot loads the file, bot resolves it at turn start.
package profile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/bobbinbot/bobbin/internal/envref"
)

// Respond modes: which messages of a channel start turns.
const (
	// RespondMention answers mentions only (thread replies are context).
	RespondMention = "mention"
	// RespondThread answers mentions and replies in threads the bot is in.
	RespondThread = "thread"
	// RespondAll answers every message in the channel.
	RespondAll = "all"
)

// DefaultRetention is how long day buckets of usage are kept (month
// buckets a month longer) when the file sets no retention.
const DefaultRetention = 90 * 24 * time.Hour

// MaxRetention is the longest retention (session.MaxUsageRetention: the
// clean-up after an uninstall looks that far back).
const MaxRetention = 400 * 24 * time.Hour

// Config is a PROFILES_CONFIG file.
type Config struct {
	// Profiles are the named profiles.
	Profiles []Profile `yaml:"profiles"`
	// Channels binds channel ids to profile names.
	Channels map[string]string `yaml:"channels"`
	// DM is the profile of direct messages; Default the profile of every
	// other place. Empty: no profile (the bot's plain settings).
	DM      string `yaml:"dm"`
	Default string `yaml:"default"`
	// Budgets are the limits per workspace, per channel and per person.
	Budgets Budgets `yaml:"budgets"`
	// Prices are per model, in currency units per million tokens.
	Prices map[string]Price `yaml:"prices"`
	// Providers are model endpoints profiles may name besides the one the
	// environment configures (LLM_*).
	Providers map[string]Provider `yaml:"providers"`
	// Currency labels cost in reports (default none).
	Currency string `yaml:"currency"`
	// Retention is how long day buckets of usage are kept (default
	// DefaultRetention); a Go duration such as 2160h.
	Retention time.Duration `yaml:"retention"`

	byName map[string]*Profile
}

// Profile is one named agent profile.
type Profile struct {
	Name string `yaml:"name"`
	// SystemPrompt is added after the bot's own system prompt (never
	// replacing it).
	SystemPrompt string `yaml:"system_prompt"`
	// Model is the model name sent to the provider (empty: LLM_MODEL).
	Model string `yaml:"model"`
	// Provider names an entry of Config.Providers (empty: the environment's).
	Provider string `yaml:"provider"`
	// Servers, when set, are the only MCP servers offered (still within
	// the access policy). Absent: no narrowing; an empty list: no tools.
	Servers []string `yaml:"servers"`
	// RegisteredServers are servers the profile offers that admins
	// register from Slack (/bobbin mcp add) rather than MCP_CONFIG. The
	// load checks only their names (they do not exist yet); a turn offers
	// those the workspace has registered. They narrow like Servers: a
	// profile that sets either list offers the servers of both and no
	// other; absent both, no narrowing.
	RegisteredServers []string `yaml:"registered_servers"`
	// Respond is RespondMention, RespondThread or RespondAll (empty: the
	// bot's THREAD_FOLLOWUPS behaviour).
	Respond string `yaml:"respond"`
	// MaxTokens caps each response (0: LLM_MAX_TOKENS).
	MaxTokens int `yaml:"max_tokens"`
	// Budget limits a channel this profile applies to (each channel on its
	// own), on top of budgets.channel.
	Budget Limits `yaml:"budget"`
}

// Budgets are the limits of each scope.
type Budgets struct {
	Workspace Limits `yaml:"workspace"`
	Channel   Limits `yaml:"channel"`
	Person    Limits `yaml:"person"`
}

// Limits are daily and monthly limits in tokens (input + output) and in
// cost. Zero means no limit.
type Limits struct {
	DailyTokens   int64   `yaml:"daily_tokens"`
	MonthlyTokens int64   `yaml:"monthly_tokens"`
	DailyCost     float64 `yaml:"daily_cost"`
	MonthlyCost   float64 `yaml:"monthly_cost"`
}

// IsZero reports that no limit is set.
func (l Limits) IsZero() bool { return l == Limits{} }

// Tighter returns, per field, the smaller of the set limits of l and o.
func (l Limits) Tighter(o Limits) Limits {
	mi := func(a, b int64) int64 {
		if a == 0 || (b != 0 && b < a) {
			return b
		}
		return a
	}
	mf := func(a, b float64) float64 {
		if a == 0 || (b != 0 && b < a) {
			return b
		}
		return a
	}
	return Limits{mi(l.DailyTokens, o.DailyTokens), mi(l.MonthlyTokens, o.MonthlyTokens),
		mf(l.DailyCost, o.DailyCost), mf(l.MonthlyCost, o.MonthlyCost)}
}

// Price is what a model costs, in currency units per million tokens.
// CachedInput applies to input read from a prompt cache (default Input).
type Price struct {
	Input       float64 `yaml:"input"`
	CachedInput float64 `yaml:"cached_input"`
	Output      float64 `yaml:"output"`
}

// Provider is a model endpoint: the same settings as LLM_PROVIDER,
// LLM_BASE_URL and LLM_API_KEY. BaseURL and APIKey may reference ${VARS},
// expanded at load.
type Provider struct {
	Kind    string `yaml:"kind"`
	BaseURL string `yaml:"base_url"`
	APIKey  string `yaml:"api_key"`
}

// Provider kinds (LLM_PROVIDER values).
const (
	KindOpenAI    = "openai"
	KindAnthropic = "anthropic"
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// serverNameRE is the rule for MCP server names (mcp's, and /bobbin mcp
// add's): a registered_servers entry that breaks it could never match.
var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Check is what the rest of the configuration knows, for cross-checks at
// load. Zero fields skip their check.
type Check struct {
	// Getenv expands ${VARS}; nil: os.Getenv.
	Getenv func(string) string
	// Servers are the MCP server names a profile may name; nil skips the
	// check.
	Servers []string
}

// Load reads and validates the file at path. Every problem is reported at
// once, each naming the file, the place (line, profile) and the field;
// ${VARS} that are unset are named, their values never.
func Load(path string, chk Check) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("profiles config: %w", err)
	}
	return Parse(path, data, chk)
}

// Parse is Load for a file already read.
func Parse(path string, data []byte, chk Check) (*Config, error) {
	if chk.Getenv == nil {
		chk.Getenv = os.Getenv
	}
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var errs []error
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, fmt.Errorf("profiles config %s: %w", path, err)
		}
		for _, e := range te.Errors {
			errs = append(errs, fmt.Errorf("profiles config %s: %s", path, friendlyYAML(e)))
		}
	}
	errs = append(errs, cfg.validate(path, chk)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &cfg, nil
}

var yamlUnknownField = regexp.MustCompile(`^(line \d+): field (\S+) not found in type \S+$`)

func friendlyYAML(e string) string {
	if m := yamlUnknownField.FindStringSubmatch(e); m != nil {
		return fmt.Sprintf("%s: unknown field %q", m[1], m[2])
	}
	return e
}

func (c *Config) validate(path string, chk Check) []error {
	var errs []error
	bad := func(where, field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("profiles config %s: %s: %s: %s", path, where, field, fmt.Sprintf(format, args...)))
	}
	for _, name := range slices.Sorted(mapKeys(c.Providers)) {
		p := c.Providers[name]
		where := "providers." + name
		if !nameRE.MatchString(name) {
			bad("providers", name, "a provider name must match [a-z0-9][a-z0-9_-]{0,31}")
		}
		switch p.Kind {
		case KindOpenAI, KindAnthropic:
		default:
			bad(where, "kind", "must be %s or %s, got %q", KindOpenAI, KindAnthropic, p.Kind)
		}
		var err error
		if p.BaseURL, err = expand(p.BaseURL, chk.Getenv); err != nil {
			bad(where, "base_url", "%v", err)
		}
		if p.APIKey, err = expand(p.APIKey, chk.Getenv); err != nil {
			bad(where, "api_key", "%v", err)
		}
		c.Providers[name] = p
	}
	var known map[string]bool
	if chk.Servers != nil {
		known = map[string]bool{}
		for _, s := range chk.Servers {
			known[s] = true
		}
	}
	c.byName = map[string]*Profile{}
	for i := range c.Profiles {
		p := &c.Profiles[i]
		where := fmt.Sprintf("profiles[%d] (%s)", i, p.Name)
		if !nameRE.MatchString(p.Name) {
			bad(where, "name", "must match [a-z0-9][a-z0-9_-]{0,31}, got %q", p.Name)
		} else if c.byName[p.Name] != nil {
			bad(where, "name", "duplicate profile name")
		} else {
			c.byName[p.Name] = p
		}
		var err error
		if p.SystemPrompt, err = expand(p.SystemPrompt, chk.Getenv); err != nil {
			bad(where, "system_prompt", "%v", err)
		}
		if p.Provider != "" {
			if _, ok := c.Providers[p.Provider]; !ok {
				bad(where, "provider", "unknown provider %q (providers: %s)", p.Provider, keyList(c.Providers))
			}
			if p.Model == "" {
				bad(where, "model", "a profile that names a provider must name its model")
			}
		}
		switch p.Respond {
		case "", RespondMention, RespondThread, RespondAll:
		default:
			bad(where, "respond", "must be %s, %s or %s, got %q", RespondMention, RespondThread, RespondAll, p.Respond)
		}
		if p.MaxTokens < 0 {
			bad(where, "max_tokens", "must not be negative")
		}
		seen := map[string]bool{}
		for _, s := range p.Servers {
			switch {
			case seen[s]:
				bad(where, "servers", "%q is listed twice", s)
			case known != nil && !known[s]:
				bad(where, "servers", "unknown MCP server %q (MCP_CONFIG names: %s; a server admins register from Slack goes under registered_servers)",
					s, strings.Join(slices.Sorted(slices.Values(chk.Servers)), ", "))
			}
			seen[s] = true
		}
		// A registration never takes a name of MCP_CONFIG (mcp skips such
		// a registration), and these checks keep MCP_CONFIG's names out of
		// registered_servers: so a turn tells the two lists apart by name.
		seenReg := map[string]bool{}
		for _, s := range p.RegisteredServers {
			switch {
			case !serverNameRE.MatchString(s):
				bad(where, "registered_servers", "%q is not a server name (1 to 32 letters, digits, - or _)", s)
			case seenReg[s]:
				bad(where, "registered_servers", "%q is listed twice", s)
			case seen[s]:
				bad(where, "registered_servers", "%q is also listed under servers", s)
			case known != nil && known[s]:
				bad(where, "registered_servers", "%q is a server of MCP_CONFIG: list it under servers", s)
			}
			seenReg[s] = true
		}
		errs = append(errs, p.Budget.validate(path, where+": budget")...)
	}
	ref := func(where, name string) {
		if name != "" && c.byName[name] == nil {
			bad(where, "profile", "unknown profile %q", name)
		}
	}
	for _, ch := range slices.Sorted(mapKeys(c.Channels)) {
		if !channelRE.MatchString(ch) {
			bad("channels", ch, "not a channel id (like C0123ABCD)")
		}
		ref("channels."+ch, c.Channels[ch])
	}
	ref("dm", c.DM)
	ref("default", c.Default)
	errs = append(errs, c.Budgets.Workspace.validate(path, "budgets.workspace")...)
	errs = append(errs, c.Budgets.Channel.validate(path, "budgets.channel")...)
	errs = append(errs, c.Budgets.Person.validate(path, "budgets.person")...)
	for _, m := range slices.Sorted(mapKeys(c.Prices)) {
		p := c.Prices[m]
		if p.Input < 0 || p.CachedInput < 0 || p.Output < 0 {
			bad("prices."+m, "input", "prices must not be negative")
		}
	}
	if c.Retention < 0 {
		bad("retention", "retention", "must not be negative")
	} else if c.Retention > 0 && c.Retention < 48*time.Hour {
		bad("retention", "retention", "must be at least 48h (a day bucket must outlive its day)")
	} else if c.Retention > MaxRetention {
		bad("retention", "retention", "must be at most 9600h (400 days)")
	}
	return errs
}

var channelRE = regexp.MustCompile(`^[CDG][A-Z0-9]{2,}$`)

func (l Limits) validate(path, where string) []error {
	var errs []error
	for _, f := range []struct {
		name string
		neg  bool
	}{{"daily_tokens", l.DailyTokens < 0}, {"monthly_tokens", l.MonthlyTokens < 0},
		{"daily_cost", l.DailyCost < 0}, {"monthly_cost", l.MonthlyCost < 0}} {
		if f.neg {
			errs = append(errs, fmt.Errorf("profiles config %s: %s: %s: must not be negative", path, where, f.name))
		}
	}
	return errs
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func keyList[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(mapKeys(m)), ", ")
}

// expand replaces ${NAME} with getenv(NAME); an unset or empty variable is
// an error naming it.
func expand(s string, getenv func(string) string) (string, error) { return envref.Expand(s, getenv) }

// Profile returns the profile named name, or nil.
func (c *Config) Profile(name string) *Profile {
	if c == nil {
		return nil
	}
	return c.byName[name]
}

// Names lists the profiles in file order.
func (c *Config) Names() []string {
	if c == nil {
		return nil
	}
	out := make([]string, len(c.Profiles))
	for i, p := range c.Profiles {
		out[i] = p.Name
	}
	return out
}

// Source says where a resolved profile came from.
type Source string

const (
	SourceNone    Source = ""
	SourceBinding Source = "binding" // an admin's /bobbin profile use
	SourceChannel Source = "channels"
	SourceDM      Source = "dm"
	SourceDefault Source = "default"
)

// Resolve picks the profile for a channel: binding (an admin's choice
// stored per workspace; "" for none) > channels: > dm: (for a DM) or
// default:. A binding naming a profile the file no longer has is skipped.
// It returns nil (and SourceNone) when none applies.
func (c *Config) Resolve(channel string, isDM bool, binding string) (*Profile, Source) {
	if c == nil {
		return nil, SourceNone
	}
	if p := c.byName[binding]; p != nil && binding != "" {
		return p, SourceBinding
	}
	if p := c.byName[c.Channels[channel]]; p != nil {
		return p, SourceChannel
	}
	if isDM {
		if p := c.byName[c.DM]; p != nil {
			return p, SourceDM
		}
		return nil, SourceNone
	}
	if p := c.byName[c.Default]; p != nil {
		return p, SourceDefault
	}
	return nil, SourceNone
}

// ChannelLimits are the limits of one channel under profile p: the
// tighter of budgets.channel and the profile's own budget.
func (c *Config) ChannelLimits(p *Profile) Limits {
	if c == nil {
		return Limits{}
	}
	if p == nil {
		return c.Budgets.Channel
	}
	return c.Budgets.Channel.Tighter(p.Budget)
}

// Cost is the cost of usage on model in micro currency units (millionths),
// and whether the model has a price. input is the total input (cached
// included), cached its part read from a cache.
func (c *Config) Cost(model string, input, cached, output int64) (micros int64, priced bool) {
	if c == nil {
		return 0, false
	}
	p, ok := c.Prices[model]
	if !ok {
		return 0, false
	}
	ci := p.CachedInput
	if ci == 0 {
		ci = p.Input
	}
	// price is per million tokens and the result is in millionths, so
	// tokens × price is exact in micros.
	f := float64(input-cached)*p.Input + float64(cached)*ci + float64(output)*p.Output
	return int64(f + 0.5), true
}

// RetentionOrDefault is Retention or DefaultRetention.
func (c *Config) RetentionOrDefault() time.Duration {
	if c == nil || c.Retention <= 0 {
		return DefaultRetention
	}
	return c.Retention
}

// Narrows reports that p limits the servers offered: it sets servers or
// registered_servers (even to an empty list).
func (p *Profile) Narrows() bool {
	return p != nil && (p.Servers != nil || p.RegisteredServers != nil)
}

// Filter narrows the server names a turn may use to those p names, in
// servers or registered_servers; nil p or a profile that sets neither:
// keeps all. It never adds a name: the access policy decided first.
func (p *Profile) Filter(allowed string) bool {
	if !p.Narrows() {
		return true
	}
	return slices.Contains(p.Servers, allowed) || slices.Contains(p.RegisteredServers, allowed)
}
