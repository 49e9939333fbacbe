// Package shape holds the request shaping that provider/openai and
// provider/anthropic must do identically, so a conversation reads the same
// to the model whichever protocol carries it.
//
// shape may import provider; it must not import agent, bot, session, mcp or
// any third-party package.
package shape

import "github.com/bobbinbot/bobbin/provider"

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
