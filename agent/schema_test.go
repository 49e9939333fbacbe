package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
	pt "github.com/bobbinbot/bobbin/provider/providertest"
)

func TestValidateArgs(t *testing.T) {
	const strict = `{"type":"object","properties":{"path":{"type":"string","minLength":1},"n":{"type":"integer"}},"required":["path"],"additionalProperties":false}`
	tests := []struct {
		name, schema, args string
		wantErr            string // "" means valid
		wantArgs           string
	}{
		{"valid", strict, `{"path":"/tmp","n":2}`, "", `{"path":"/tmp","n":2}`},
		{"missing required", strict, `{"n":2}`, "path", ""},
		{"wrong type", strict, `{"path":"/x","n":"two"}`, "/n", ""},
		{"extra property", strict, `{"path":"/x","rm":true}`, "rm", ""},
		{"not json", strict, `{"path":`, "not valid JSON", ""},
		{"not an object", strict, `["path"]`, "JSON object", ""},
		{"empty arguments mean {}", `{"type":"object"}`, ``, "", `{}`},
		{"empty schema", ``, `{"a":1}`, "", `{"a":1}`},
		{"draft-07 schema", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","required":["q"]}`, `{}`, "q", ""},
		// A reference we must not fetch: the schema is unusable, so only
		// the object check applies.
		{"external ref is not fetched", `{"$ref":"https://example.invalid/schema.json"}`, `{"x":1}`, "", `{"x":1}`},
		{"broken schema", `{"type":12}`, `{"x":1}`, "", `{"x":1}`},
	}
	c := newSchemaCache()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.validateArgs(json.RawMessage(tc.schema), tc.args)
			if tc.wantErr == "" {
				if err != nil || string(got) != tc.wantArgs {
					t.Errorf("validateArgs(%s) = %s, %v; want %s", tc.args, got, err, tc.wantArgs)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("validateArgs(%s) error %v; want one mentioning %q", tc.args, err, tc.wantErr)
			}
		})
	}
	// Compiled once per distinct schema.
	if n := len(c.schemas); n != 5 {
		t.Errorf("%d compiled schemas cached, want 5", n)
	}
}

func TestToolIDsAndDuplicates(t *testing.T) {
	first := echoTool("dup")
	second := &fakeTool{name: "dup", schema: `{"type":"object"}`}
	h := []provider.Message{user("x")}
	e := newEnv(t, Options{}, h, pt.ToolCalls(pt.Call("", "dup", `{}`), pt.Call("", "dup", `{"q":"2"}`)), pt.Text("ok"))
	res, err := e.agent.Run(t.Context(), e.turn(h, hinted{first, allowAll}, hinted{second, allowAll}))
	if err != nil {
		t.Fatal(err)
	}
	if first.calls.Load() != 2 || second.calls.Load() != 0 {
		t.Errorf("first ran %d, second %d; want the first of duplicate names only", first.calls.Load(), second.calls.Load())
	}
	if n := len(e.p.Requests()[0].Tools); n != 1 {
		t.Errorf("%d tools offered", n)
	}
	ids := map[string]bool{}
	for _, c := range res.Messages[1].ToolCalls {
		if c.ID == "" || ids[c.ID] {
			t.Errorf("call id %q missing or repeated", c.ID)
		}
		ids[c.ID] = true
	}
	checkConsistent(t, res.Messages)
}

// TestUnusableSchemaWarnedOnce: a tool whose schema does not compile is
// reported when it is compiled, not on every call.
func TestUnusableSchemaWarnedOnce(t *testing.T) {
	var logs strings.Builder
	broken := &fakeTool{name: "broken", schema: `{"type":12}`, fn: func(context.Context, json.RawMessage) (string, error) { return "ok", nil }}
	h := []provider.Message{user("x")}
	e := newEnv(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, h,
		pt.ToolCalls(pt.Call("1", "broken", `{"a":1}`), pt.Call("2", "broken", `{"a":2}`)), pt.Text("ok"))
	if _, err := e.agent.Run(t.Context(), e.turn(h, hinted{broken, allowAll})); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "schema unusable"); n != 1 {
		t.Errorf("%d warnings about the unusable schema over 2 calls, want 1; logs:\n%s", n, logs.String())
	}
}
