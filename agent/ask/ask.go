// Package ask is the vocabulary of the forms a tool's server asks a person
// to fill in (MCP elicitation): the fields, their choices and what looks
// like a secret. mcp parses a server's schema into it and bot renders and
// stores it, so both use this one definition and nothing converts between
// them.
package ask

import (
	"encoding/json"
	"regexp"
	"slices"
)

// Field kinds of a form (the flat schema of the MCP spec: primitives and
// enums, SEP-1330).
const (
	FieldString  = "string"
	FieldNumber  = "number"
	FieldInteger = "integer"
	FieldBoolean = "boolean"
	// FieldEnum is a single choice; FieldMultiEnum several.
	FieldEnum      = "enum"
	FieldMultiEnum = "multi_enum"
)

// Field is one form field. Its JSON form is stored with questions
// (session), so its names are extended, never renamed.
type Field struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Kind        string `json:"kind"`
	// Format is "", "email", "uri", "date" or "date-time" (strings).
	Format   string `json:"format,omitempty"`
	Required bool   `json:"required,omitempty"`
	// Default is the pre-filled value (string, float64, bool or
	// []string), nil when none.
	Default any `json:"default,omitempty"`
	// MinLength/MaxLength (strings), Minimum/Maximum (numbers) and
	// MinItems/MaxItems (multi enums) are nil when absent.
	MinLength *int     `json:"min_length,omitempty"`
	MaxLength *int     `json:"max_length,omitempty"`
	Minimum   *float64 `json:"minimum,omitempty"`
	Maximum   *float64 `json:"maximum,omitempty"`
	MinItems  *int     `json:"min_items,omitempty"`
	MaxItems  *int     `json:"max_items,omitempty"`
	Options   []Option `json:"options,omitempty"`
	// Sensitive is set for fields whose answer must not be shown back
	// (writeOnly, format password, or a name that LooksSecret).
	Sensitive bool `json:"sensitive,omitempty"`
}

// Option is one choice of an enum; Title is "" when untitled.
type Option struct {
	Value string `json:"value"`
	Title string `json:"title,omitempty"`
}

// HasOption reports whether v is the value of one of f's choices.
func (f Field) HasOption(v string) bool {
	return slices.ContainsFunc(f.Options, func(o Option) bool { return o.Value == v })
}

// secretLike matches names and titles that suggest a password, token,
// key or other credential.
var secretLike = regexp.MustCompile(`(?i)(pass(word|wd|phrase|code)?|secret|token|api[-_ ]?key|private[-_ ]?key|access[-_ ]?key|credential|\bpin\b|otp|cvv|cvc|card[-_ ]?number|ssn|iban)`)

// LooksSecret reports whether a field name or title suggests a secret:
// servers must not ask for those in forms, and their answers are never
// shown back.
func LooksSecret(s string) bool { return secretLike.MatchString(s) }

// Number reads a number of a form: a default or an answer, as JSON
// decoding (float64, json.Number) or Go code (int, int64, float32) made it.
func Number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}
