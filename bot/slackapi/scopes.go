package slackapi

import (
	"maps"
	"slices"
	"strings"
)

// The bot-token scopes the bot needs follow from what it does: the Web API
// methods it calls, the events it handles and the app features it uses.
// These tables are that knowledge in one place. scopes_test.go finds the
// slack-go methods the bot's sources call and checks that each has a row
// here, that every row is called, and that manifest.yaml asks for exactly
// the scopes they add up to; Authenticate warns at start-up when the
// installed token lacks one. Calling another Slack method means adding its
// row here (and its scopes to manifest.yaml when they are new).

// webMethod is one Slack Web API method the bot calls: the slack-go
// *slack.Client methods it calls it with and the bot-token scopes the bot's
// use of it needs (Slack's documented requirement; none for methods that
// need no scope). Where Slack accepts one scope per conversation type, the
// row lists the types the bot works in.
type WebMethod struct {
	Name   string   // the Web API method (methods.go)
	GoAPI  []string // the slack-go *Client methods that call it
	Scopes []string // the bot scopes it needs
}

var webMethods = []WebMethod{
	{"auth.test", []string{"AuthTest", "AuthTestContext"}, nil},
	// Socket Mode's own call, made with the app-level token at start-up
	// (connections:write is an app-token scope, not a bot scope).
	{"apps.connections.open", []string{"StartSocketMode", "StartSocketModeContext"}, nil},
	{"chat.postMessage", []string{"PostMessage", "PostMessageContext", "SendMessage", "SendMessageContext"}, []string{"chat:write"}},
	{"chat.update", []string{"UpdateMessage", "UpdateMessageContext"}, []string{"chat:write"}},
	{"chat.delete", []string{"DeleteMessage", "DeleteMessageContext"}, []string{"chat:write"}},
	{"chat.postEphemeral", []string{"PostEphemeral", "PostEphemeralContext"}, []string{"chat:write"}},
	{"chat.startStream", []string{"StartStream", "StartStreamContext"}, []string{"chat:write"}},
	{"chat.appendStream", []string{"AppendStream", "AppendStreamContext"}, []string{"chat:write"}},
	{"chat.stopStream", []string{"StopStream", "StopStreamContext"}, []string{"chat:write"}},
	{"assistant.threads.setStatus", []string{"SetAssistantThreadsStatus", "SetAssistantThreadsStatusContext"}, []string{"assistant:write"}},
	{"assistant.threads.setSuggestedPrompts", []string{"SetAssistantThreadsSuggestedPrompts", "SetAssistantThreadsSuggestedPromptsContext"}, []string{"assistant:write"}},
	{"reactions.add", []string{"AddReaction", "AddReactionContext"}, []string{"reactions:write"}},
	{"reactions.remove", []string{"RemoveReaction", "RemoveReactionContext"}, []string{"reactions:write"}},
	{"users.info", []string{"GetUserInfo", "GetUserInfoContext"}, []string{"users:read"}},
	{"team.info", []string{"GetTeamInfo", "GetTeamInfoContext", "GetOtherTeamInfo", "GetOtherTeamInfoContext"}, []string{"team:read"}},
	// Channel names for the system prompt and the assistant pane's
	// context: public and private channels (never DMs).
	{"conversations.info", []string{"GetConversationInfo", "GetConversationInfoContext"}, []string{"channels:read", "groups:read"}},
	{"views.open", []string{"OpenView", "OpenViewContext"}, nil},
	// Agent sessions (bot/stream/session.go): status and, at creation, title.
	{"agents.sessions.setStatus", []string{"SetAgentSessionStatus", "SetAgentSessionStatusContext"}, []string{"chat:write"}},
	{"assistant.threads.setTitle", []string{"SetAssistantThreadsTitle", "SetAssistantThreadsTitleContext"}, []string{"assistant:write"}},
	// A thread's earlier messages (threadctx.go), in every conversation
	// type the bot can be addressed in: public and private channels, DMs
	// and group DMs.
	{"conversations.replies", []string{"GetConversationReplies", "GetConversationRepliesContext"}, []string{"channels:history", "groups:history", "im:history", "mpim:history"}},
	// Slack Connect file stubs (files.go). files:read is also what the
	// file host wants of the token that downloads a file (download.go).
	{"files.info", []string{"GetFileInfo", "GetFileInfoContext"}, []string{"files:read"}},
	// Files tools return, uploaded into the thread (bot/toolfiles.go).
	{"files.getUploadURLExternal", []string{"GetUploadURLExternalContext"}, []string{"files:write"}},
	{"files.upload_url", []string{"UploadToURL"}, nil},
	{"files.completeUploadExternal", []string{"CompleteUploadExternalContext"}, []string{"files:write"}},
	// The App Home tab (bot/admin): Tier 4, no scope.
	{"views.publish", []string{"PublishView", "PublishViewContext"}, nil},
	// Members of user groups that scope MCP servers (bot/people).
	{"usergroups.users.list", []string{"GetUserGroupMembers", "GetUserGroupMembersContext"}, []string{"usergroups:read"}},
	// slack_search (bot/search.go): its scope, search:read.public, is
	// optional (optionalBotScopes, manifest bot_optional): without it the
	// tool is not offered.
	{"assistant.search.context", []string{"SearchAssistantContext", "SearchAssistantContextContext"}, nil},
}

// optionalBotScopes are bot scopes the bot uses when the workspace grants
// them (manifest.yaml bot_optional), with what needs them; installs
// without them work, and RequiredScopes leaves them out.
var optionalBotScopes = map[string]string{
	"search:read.public": "assistant.search.context (slack_search)",
}

// OptionalBotScopes returns a copy of optionalBotScopes.
func OptionalBotScopes() map[string]string { return maps.Clone(optionalBotScopes) }

// botEvents are the event subscriptions the bot handles (decodeEvent), with
// the bot scope each needs. manifest.yaml subscribes to exactly these.
var botEvents = map[string]string{
	"app_mention":      "app_mentions:read",
	"message.channels": "channels:history",
	"message.groups":   "groups:history",
	"message.im":       "im:history",
	// The App Home tab (bot/admin) and, under agent view, the Messages
	// tab (bot/agentview.go): no scope.
	"app_home_opened": "",
	// Agent view (bot/agentview.go): the viewed channel, Slack's Stop, a
	// person's rename of a session.
	"app_context_changed":         "assistant:write",
	"agent_session_stopped":       "chat:write",
	"agent_session_title_changed": "chat:write",
}

// legacyEvents are handled for apps still on assistant_view (bot/assistant.go);
// manifest.yaml (agent_view) does not subscribe to them: Slack's manifest
// editor warns against assistant_thread_started under agent view.
var legacyEvents = map[string]string{
	"assistant_thread_started":         "assistant:write",
	"assistant_thread_context_changed": "assistant:write",
}

// botFeatures are the app features (manifest "features" keys) the bot uses
// that need a scope: the /bobbin slash command, the assistant pane and the
// message shortcut.
var botFeatures = map[string]string{
	"slash_commands": "commands",
	"agent_view":     "assistant:write",
	// The Ask Bobbin message shortcut (shortcut.go).
	"shortcuts": "commands",
}

// WebMethodOf returns the row of a slack-go method name.
func WebMethodOf(goName string) (WebMethod, bool) {
	for _, m := range webMethods {
		if slices.Contains(m.GoAPI, goName) {
			return m, true
		}
	}
	return WebMethod{}, false
}

// WebMethods is the method table: each Web API method the bot calls, its
// slack-go methods and its scopes (a copy).
func WebMethods() []WebMethod { return slices.Clone(webMethods) }

// BotEvents are the event subscriptions the bot handles, with the scope
// each needs (a copy).
func BotEvents() map[string]string { return maps.Clone(botEvents) }

// BotFeatures are the app features the bot uses that need a scope, with
// that scope (a copy).
func BotFeatures() map[string]string { return maps.Clone(botFeatures) }

// RequiredScopes is the sorted union of the scopes of every Web API
// method, event and feature the bot uses: what the installed bot token must
// carry.
func RequiredScopes() []string {
	set := map[string]bool{}
	for _, m := range webMethods {
		for _, s := range m.Scopes {
			set[s] = true
		}
	}
	for _, s := range botEvents {
		set[s] = true
	}
	for _, s := range botFeatures {
		set[s] = true
	}
	for _, s := range legacyEvents {
		set[s] = true
	}
	delete(set, "")
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// MissingScopes lists the scopes of want that granted (Slack's
// X-OAuth-Scopes header: comma-separated) lacks; nil when granted is
// empty, since not every Slack (or emulator) sends it.
func MissingScopes(granted string, want []string) []string {
	if strings.TrimSpace(granted) == "" {
		return nil
	}
	have := map[string]bool{}
	for _, s := range strings.Split(granted, ",") {
		have[strings.TrimSpace(s)] = true
	}
	var out []string
	for _, s := range want {
		if !have[s] {
			out = append(out, s)
		}
	}
	return out
}
