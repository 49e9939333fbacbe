package mrkdwn

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// String-level helpers moved from package bot (approval.go, command.go,
// elicit.go) unchanged; the Text constructors in text.go build on them.

// DateString renders t in each reader's time zone, with a UTC fallback.
func DateString(t time.Time) string {
	if t.IsZero() {
		t = time.Now()
	}
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

// InlineCode makes s safe inside `…`: escaped, without backticks.
func InlineCode(s string) string {
	return EscapeText(strings.ReplaceAll(s, "`", "'"))
}

// FenceSafe keeps a code block from being closed early by ``` inside it.
func FenceSafe(s string) string {
	return strings.ReplaceAll(s, "```", "`\u200b`\u200b`")
}

// TruncateAt returns the longest prefix of s of at most n bytes that ends
// at a line break when there is one, never inside a rune or an entity.
func TruncateAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if i := strings.LastIndexByte(s[:cut], '\n'); i > 0 {
		return s[:i+1]
	}
	if i := strings.LastIndexByte(s[:cut], '&'); i >= 0 && !strings.Contains(s[i:cut], ";") {
		cut = i
	}
	return s[:cut]
}

// Clip shortens s to n runes for echoing a mistake back.
func Clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// ClipRunes cuts s to at most n runes, ending with … when cut.
func ClipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
