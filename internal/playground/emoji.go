package playground

import "regexp"

// emojiNames maps the emoji short names Bobbin and people commonly use to
// their characters; others stay as ":name:", as Slack shows unknown ones.
var emojiNames = map[string]string{
	"+1": "👍", "thumbsup": "👍", "-1": "👎", "white_check_mark": "✅", "heavy_check_mark": "✔️",
	"x": "❌", "warning": "⚠️", "no_entry": "⛔", "no_entry_sign": "🚫", "lock": "🔒", "unlock": "🔓",
	"key": "🔑", "mag": "🔍", "hourglass": "⌛", "hourglass_flowing_sand": "⏳", "black_square_for_stop": "⏹️",
	"eyes": "👀", "tada": "🎉", "heart": "❤️", "rocket": "🚀", "wrench": "🔧", "hammer_and_wrench": "🛠️",
	"memo": "📝", "thinking_face": "🤔", "robot_face": "🤖", "octagonal_sign": "🛑", "information_source": "ℹ️",
	"bulb": "💡", "link": "🔗", "gear": "⚙️", "package": "📦", "page_facing_up": "📄", "clipboard": "📋",
	"arrows_counterclockwise": "🔄", "repeat": "🔁", "stopwatch": "⏱️", "zap": "⚡", "fire": "🔥",
	"smile": "😄", "slightly_smiling_face": "🙂", "wave": "👋", "pray": "🙏", "raised_hands": "🙌",
	"sparkles": "✨", "star": "⭐", "question": "❓", "exclamation": "❗", "red_circle": "🔴",
	"large_green_circle": "🟢", "large_yellow_circle": "🟡",
}

var emojiRE = regexp.MustCompile(`:([a-z0-9_+\-]{1,64}):`)

// withEmoji replaces known :short_names: in plain text.
func withEmoji(s string) string {
	if len(s) < 3 {
		return s
	}
	return emojiRE.ReplaceAllStringFunc(s, func(m string) string {
		if e, ok := emojiNames[m[1:len(m)-1]]; ok {
			return e
		}
		return m
	})
}

// emojiChar is a reaction's character, or ":name:" when unknown.
func emojiChar(name string) string {
	if e, ok := emojiNames[name]; ok {
		return e
	}
	return ":" + name + ":"
}
