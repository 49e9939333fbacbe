// Package shape holds the request shaping that provider/openai and
// provider/anthropic must do identically, so a conversation reads the same
// to the model whichever protocol carries it.
//
// shape may import provider; it must not import agent, bot, session, mcp or
// any third-party package.
package shape

import (
	"strings"

	"github.com/bobbinbot/bobbin/provider"
)

// SpeakerPrefix names who wrote a user message, since several people may
// talk in one Slack thread: "[Alice (U123)] ", "[Alice] ", "[U123] ", or ""
// when neither is known.
func SpeakerPrefix(m provider.Message) string {
	switch {
	case m.UserName != "" && m.UserID != "":
		return "[" + m.UserName + " (" + m.UserID + ")] "
	case m.UserName != "":
		return "[" + m.UserName + "] "
	case m.UserID != "":
		return "[" + m.UserID + "] "
	}
	return ""
}

// Join appends a part's text to a message's text with a blank line between
// them; either may be empty.
func Join(text, part string) string {
	switch {
	case part == "":
		return text
	case text == "":
		return part
	}
	return text + "\n\n" + part
}

// FileName is the name a provider sends for a part's file: the person's
// file name without control characters or path separators, or def.
func FileName(p provider.Part, def string) string {
	if p.File == nil {
		return def
	}
	name := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' {
			return '_'
		}
		return r
	}, strings.TrimSpace(p.File.Name))
	if name == "" {
		return def
	}
	return name
}
