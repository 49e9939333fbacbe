// Package stream renders one turn's reply into its Slack thread: a Reply
// is the turn's agent.Observer. Observe only records the model's text,
// the status line and tool progress (it never blocks); Run coalesces them
// into lossy Slack calls (tried once, within the budget, only while the
// reply holds a live slot of the workspace); Finish delivers the final
// text and footer (must-deliver) and gives the slots back.
//
// Two modes: Edit posts the answer and edits it (split into messages at
// Slack's size and below each approval prompt), with a context line (the
// turn's tool calls and the status, progress.go) and the Stop button
// (ActionStop) while live; Native streams it with
// chat.startStream/appendStream/stopStream and tool calls as task_update
// chunks, and finishes with edits when the stream fails, outgrows one
// message, nears Slack's ~5 minute stream lifetime (Options.StreamLifetime,
// life.go) or the turn waits on a person; those edits carry the Stop
// button while live and the tool calls as task_card blocks
// (cardblocks.go). It also keeps the thread's agent
// session status (agents.sessions.setStatus, or chat.stopStream's
// session_status when a stream stops) and the assistant thread's status.
//
// Seams: every Web API call goes through slackapi.Client (Options.API);
// the governor's live slots and chat.update rate come in as Budget. What
// the reply needs of the app comes in as func fields of Options: the
// thread lease (Guard, OnPost), Slack's own stop of a stream
// (UserStopped) and the metrics (ToolCall, FirstText). The root routes
// the Stop button's clicks (it needs the Bot).
//
// It imports bot/slackapi, bot/mrkdwn, agent, session (types) and
// slack-go; never package bot or another feature package of bot/.
package stream
