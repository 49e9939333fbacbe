package playground

import (
	"reflect"
	"slices"
	"testing"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestSlackSurface: the page reaches the emulator only through Slack, and
// Slack holds only what a person in a Slack client does and sees. Adding
// a method here is a decision: say why in the interface's comment.
func TestSlackSurface(t *testing.T) {
	allowed := []string{
		"AssistantStatuses", "AssistantThreadStarted", "Changed", "Click", "ClickFeedback", "ClickView", "CloseView",
		"Ephemerals", "Failures", "FileInfo", "FileMeta", "JournalSince", "LiveConnections", "Messages",
		"Post", "React", "SlashCommand", "SubmitViewInputs", "Thread", "Views",
	}
	typ := reflect.TypeFor[Slack]()
	var got []string
	for i := range typ.NumMethod() {
		got = append(got, typ.Method(i).Name)
	}
	if !slices.Equal(got, allowed) {
		t.Errorf("Slack's methods are %v, want exactly %v", got, allowed)
	}
	// The emulator's test controls exist (so this list cannot rot) and
	// are not reachable.
	forbidden := []string{
		"InjectFault", "ClearFaults", "SetRateLimit", "RevokeToken", "Install", "Uninstall", "ExpireToken",
		"NewTrigger", "ExpireTrigger", "ExpireStream", "ClickRaw", "DeliverEvent", "DeliverEnvelope",
		"Redeliver", "Resend", "Disconnect", "DropConnections", "StopPinging", "PausePings", "SendRaw",
		"SetAckDropRate", "SetMaxSockets", "AddTeam", "AddUser", "SetConsent", "Leaks", "Journal",
	}
	emu := reflect.TypeFor[*slackemu.Server]()
	for _, name := range forbidden {
		if _, ok := emu.MethodByName(name); !ok {
			t.Errorf("slackemu.Server has no %s any more: update this list", name)
		}
		if _, ok := typ.MethodByName(name); ok {
			t.Errorf("the page can reach %s", name)
		}
	}
	// The server keeps the emulator only as Slack.
	for i := range reflect.TypeFor[Server]().NumField() {
		f := reflect.TypeFor[Server]().Field(i)
		if f.Type == emu {
			t.Errorf("Server.%s holds the emulator itself", f.Name)
		}
	}
}
