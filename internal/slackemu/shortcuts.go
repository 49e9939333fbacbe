package slackemu

// Shortcut is one of the app's configured shortcuts (manifest
// features.shortcuts).
type Shortcut struct {
	Name       string
	Type       string // "message" or "global"
	CallbackID string
}
