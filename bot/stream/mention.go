package stream

import "strings"

// Mentions the bot writes into an answer itself (the footer's "Stopped
// by <@U…>") must reach Slack live, while everything else in the answer
// is escaped so the model and tools cannot mention anyone. Such a mention
// travels through the answer's Markdown masked between two private-use
// runes that escaping leaves alone, and is unmasked after rendering. The
// model's and tools' text never carries the mask runes (stripMasks).
const (
	maskOpen  = "\uE000"
	maskClose = "\uE001"
)

// MaskUser is a mention of user id to put into an answer's Markdown.
func MaskUser(id string) string { return maskOpen + id + maskClose }

// stripMasks removes the mask runes from text the bot did not write.
func stripMasks(s string) string {
	if !strings.ContainsAny(s, maskOpen+maskClose) {
		return s
	}
	return strings.NewReplacer(maskOpen, "", maskClose, "").Replace(s)
}

// unmaskMentions turns masked user ids in rendered text into mentions;
// a mask around anything but a user id (or cut by truncation) is dropped.
func unmaskMentions(s string) string {
	if !strings.Contains(s, maskOpen) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, maskOpen)
		if i < 0 {
			break
		}
		b.WriteString(s[:i])
		rest := s[i+len(maskOpen):]
		j := strings.Index(rest, maskClose)
		if j < 0 {
			s = rest
			continue
		}
		if id := rest[:j]; isUserID(id) {
			b.WriteString("<@" + id + ">")
		} else {
			b.WriteString(id)
		}
		s = rest[j+len(maskClose):]
	}
	b.WriteString(s)
	return stripMasks(b.String())
}

// isUserID reports whether s looks like a Slack user id (U… or W…).
func isUserID(s string) bool {
	if len(s) < 2 || len(s) > 20 || (s[0] != 'U' && s[0] != 'W') {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
