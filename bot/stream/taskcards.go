package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
)

// Tool calls as task cards (reference slack-agents-2026.md §3, §5). In a
// native stream each tool call is a task_update chunk: pending while it
// waits for approval, in_progress while it runs, complete or error when
// done, titled with the server and tool and with a short escaped summary
// of the arguments and, once complete, the links of its result as sources
// (sources.go); from the second call of a turn a plan_update titles
// the steps as a plan. Slack limits a chunk's text fields to 256
// characters together, so each part is clipped. The edit path shows the
// status line instead (reply.go).

// Clips of a task card's text fields (title + details + output ≤ 256).
const (
	maxTaskTitle   = 80
	maxTaskDetails = 120
	maxTaskOutput  = 50
)

// taskStatus is the task card status a tool event moves its call to;
// ok is false for events that are not a tool call's progress.
func taskStatus(ev agent.Event) (status slack.TaskCardStatus, ok bool) {
	switch ev.Kind {
	case agent.EventApprovalNeeded:
		return slack.TaskCardStatusPending, true
	case agent.EventToolStarted:
		return slack.TaskCardStatusInProgress, true
	case agent.EventToolFinished:
		if ev.IsError {
			return slack.TaskCardStatusError, true
		}
		return slack.TaskCardStatusComplete, true
	}
	return "", false
}

// taskProgress queues the task card update of a tool event for a native
// stream; sources are a completed call's links. r.mu is held.
func (r *Reply) taskProgress(ev agent.Event, sources []slack.TaskCardSource) {
	if !r.native || ev.Call.ID == "" {
		return
	}
	status, ok := taskStatus(ev)
	if !ok {
		return
	}
	if r.taskIDs == nil {
		r.taskIDs = map[string]bool{}
	}
	if !r.taskIDs[ev.Call.ID] {
		r.taskIDs[ev.Call.ID] = true
		if n := len(r.taskIDs); n > 1 {
			r.tasks = append(r.tasks, slack.NewPlanUpdateChunk(fmt.Sprintf("Working through %d steps", n)))
		}
	}
	c := slack.NewTaskUpdateChunk(ev.Call.ID, escClip(toolName(ev), maxTaskTitle))
	c.Status = status
	c.Details = argsSummary(ev.Call.Arguments)
	if status == slack.TaskCardStatusError && ev.Text != "" {
		c.Output = escClip(ev.Text, maxTaskOutput)
	}
	if status == slack.TaskCardStatusComplete {
		c.Sources = sources // sources.go
	}
	r.tasks = append(r.tasks, c)
}

// argsSummary is a one-line, escaped, clipped rendering of a call's
// arguments ("" for none).
func argsSummary(args string) string {
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(args)) != nil {
		buf.Reset()
		buf.WriteString(args)
	}
	s := strings.Join(strings.Fields(buf.String()), " ")
	if s == "" || s == "{}" || s == "null" {
		return ""
	}
	return escClip(s, maxTaskDetails)
}

// escClip escapes s and clips it so that the escaped text has at most n
// runes (an entity is never cut).
func escClip(s string, n int) string {
	e := mrkdwn.EscapeText(mrkdwn.ClipRunes(s, n))
	for k := n; len([]rune(e)) > n && k > 1; {
		k -= max(1, (len([]rune(e))-n)/4)
		e = mrkdwn.EscapeText(mrkdwn.ClipRunes(s, max(k, 1)))
	}
	return e
}
