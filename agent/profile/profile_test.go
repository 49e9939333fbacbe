package profile

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const sample = `
profiles:
  - name: support
    system_prompt: "You help customers of ${COMPANY}."
    model: small-model
    provider: cheap
    servers: [docs]
    respond: thread
    max_tokens: 800
    budget: {daily_tokens: 100000}
  - name: eng
    system_prompt: Be terse.
    respond: all
  - name: private
    servers: []
channels:
  C0SUPPORT: support
  C0ENG: eng
dm: private
default: eng
budgets:
  workspace: {monthly_cost: 200}
  channel: {daily_tokens: 500000, daily_cost: 5}
  person: {daily_tokens: 50000}
prices:
  small-model: {input: 0.5, cached_input: 0.05, output: 1.5}
providers:
  cheap:
    kind: openai
    base_url: https://llm.example/v1
    api_key: ${CHEAP_KEY}
retention: 720h
`

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParse(t *testing.T) {
	cfg, err := Parse("p.yaml", []byte(sample), Check{
		Getenv:  env(map[string]string{"COMPANY": "Acme", "CHEAP_KEY": "sk-1"}),
		Servers: []string{"docs", "tickets"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Profile{Name: "support", SystemPrompt: "You help customers of Acme.", Model: "small-model", Provider: "cheap",
		Servers: []string{"docs"}, Respond: RespondThread, MaxTokens: 800, Budget: Limits{DailyTokens: 100000}}
	if d := cmp.Diff(want, *cfg.Profile("support")); d != "" {
		t.Errorf("support profile (-want +got):\n%s", d)
	}
	if got := cfg.Providers["cheap"]; got.APIKey != "sk-1" || got.Kind != KindOpenAI {
		t.Errorf("provider cheap = %+v, want the key expanded", got)
	}
	if cfg.Retention != 720*time.Hour {
		t.Errorf("retention = %v", cfg.Retention)
	}
	if got := cfg.ChannelLimits(cfg.Profile("support")); got != (Limits{DailyTokens: 100000, DailyCost: 5}) {
		t.Errorf("channel limits = %+v", got)
	}
	if p := cfg.Profile("private"); p.Servers == nil || len(p.Servers) != 0 || p.Filter("docs") {
		t.Errorf("servers: [] must offer no server, got %#v", p.Servers)
	}
	if p := cfg.Profile("eng"); !p.Filter("anything") {
		t.Error("a profile without servers must not narrow")
	}
}

func TestResolve(t *testing.T) {
	cfg, err := Parse("p.yaml", []byte(sample), Check{Getenv: env(map[string]string{"COMPANY": "A", "CHEAP_KEY": "k"})})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		channel, binding string
		dm               bool
		want             string
		src              Source
	}{
		{"C0SUPPORT", "", false, "support", SourceChannel},
		{"C0SUPPORT", "eng", false, "eng", SourceBinding},
		{"C0SUPPORT", "gone", false, "support", SourceChannel},
		{"C0OTHER", "", false, "eng", SourceDefault},
		{"D0DM", "", true, "private", SourceDM},
		{"D0DM", "support", true, "support", SourceBinding},
	} {
		p, src := cfg.Resolve(tc.channel, tc.dm, tc.binding)
		if p == nil || p.Name != tc.want || src != tc.src {
			t.Errorf("Resolve(%s, dm=%v, binding=%q) = %v from %q, want %s from %q", tc.channel, tc.dm, tc.binding, p, src, tc.want, tc.src)
		}
	}
	var none *Config
	if p, _ := none.Resolve("C1", false, "x"); p != nil {
		t.Error("nil config resolved a profile")
	}
}

func TestParseProblems(t *testing.T) {
	bad := `
profiles:
  - name: support
    model: m
    provider: nowhere
    servers: [docs, ghost]
    respond: sometimes
    max_tokens: -1
    budget: {daily_tokens: -5}
    temperature: 2
  - name: support
channels:
  C0X: missing
default: nope
budgets:
  person: {monthly_cost: -1}
providers:
  p1:
    kind: gemini
    api_key: ${UNSET_KEY}
`
	_, err := Parse("p.yaml", []byte(bad), Check{Getenv: env(nil), Servers: []string{"docs"}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`profiles config p.yaml: line 10: unknown field "temperature"`,
		`providers.p1: kind: must be openai or anthropic, got "gemini"`,
		`providers.p1: api_key: variable UNSET_KEY is not set`,
		`profiles[0] (support): provider: unknown provider "nowhere"`,
		`profiles[0] (support): servers: unknown MCP server "ghost"`,
		`profiles[0] (support): respond: must be mention, thread or all, got "sometimes"`,
		`profiles[0] (support): max_tokens: must not be negative`,
		`profiles[0] (support): budget: daily_tokens: must not be negative`,
		`profiles[1] (support): name: duplicate profile name`,
		`channels.C0X: profile: unknown profile "missing"`,
		`default: profile: unknown profile "nope"`,
		`budgets.person: monthly_cost: must not be negative`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q; got:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "sk-") {
		t.Error("error leaks a value")
	}
}

func TestCost(t *testing.T) {
	cfg, err := Parse("p.yaml", []byte(sample), Check{Getenv: env(map[string]string{"COMPANY": "A", "CHEAP_KEY": "k"})})
	if err != nil {
		t.Fatal(err)
	}
	// 1000 input of which 400 cached, 200 output: 600×0.5 + 400×0.05 + 200×1.5 = 620 micros.
	got, ok := cfg.Cost("small-model", 1000, 400, 200)
	if !ok || got != 620 {
		t.Errorf("Cost = %d, %v; want 620 micros, priced", got, ok)
	}
	if _, ok := cfg.Cost("unpriced", 1, 0, 1); ok {
		t.Error("an unpriced model has a cost")
	}
}

// TestRegisteredServers: registered_servers names servers admins register
// from Slack: checked for name syntax only (not against MCP_CONFIG), and
// narrowing like servers: a profile that sets either list offers the
// servers of both and no other.
func TestRegisteredServers(t *testing.T) {
	const file = `
profiles:
  - name: both
    servers: [docs]
    registered_servers: [wiki, Team_CRM-2]
  - name: regonly
    registered_servers: [wiki]
  - name: regnone
    registered_servers: []
  - name: plain
`
	for _, known := range [][]string{{"docs", "tickets"}, nil} {
		cfg, err := Parse("p.yaml", []byte(file), Check{Getenv: env(nil), Servers: known})
		if err != nil {
			t.Fatalf("MCP_CONFIG names %v: %v", known, err)
		}
		if got, want := cfg.Profile("both").RegisteredServers, []string{"wiki", "Team_CRM-2"}; !cmp.Equal(got, want) {
			t.Errorf("registered_servers = %v, want %v", got, want)
		}
		for _, tc := range []struct {
			profile string
			narrows bool
			offers  map[string]bool
		}{
			{"both", true, map[string]bool{"docs": true, "wiki": true, "Team_CRM-2": true, "tickets": false, "other": false}},
			{"regonly", true, map[string]bool{"wiki": true, "docs": false, "tickets": false}},
			{"regnone", true, map[string]bool{"wiki": false, "docs": false}},
			{"plain", false, map[string]bool{"wiki": true, "docs": true}},
		} {
			p := cfg.Profile(tc.profile)
			if p.Narrows() != tc.narrows {
				t.Errorf("%s: Narrows() = %v, want %v", tc.profile, p.Narrows(), tc.narrows)
			}
			for server, want := range tc.offers {
				if got := p.Filter(server); got != want {
					t.Errorf("%s: Filter(%q) = %v, want %v", tc.profile, server, got, want)
				}
			}
		}
	}
	var none *Profile
	if none.Narrows() || !none.Filter("x") {
		t.Error("no profile must not narrow")
	}
}

func TestRegisteredServersProblems(t *testing.T) {
	bad := `
profiles:
  - name: p
    servers: [docs]
    registered_servers: [wiki, wiki, "no spaces", docs, tickets, "` + strings.Repeat("x", 33) + `"]
`
	_, err := Parse("p.yaml", []byte(bad), Check{Getenv: env(nil), Servers: []string{"docs", "tickets"}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`profiles config p.yaml: profiles[0] (p): registered_servers: "wiki" is listed twice`,
		`profiles[0] (p): registered_servers: "no spaces" is not a server name (1 to 32 letters, digits, - or _)`,
		`profiles[0] (p): registered_servers: "docs" is also listed under servers`,
		`profiles[0] (p): registered_servers: "tickets" is a server of MCP_CONFIG: list it under servers`,
		`profiles[0] (p): registered_servers: "` + strings.Repeat("x", 33) + `" is not a server name`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q; got:\n%v", want, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 5 {
		t.Errorf("%d problems, want 5:\n%v", n, err)
	}
	// An unknown name under servers points at registered_servers.
	_, err = Parse("p.yaml", []byte("profiles:\n  - name: p\n    servers: [wiki]\n"), Check{Getenv: env(nil), Servers: []string{"docs"}})
	if err == nil || !strings.Contains(err.Error(), `servers: unknown MCP server "wiki"`) || !strings.Contains(err.Error(), "registered_servers") {
		t.Errorf("an unknown server under servers: %v", err)
	}
}

// TestDocsSample: the sample file in docs/profiles.md loads, with the
// servers its comments promise.
func TestDocsSample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/profiles.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	sample, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/profiles.md has no yaml sample")
	}
	cfg, err := Parse("docs/profiles.md", []byte(sample), Check{Getenv: env(map[string]string{"CHEAP_OPENAI_KEY": "k"}),
		Servers: []string{"docs", "tickets"}})
	if err != nil {
		t.Fatalf("the sample does not load: %v", err)
	}
	p := cfg.Profile("support")
	if p == nil || !p.Filter("crm") || !p.Filter("docs") || p.Filter("other") {
		t.Errorf("support profile = %+v: want docs, tickets and the registered crm offered, nothing else", p)
	}
}
