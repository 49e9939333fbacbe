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
// characters together, so each part is clipped. Once the stream has
// closed, the reply's messages show the cards as task_card blocks
// (cardblocks.go); the edit path shows the progress line (progress.go).

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

// taskCard is a tool call's task card, its text raw: the task_update
// chunk (chunk) and the task_card block (block, cardblocks.go) are
// rendered from it.
type taskCard struct {
	id, title string
	status    slack.TaskCardStatus
	// details is the arguments on one line; output a failed call's
	// error; sources a completed call's links (escaped, sources.go).
	details, output string
	sources         []slack.TaskCardSource
}

// cardOf is the task card a tool event moves its call to; ok is false for
// events that are not a tool call's progress. sources are a completed
// call's links.
func cardOf(ev agent.Event, sources []slack.TaskCardSource) (c taskCard, ok bool) {
	if ev.Call.ID == "" {
		return c, false
	}
	status, ok := taskStatus(ev)
	if !ok {
		return c, false
	}
	c = taskCard{id: ev.Call.ID, title: toolName(ev), status: status, details: argsLine(ev.Call.Arguments)}
	if status == slack.TaskCardStatusError {
		c.output = ev.Text
	}
	if status == slack.TaskCardStatusComplete {
		c.sources = sources // sources.go
	}
	return c, true
}

// chunk is the card as a task_update chunk: fields escaped and clipped.
func (c taskCard) chunk() slack.TaskUpdateChunk {
	ch := slack.NewTaskUpdateChunk(c.id, escClip(c.title, maxTaskTitle))
	ch.Status = c.status
	if c.details != "" {
		ch.Details = escClip(c.details, maxTaskDetails)
	}
	if c.output != "" {
		ch.Output = escClip(c.output, maxTaskOutput)
	}
	ch.Sources = c.sources
	return ch
}

// taskProgress queues the task card update of a tool event for a native
// stream. r.mu is held.
func (r *Reply) taskProgress(c taskCard) {
	if !r.native {
		return
	}
	if r.taskIDs == nil {
		r.taskIDs = map[string]bool{}
	}
	if !r.taskIDs[c.id] {
		r.taskIDs[c.id] = true
		if n := len(r.taskIDs); n > 1 {
			r.tasks = append(r.tasks, slack.NewPlanUpdateChunk(fmt.Sprintf("Working through %d steps", n)))
		}
	}
	r.tasks = append(r.tasks, c.chunk())
}

// argsSummary is a one-line, escaped, clipped rendering of a call's
// arguments ("" for none).
func argsSummary(args string) string {
	if s := argsLine(args); s != "" {
		return escClip(s, maxTaskDetails)
	}
	return ""
}

// argsLine is a call's arguments on one line, raw ("" for none).
func argsLine(args string) string {
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(args)) != nil {
		buf.Reset()
		buf.WriteString(args)
	}
	s := strings.Join(strings.Fields(buf.String()), " ")
	if s == "" || s == "{}" || s == "null" {
		return ""
	}
	return s
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
