package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaCacheSize bounds the compiled-schema cache; tool sets are small and
// stable, so this only guards against unbounded growth.
const schemaCacheSize = 1024

// schemaCache compiles each distinct input schema once.
type schemaCache struct {
	mu      sync.Mutex
	schemas map[[32]byte]compiledSchema
}

type compiledSchema struct {
	sch *jsonschema.Schema // nil: the schema did not compile
	err error
}

func newSchemaCache() *schemaCache {
	return &schemaCache{schemas: make(map[[32]byte]compiledSchema)}
}

// noLoader refuses every external reference: a tool's schema must never make
// us fetch anything.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema reference %q not allowed", url)
}

// get returns the compiled schema; compiled reports that this call compiled
// it (so a problem with it is reported once, not on every call).
func (c *schemaCache) get(raw json.RawMessage) (cs compiledSchema, compiled bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	key := sha256.Sum256(raw)
	c.mu.Lock()
	cs, ok := c.schemas[key]
	c.mu.Unlock()
	if ok {
		return cs, false
	}
	cs = compileSchema(raw)
	c.mu.Lock()
	if len(c.schemas) >= schemaCacheSize {
		clear(c.schemas)
	}
	c.schemas[key] = cs
	c.mu.Unlock()
	return cs, true
}

func compileSchema(raw json.RawMessage) compiledSchema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return compiledSchema{err: fmt.Errorf("input schema is not JSON: %w", err)}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "mem:///tool-input.json"
	if err := c.AddResource(url, doc); err != nil {
		return compiledSchema{err: err}
	}
	sch, err := c.Compile(url)
	if err != nil {
		return compiledSchema{err: fmt.Errorf("input schema does not compile: %w", err)}
	}
	return compiledSchema{sch: sch}
}

// validateArgs checks a call's arguments: they must be a JSON object and, when
// the tool's schema compiles, valid against it. It returns the arguments to
// pass to the tool ("" becomes {}) and a problem description for the model.
func (c *schemaCache) validateArgs(schema json.RawMessage, args string) (json.RawMessage, error) {
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if _, ok := inst.(map[string]any); !ok {
		return nil, errors.New("arguments must be a JSON object")
	}
	cs, _ := c.get(schema)
	if cs.sch != nil {
		if err := cs.sch.Validate(inst); err != nil {
			var ve *jsonschema.ValidationError
			if errors.As(err, &ve) {
				return nil, fmt.Errorf("arguments do not match the input schema: %s", strings.TrimSpace(ve.Error()))
			}
			return nil, fmt.Errorf("arguments do not match the input schema: %v", err)
		}
	}
	return json.RawMessage(args), nil
}
