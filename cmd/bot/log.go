package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
)

const redacted = "[REDACTED]"

// secretKeys are attribute-key fragments whose values are never logged.
var secretKeys = []string{"token", "authorization", "secret", "password", "passwd", "api_key", "apikey", "cookie", "credential"}

// secretPatterns match credentials that may hide inside free text (error
// messages, URLs).
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`xox[abposre]-[A-Za-z0-9-]+`),
	regexp.MustCompile(`xoxe\.[A-Za-z0-9.-]+`),
	regexp.MustCompile(`xapp-[A-Za-z0-9-]+`),
	regexp.MustCompile(`(?i)bearer\s+[A-Za-z0-9._~+/=-]+`),
	regexp.MustCompile(`(?i)ticket=[^\s&"]+`),
	// Credential-looking query parameters, wherever they appear: token=,
	// access_token=, client_secret=, ?key=, &sig=, &code= (OAuth), ….
	regexp.MustCompile(`(?i)(token|api_key|apikey|access_key|secret|password|passwd|pwd|credential|signature)=[^\s&"']+`),
	regexp.MustCompile(`(?i)([?&;](key|sig|auth|code|jwt|session|sessionid|session_id|x-amz-[a-z-]+))=[^\s&"']+`),
	// Userinfo in a URL, with or without a password.
	regexp.MustCompile(`://[^/\s:@"']+:[^/\s@"']+@`),
	regexp.MustCompile(`://[^/\s:@"'?#]+@`),
	regexp.MustCompile(`sk-[A-Za-z0-9_-]{16,}`),
}

// scrub replaces every credential-looking substring of s.
func scrub(s string) string {
	for _, re := range secretPatterns {
		s = re.ReplaceAllString(s, redacted)
	}
	return s
}

// newLogger returns the process logger: JSON (or text) at level, every
// record passed through the redacting handler.
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if format == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(redactHandler{h})
}

// redactHandler scrubs secrets from messages and attributes before the
// inner handler sees them: values under secret-looking keys are replaced,
// and token patterns in any string value are masked.
type redactHandler struct{ inner slog.Handler }

func (h redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h redactHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, scrub(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = redactAttr(a)
	}
	return redactHandler{h.inner.WithAttrs(clean)}
}

func (h redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{h.inner.WithGroup(name)}
}

func secretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range secretKeys {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

func redactAttr(a slog.Attr) slog.Attr {
	if secretKey(a.Key) {
		return slog.String(a.Key, redacted)
	}
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, scrub(v.String()))
	case slog.KindDuration:
		// slog's JSON handler writes durations as integer nanoseconds;
		// people read "1.5s".
		return slog.String(a.Key, v.Duration().String())
	case slog.KindGroup:
		g := v.Group()
		clean := make([]any, len(g))
		for i, ga := range g {
			clean[i] = redactAttr(ga)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, scrub(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, scrub(x.String()))
		case []byte:
			return slog.String(a.Key, scrub(string(x)))
		default:
			return slog.String(a.Key, scrub(fmt.Sprintf("%+v", x)))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
