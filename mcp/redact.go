package mcp

import (
	"net/url"
	"regexp"
	"strings"
)

// Registered and configured server URLs may carry credentials in their
// query string (?key=…, ?token=…) or userinfo. go-sdk and net/http quote the
// full URL in their errors, and those errors reach logs, /bobbin mcp list,
// the admin's answer to /bobbin mcp add and the model (tool errors). So
// every error leaving this package for an HTTP server has its URLs cut to
// scheme, host and path.

// urlInText finds URLs inside error text.
var urlInText = regexp.MustCompile(`(?i)\b(?:https?|wss?)://[^\s"'<>\x60]+`)

// RedactURL returns raw without userinfo, query and fragment, for showing
// and logging: "https://host/mcp?…" when a query was cut.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		// Not parseable as a URL: keep what precedes any userinfo or query.
		s := raw
		if i := strings.IndexAny(s, "?#"); i >= 0 {
			s = s[:i]
		}
		if i := strings.LastIndex(s, "@"); i >= 0 {
			if j := strings.Index(s, "://"); j >= 0 && j < i {
				s = s[:j+3] + s[i+1:]
			}
		}
		return s
	}
	cut := u.RawQuery != "" || u.ForceQuery
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	s := u.String()
	if cut {
		s += "?…"
	}
	return s
}

// redactURLs applies RedactURL to every URL in s.
func redactURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, func(m string) string {
		// A URL quoted with %q ends before the quote; a trailing
		// punctuation mark belongs to the sentence.
		trail := ""
		for len(m) > 0 && strings.ContainsRune(".,;:)]}", rune(m[len(m)-1])) {
			trail = m[len(m)-1:] + trail
			m = m[:len(m)-1]
		}
		return RedactURL(m) + trail
	})
}

// redactedError is an error whose text has its URLs redacted; errors.Is
// and errors.As still see the original.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactErr returns err with the URLs in its text redacted (err itself
// when there is nothing to cut).
func redactErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := redactURLs(msg)
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}
