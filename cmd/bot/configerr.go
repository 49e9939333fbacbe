package main

import (
	"errors"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v10"
)

// configError is every problem found at start-up, in the environment and
// in what it points at (Redis, MCP_CONFIG, HTTP_ADDR), so one start tells
// the operator everything to fix.
type configError struct{ problems []string }

func (e *configError) Error() string {
	return "configuration:\n  " + strings.Join(e.problems, "\n  ")
}

// problems collects configuration problems, at most one per variable: the
// first thing wrong with a variable is what to fix, and a follow-on check
// on its zero value ("must be at least 1024" after "must be a whole
// number") would only repeat it.
type problems struct {
	seen map[string]bool
	list []string
}

// add records msg unless the variable it starts with already has a
// problem. Messages without a leading variable name are always kept.
func (p *problems) add(msg string) {
	if v := leadingVar(msg); v != "" {
		if p.seen[v] {
			return
		}
		if p.seen == nil {
			p.seen = map[string]bool{}
		}
		p.seen[v] = true
	}
	p.list = append(p.list, msg)
}

// err is nil when nothing was recorded.
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &configError{problems: p.list}
}

// leadingVar is the environment variable name msg starts as a sentence
// with ("SECRET_KEY must be …"); "" when it starts otherwise. Item lists
// ("MCP_CONFIG: <file>: servers[0] …") are not sentences about the
// variable as a whole: each item is kept.
func leadingVar(msg string) string {
	end := strings.IndexFunc(msg, func(r rune) bool {
		return (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_'
	})
	switch {
	case end < 0:
		end = len(msg)
	case msg[end] != ' ':
		return ""
	}
	name := msg[:end]
	if name == "" || strings.Trim(name, "0123456789_") == "" {
		return ""
	}
	return name
}

// envProblems rewrites caarlos0/env's errors, which quote the value (a
// token, for all we know) and name Go fields and types, into one line per
// variable naming only the variable and what it must look like. It works
// from the struct's env tags, so every field of cfg gets it.
func envProblems(err error, cfg reflect.Type) []string {
	var list []error
	var agg env.AggregateError
	if errors.As(err, &agg) {
		list = agg.Errors
	} else {
		list = []error{err}
	}
	fields := envFields(cfg)
	var out []string
	for _, e := range list {
		var (
			parse    env.ParseError
			notSet   env.EnvVarIsNotSetError
			empty    env.EmptyEnvVarError
			loadFile env.LoadFileContentError
		)
		switch {
		case errors.As(e, &parse):
			name, ok := fields[parse.Name]
			if !ok {
				out = append(out, "an environment variable has a value that cannot be parsed")
				continue
			}
			out = append(out, name+" "+expected(parse.Type))
		case errors.As(e, &notSet):
			out = append(out, notSet.Key+" is required")
		case errors.As(e, &empty):
			out = append(out, empty.Key+" must not be empty")
		case errors.As(e, &loadFile):
			out = append(out, loadFile.Key+" names a file that cannot be read")
		default:
			// Programming errors (unsupported field type or tag): no
			// value in them.
			out = append(out, "configuration: "+e.Error())
		}
	}
	return out
}

// envFields maps Go field names of t (a struct, walked into nested
// structs) to their environment variable names.
func envFields(t reflect.Type) map[string]string {
	out := map[string]string{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("env")
			name, _, _ := strings.Cut(tag, ",")
			if name != "" {
				out[f.Name] = prefix + name
				continue
			}
			if ft := f.Type; ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() && ft != reflect.TypeFor[url.URL]() {
				walk(ft, prefix+f.Tag.Get("envPrefix"))
			}
		}
	}
	walk(t, "")
	return out
}

// expected says what a value of type t must look like.
func expected(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "must be a duration such as 30s, 5m or 1h"
	case t == reflect.TypeFor[url.URL]():
		return "must be a URL"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "must be true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "must be a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "must be a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "must be a number"
	case reflect.Slice:
		return "must be a comma-separated list of " + plural(t.Elem())
	}
	return "has a value that cannot be parsed"
}

// plural names values of t for a list ("whole numbers").
func plural(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "durations such as 30s"
	case t == reflect.TypeFor[url.URL]():
		return "URLs"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false values"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole numbers"
	case reflect.Float32, reflect.Float64:
		return "numbers"
	}
	return "values"
}

// validPort reports whether s is a TCP port number (0 picks a free one).
func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && n <= 65535
}
