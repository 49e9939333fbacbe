package main

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/dlclark/regexp2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/bobbinbot/bobbin/mcp"
)

// ecmaRegexp adapts regexp2 to jsonschema: Slack's schema uses look-ahead,
// which Go's RE2 rejects.
type ecmaRegexp struct{ re *regexp2.Regexp }

func (r ecmaRegexp) MatchString(s string) bool {
	ok, err := r.re.MatchString(s)
	return err == nil && ok
}

func (r ecmaRegexp) String() string { return r.re.String() }

func manifestSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("testdata/manifest.schema.1.0.0.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.UseRegexpEngine(func(s string) (jsonschema.Regexp, error) {
		re, err := regexp2.Compile(s, regexp2.ECMAScript)
		if err != nil {
			return nil, err
		}
		return ecmaRegexp{re}, nil
	})
	if err := c.AddResource("manifest.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("manifest.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// yamlToJSONValue decodes YAML into the value shape jsonschema validates.
func yamlToJSONValue(t *testing.T, y []byte) (any, map[string]any) {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(y, &m); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return v, m
}

func TestManifestValidates(t *testing.T) {
	sch := manifestSchema(t)
	raw, err := os.ReadFile("../../manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v, m := yamlToJSONValue(t, raw)
	if err := sch.Validate(v); err != nil {
		t.Fatalf("manifest.yaml does not match Slack's schema: %v", err)
	}

	settings := m["settings"].(map[string]any)
	if settings["socket_mode_enabled"] != true {
		t.Error("socket_mode_enabled is not true")
	}
	if settings["interactivity"].(map[string]any)["is_enabled"] != true {
		t.Error("interactivity is not enabled")
	}
	// Scopes and event subscriptions are derived from the code and checked
	// against this file in bot/scopes_test.go.
	features := m["features"].(map[string]any)
	if cmd := features["slash_commands"].([]any)[0].(map[string]any)["command"]; cmd != "/bobbin" {
		t.Errorf("slash command = %v, want /bobbin", cmd)
	}
	// Slack's agent messaging experience (apps created today can only
	// have it): a description, at most 4 prompts, and the events it needs;
	// assistant_thread_started is what the manifest editor warns against.
	av, ok := features["agent_view"].(map[string]any)
	if !ok {
		t.Fatal("agent_view missing")
	}
	if _, ok := features["assistant_view"]; ok {
		t.Error("manifest.yaml has assistant_view too: new apps get agent_view only")
	}
	if d, _ := av["agent_description"].(string); d == "" || len([]rune(d)) > 300 {
		t.Errorf("agent_view.agent_description = %q, want 1–300 characters", d)
	}
	if p, _ := av["suggested_prompts"].([]any); len(p) == 0 || len(p) > 4 {
		t.Errorf("agent_view has %d suggested prompts, want 1–4", len(p))
	}
	events := map[string]bool{}
	for _, e := range settings["event_subscriptions"].(map[string]any)["bot_events"].([]any) {
		events[e.(string)] = true
	}
	for _, e := range []string{"app_home_opened", "app_context_changed", "agent_session_stopped", "agent_session_title_changed"} {
		if !events[e] {
			t.Errorf("manifest.yaml does not subscribe to %s, which agent view needs", e)
		}
	}
	if events["assistant_thread_started"] {
		t.Error("manifest.yaml subscribes to assistant_thread_started, which agent view should not use")
	}
}

// TestManifestSchemaRejects shows the validator is live: the upstream valid
// manifest passes and broken variants fail.
func TestManifestSchemaRejects(t *testing.T) {
	sch := manifestSchema(t)
	good, err := os.ReadFile("testdata/manifest.v1.valid.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Fatalf("upstream valid manifest rejected: %v", err)
	}
	bad := map[string]string{
		"command without slash": `{"display_information":{"name":"x"},"features":{"slash_commands":[{"command":"bobbin","description":"d"}]}}`,
		"unknown setting":       `{"display_information":{"name":"x"},"settings":{"socket_mode":true}}`,
		"no name":               `{"display_information":{}}`,
	}
	for name, doc := range bad {
		t.Run(name, func(t *testing.T) {
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(doc)))
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(v); err == nil {
				t.Errorf("schema accepted %s", doc)
			}
		})
	}
}

// TestManifestSlackMCPScopes: the manifest declares, as optional user
// scopes, exactly the scopes the Slack MCP preset asks a person for (the
// app's client can only ask for scopes the app declares).
func TestManifestSlackMCPScopes(t *testing.T) {
	raw, err := os.ReadFile("../../manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		OAuth struct {
			Scopes struct {
				UserOptional []string `yaml:"user_optional"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
	}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	got, want := slices.Sorted(slices.Values(m.OAuth.Scopes.UserOptional)), slices.Sorted(slices.Values(mcp.SlackScopes))
	if !slices.Equal(got, want) {
		t.Errorf("manifest.yaml user_optional = %v; want the Slack MCP preset's scopes %v", got, want)
	}
}
