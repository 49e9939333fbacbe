package profile

import (
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
