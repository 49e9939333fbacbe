package playground

import (
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// Slack is what the page may do in the emulator (*slackemu.Server): act
// as a person in a Slack client and read what that person would see,
// plus the journal of the bot's Web API calls for the side panel.
//
// Keep it to that. The emulator's test controls — fault injection, rate
// limit changes, token minting and revocation, installs, forged or
// replayed envelopes, socket sabotage — must never be added here:
// slack_test.go fails on any method outside its allowed list.
type Slack interface {
	// Acting as a person.
	Post(p slackemu.UserPost) (slackemu.Posted, error)
	SlashCommand(team, channel, user, command, text string) *slackemu.Interaction
	Click(team, user, channel, messageTS, actionID, value string) (*slackemu.Interaction, error)
	ClickView(team, user, viewID, actionID, value string) (*slackemu.Interaction, error)
	// ClickFeedback presses 👍 (positive) or 👎 of a message's
	// feedback_buttons.
	ClickFeedback(team, user, channel, messageTS, actionID string, positive bool) (*slackemu.Interaction, error)
	// SubmitViewInputs submits a form with each input in its element's
	// shape (checkboxes and multi-selects as lists), as a Slack client does.
	SubmitViewInputs(team, user, viewID string, values map[string]any) (*slackemu.Interaction, error)
	CloseView(team, user, viewID string) error
	React(channel, ts, user, name string, add bool) error
	AssistantThreadStarted(team, user, dmChannel, contextChannel string) slackemu.Posted

	// Seeing what that person sees.
	Messages(channel string) []slackemu.Message
	Thread(channel, threadTS string) []slackemu.Message
	Ephemerals(user string) []slackemu.Ephemeral
	Views(team, user string) []slackemu.View
	AssistantStatuses() []slackemu.AssistantStatus
	FileMeta(id string) (slackemu.File, bool)
	FileInfo(id string) (slackemu.File, bool)
	Failures() []slackemu.Failure
	LiveConnections() int

	// Following changes and the bot's calls.
	Changed() <-chan struct{}
	JournalSince(seq uint64, limit int) []slackemu.Call
}

var _ Slack = (*slackemu.Server)(nil)
