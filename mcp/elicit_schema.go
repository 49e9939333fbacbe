package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bobbinbot/bobbin/agent/ask"
)

// Field kinds of an elicitation form (ask's).
const (
	FieldString    = ask.FieldString
	FieldNumber    = ask.FieldNumber
	FieldInteger   = ask.FieldInteger
	FieldBoolean   = ask.FieldBoolean
	FieldEnum      = ask.FieldEnum
	FieldMultiEnum = ask.FieldMultiEnum
)

// ElicitSchema is a parsed requestedSchema.
type ElicitSchema struct {
	// Fields in a stable order: the schema's own order of properties
	// when it can be read, else by name.
	Fields []ElicitField
	// AsksForSecret is set when a field looks like a password, token or
	// key: servers must not ask those in forms, so the bot warns.
	AsksForSecret bool
}

// ElicitOption is one enum choice (the bot's too: ask.Option).
type ElicitOption = ask.Option

// ElicitField is one form field (the bot's too: ask.Field).
type ElicitField = ask.Field

type rawProp struct {
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Format      string          `json:"format"`
	Default     json.RawMessage `json:"default"`
	MinLength   *int            `json:"minLength"`
	MaxLength   *int            `json:"maxLength"`
	Minimum     *float64        `json:"minimum"`
	Maximum     *float64        `json:"maximum"`
	MinItems    *int            `json:"minItems"`
	MaxItems    *int            `json:"maxItems"`
	Enum        []any           `json:"enum"`
	EnumNames   []string        `json:"enumNames"`
	OneOf       []rawConst      `json:"oneOf"`
	AnyOf       []rawConst      `json:"anyOf"`
	Items       *rawProp        `json:"items"`
	WriteOnly   bool            `json:"writeOnly"`
	Properties  json.RawMessage `json:"properties"`
}

type rawConst struct {
	Const any    `json:"const"`
	Title string `json:"title"`
}

// ParseElicitSchema reads a form's requestedSchema (any JSON value go-sdk
// decoded, or json.RawMessage) into fields. It refuses what the spec does
// not allow in forms: nesting, arrays of anything but enums, unknown types.
func ParseElicitSchema(schema any) (*ElicitSchema, error) {
	var raw []byte
	switch s := schema.(type) {
	case nil:
		return nil, errors.New("no schema")
	case json.RawMessage:
		raw = s
	case []byte:
		raw = s
	default:
		var err error
		if raw, err = json.Marshal(s); err != nil {
			return nil, err
		}
	}
	var root struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if root.Type != "object" {
		return nil, fmt.Errorf("schema type must be object, got %q", root.Type)
	}
	if len(root.Properties) > 50 {
		return nil, errors.New("schema has more than 50 fields")
	}
	out := &ElicitSchema{}
	for _, name := range propertyOrder(raw, root.Properties) {
		var p rawProp
		if err := json.Unmarshal(root.Properties[name], &p); err != nil {
			return nil, fmt.Errorf("field %s: %w", name, err)
		}
		f, err := parseField(name, p)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", name, err)
		}
		f.Required = slices.Contains(root.Required, name)
		out.AsksForSecret = out.AsksForSecret || f.Sensitive
		out.Fields = append(out.Fields, f)
	}
	return out, nil
}

// propertyOrder returns the properties' names in document order (forms
// read best as the server wrote them); by name if that cannot be read.
func propertyOrder(raw []byte, props map[string]json.RawMessage) []string {
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return names
	}
	dec := json.NewDecoder(strings.NewReader(string(top["properties"])))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return names
	}
	var order []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return names
		}
		k, _ := t.(string)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return names
		}
		if _, ok := props[k]; ok && !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	if len(order) != len(names) {
		return names
	}
	return order
}

func parseField(name string, p rawProp) (ElicitField, error) {
	f := ElicitField{Name: name, Title: p.Title, Description: p.Description, Format: p.Format,
		MinLength: p.MinLength, MaxLength: p.MaxLength, Minimum: p.Minimum, Maximum: p.Maximum,
		MinItems: p.MinItems, MaxItems: p.MaxItems}
	if len(p.Properties) > 0 {
		return f, errors.New("nested objects are not allowed")
	}
	f.Sensitive = p.WriteOnly || p.Format == "password" || ask.LooksSecret(name) || ask.LooksSecret(p.Title)
	switch p.Type {
	case "string":
		switch {
		case len(p.OneOf) > 0:
			f.Kind = FieldEnum
			for _, c := range p.OneOf {
				v, ok := c.Const.(string)
				if !ok || v == "" || c.Title == "" {
					return f, errors.New("oneOf entries need a string const and a title")
				}
				f.Options = append(f.Options, ElicitOption{Value: v, Title: c.Title})
			}
		case len(p.Enum) > 0:
			f.Kind = FieldEnum
			if len(p.EnumNames) > 0 && len(p.EnumNames) != len(p.Enum) {
				return f, errors.New("enumNames and enum differ in length")
			}
			for i, e := range p.Enum {
				v, ok := e.(string)
				if !ok {
					return f, errors.New("enum values must be strings")
				}
				o := ElicitOption{Value: v}
				if len(p.EnumNames) > 0 {
					o.Title = p.EnumNames[i]
				}
				f.Options = append(f.Options, o)
			}
		default:
			f.Kind = FieldString
			switch p.Format {
			case "", "email", "uri", "date", "date-time":
			case "password":
				f.Format = ""
			default:
				return f, fmt.Errorf("unsupported string format %q", p.Format)
			}
		}
	case "number", "integer", "boolean":
		f.Kind = p.Type
	case "array":
		f.Kind = FieldMultiEnum
		if p.Items == nil {
			return f, errors.New("array fields need items with enum or anyOf")
		}
		switch {
		case len(p.Items.AnyOf) > 0:
			for _, c := range p.Items.AnyOf {
				v, ok := c.Const.(string)
				if !ok || v == "" || c.Title == "" {
					return f, errors.New("anyOf entries need a string const and a title")
				}
				f.Options = append(f.Options, ElicitOption{Value: v, Title: c.Title})
			}
		case len(p.Items.Enum) > 0:
			for _, e := range p.Items.Enum {
				v, ok := e.(string)
				if !ok {
					return f, errors.New("enum values must be strings")
				}
				f.Options = append(f.Options, ElicitOption{Value: v})
			}
		default:
			return f, errors.New("array fields need items with enum or anyOf")
		}
	default:
		return f, fmt.Errorf("unsupported type %q", p.Type)
	}
	if len(p.Default) > 0 && string(p.Default) != "null" {
		d, err := decodeDefault(f, p.Default)
		if err != nil {
			return f, fmt.Errorf("default: %w", err)
		}
		f.Default = d
	}
	return f, nil
}

func decodeDefault(f ElicitField, raw json.RawMessage) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	if f.Kind == FieldMultiEnum {
		arr, ok := v.([]any)
		if !ok {
			return nil, errors.New("must be a list")
		}
		out := make([]string, 0, len(arr))
		for _, x := range arr {
			s, ok := x.(string)
			if !ok {
				return nil, errors.New("must be a list of strings")
			}
			out = append(out, s)
		}
		v = out
	}
	if err := checkValue(f, v); err != nil {
		return nil, err
	}
	return v, nil
}

// ValidateElicitContent checks a form answer against its schema and
// returns a message per failing field ("" key: the answer as a whole),
// for the modal's field errors. Values are string, number (float64, int,
// int64, json.Number), bool or []string.
func ValidateElicitContent(s *ElicitSchema, content map[string]any) map[string]string {
	errs := map[string]string{}
	if s == nil {
		return errs
	}
	known := map[string]bool{}
	for _, f := range s.Fields {
		known[f.Name] = true
		v, ok := content[f.Name]
		if !ok || v == nil {
			// go-sdk validates before filling defaults: a required field
			// must be sent even when it has a default (the form shows it
			// pre-filled).
			if f.Required {
				errs[f.Name] = "This field is required."
			}
			continue
		}
		if err := checkValue(f, v); err != nil {
			errs[f.Name] = err.Error()
		}
	}
	for k := range content {
		if !known[k] {
			errs[""] = fmt.Sprintf("unknown field %q", k)
		}
	}
	return errs
}

func checkValue(f ElicitField, v any) error {
	switch f.Kind {
	case FieldString:
		s, ok := v.(string)
		if !ok {
			return fieldErr("Enter text.")
		}
		n := utf8.RuneCountInString(s)
		if f.MinLength != nil && n < *f.MinLength {
			return fieldErrf("Enter at least %d characters.", *f.MinLength)
		}
		if f.MaxLength != nil && n > *f.MaxLength {
			return fieldErrf("Enter at most %d characters.", *f.MaxLength)
		}
		if s == "" {
			return nil
		}
		switch f.Format {
		case "email":
			if a, err := mail.ParseAddress(s); err != nil || a.Address != s {
				return fieldErr("Enter an email address.")
			}
		case "uri":
			if u, err := url.Parse(s); err != nil || u.Scheme == "" {
				return fieldErr("Enter a URL.")
			}
		case "date":
			if _, err := time.Parse("2006-01-02", s); err != nil {
				return fieldErr("Enter a date as YYYY-MM-DD.")
			}
		case "date-time":
			if _, err := time.Parse(time.RFC3339, s); err != nil {
				return fieldErr("Enter a date and time (RFC 3339).")
			}
		}
	case FieldNumber, FieldInteger:
		x, ok := ask.Number(v)
		if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
			return fieldErr("Enter a number.")
		}
		if f.Kind == FieldInteger && x != math.Trunc(x) {
			return fieldErr("Enter a whole number.")
		}
		if f.Minimum != nil && x < *f.Minimum {
			return fieldErrf("Enter %s or more.", fmtNum(*f.Minimum))
		}
		if f.Maximum != nil && x > *f.Maximum {
			return fieldErrf("Enter %s or less.", fmtNum(*f.Maximum))
		}
	case FieldBoolean:
		if _, ok := v.(bool); !ok {
			return fieldErr("Choose yes or no.")
		}
	case FieldEnum:
		s, ok := v.(string)
		if !ok || !f.HasOption(s) {
			return fieldErr("Choose one of the options.")
		}
	case FieldMultiEnum:
		var list []string
		switch x := v.(type) {
		case []string:
			list = x
		case []any:
			for _, e := range x {
				s, ok := e.(string)
				if !ok {
					return fieldErr("Choose from the options.")
				}
				list = append(list, s)
			}
		default:
			return fieldErr("Choose from the options.")
		}
		for _, s := range list {
			if !f.HasOption(s) {
				return fieldErr("Choose from the options.")
			}
		}
		if f.MinItems != nil && len(list) < *f.MinItems {
			return fieldErrf("Choose at least %d.", *f.MinItems)
		}
		if f.MaxItems != nil && len(list) > *f.MaxItems {
			return fieldErrf("Choose at most %d.", *f.MaxItems)
		}
	}
	return nil
}

func fmtNum(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// ParseElicitValue converts what a person typed into a text or number
// input into the field's type ("" is no value: nil).
func ParseElicitValue(f ElicitField, text string) (any, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, nil
	}
	switch f.Kind {
	case FieldNumber, FieldInteger:
		x, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fieldErr("Enter a number.")
		}
		if f.Kind == FieldInteger {
			if x != math.Trunc(x) {
				return nil, fieldErr("Enter a whole number.")
			}
			return int64(x), nil
		}
		return x, nil
	case FieldBoolean:
		switch strings.ToLower(text) {
		case "true", "yes":
			return true, nil
		case "false", "no":
			return false, nil
		}
		return nil, fieldErr("Choose yes or no.")
	}
	return text, nil
}

// checkElicitURL accepts only absolute http(s) URLs for URL mode.
func checkElicitURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.New("URL elicitation needs an absolute https URL")
	}
	return nil
}

// fieldErr is a message for a person filling in a form (a sentence, so
// capitalised and punctuated, unlike Go error strings).
type fieldErr string

func (e fieldErr) Error() string { return string(e) }

func fieldErrf(format string, a ...any) error { return fieldErr(fmt.Sprintf(format, a...)) }
