package slackapi

// The Web API methods the bot calls, named once: call sites use these, and
// scopes.go gives each its slack-go methods and bot scopes (a test checks
// that every constant has a row there).
const (
	AgentsSessionsSetStatus             = "agents.sessions.setStatus"
	AppsConnectionsOpen                 = "apps.connections.open"
	AssistantSearchContext              = "assistant.search.context"
	AssistantSearchInfo                 = "assistant.search.info" // no slack-go method (bot/search.go posts it): no row in webMethods
	AssistantThreadsSetStatus           = "assistant.threads.setStatus"
	AssistantThreadsSetSuggestedPrompts = "assistant.threads.setSuggestedPrompts"
	AssistantThreadsSetTitle            = "assistant.threads.setTitle"
	AuthTest                            = "auth.test"
	ChatAppendStream                    = "chat.appendStream"
	ChatDelete                          = "chat.delete"
	ChatPostEphemeral                   = "chat.postEphemeral"
	ChatPostMessage                     = "chat.postMessage"
	ChatStartStream                     = "chat.startStream"
	ChatStopStream                      = "chat.stopStream"
	ChatUpdate                          = "chat.update"
	ConversationsInfo                   = "conversations.info"
	ConversationsReplies                = "conversations.replies"
	FilesInfo                           = "files.info"
	FilesGetUploadURLExternal           = "files.getUploadURLExternal"
	FilesCompleteUploadExternal         = "files.completeUploadExternal"
	// FilesUploadBytes names the POST of a file's bytes to the URL
	// files.getUploadURLExternal gave (files.slack.com/upload/v1/<ticket>):
	// not a Web API method, but budgeted and counted as one.
	FilesUploadBytes    = "files.upload_url"
	OAuthV2Access       = "oauth.v2.access" // not a bot-token call: no row in webMethods
	ReactionsAdd        = "reactions.add"
	ReactionsRemove     = "reactions.remove"
	TeamInfo            = "team.info"
	UsergroupsUsersList = "usergroups.users.list"
	UsersInfo           = "users.info"
	ViewsOpen           = "views.open"
	ViewsPublish        = "views.publish"
)

// methods lists the constants above, for the table test.
var methods = []string{
	AgentsSessionsSetStatus, AppsConnectionsOpen, AssistantSearchContext, AssistantThreadsSetStatus, AssistantThreadsSetSuggestedPrompts, AssistantThreadsSetTitle,
	AuthTest, ChatAppendStream, ChatDelete, ChatPostEphemeral, ChatPostMessage, ChatStartStream, ChatStopStream,
	ChatUpdate, ConversationsInfo, ConversationsReplies, FilesInfo, FilesGetUploadURLExternal, FilesCompleteUploadExternal, FilesUploadBytes, ReactionsAdd, ReactionsRemove, TeamInfo,
	UsergroupsUsersList, UsersInfo, ViewsOpen, ViewsPublish,
}
