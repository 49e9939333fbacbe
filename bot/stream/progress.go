package stream

import (
	"strconv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
)

// The progress line (edit mode's task cards): while a reply is live, its
// message shows the turn's tool calls as one compact context line under
// the answer, next to the status ("✓ search · ✗ fetch · ▸ files/write").
// It rides on the reply's normal interim edits (lossy, merged: a change
// only makes the next due edit differ, never a call of its own) and the
// final edit drops it with the status, so it never delays the final text.

// Progress line bounds: the last maxProgressCalls calls (older ones are
// counted), each name clipped.
const (
	maxProgressCalls = 5
	maxProgressName  = 40
	maxKeptCalls     = 64
)

// toolCall is one tool call of the turn and its state.
type toolCall struct {
	id, name string
	status   slack.TaskCardStatus
}

// toolCalls are the turn's tool calls in order; dropped counts the
// oldest ones no longer kept.
type toolCalls struct {
	list    []toolCall
	dropped int
}

// note records a tool event. r.mu is held.
func (c *toolCalls) note(ev agent.Event) {
	if ev.Call.ID == "" {
		return
	}
	status, ok := taskStatus(ev)
	if !ok {
		return
	}
	for i := range c.list {
		if c.list[i].id == ev.Call.ID {
			c.list[i].status = status
			return
		}
	}
	if len(c.list) >= maxKeptCalls {
		c.list, c.dropped = c.list[1:], c.dropped+1
	}
	c.list = append(c.list, toolCall{id: ev.Call.ID, name: toolName(ev), status: status})
}

// progressLine renders the tool calls as mrkdwn ("" for none).
func (r *Reply) progressLine() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	calls := r.calls.list
	if len(calls) == 0 {
		return ""
	}
	var parts []string
	if earlier := r.calls.dropped + max(0, len(calls)-maxProgressCalls); earlier > 0 {
		parts = append(parts, "+"+strconv.Itoa(earlier)+" earlier")
		calls = calls[len(calls)-min(len(calls), maxProgressCalls):]
	}
	for _, c := range calls {
		mark := "▸"
		switch c.status {
		case slack.TaskCardStatusPending:
			mark = "⏸"
		case slack.TaskCardStatusComplete:
			mark = "✓"
		case slack.TaskCardStatusError:
			mark = "✗"
		}
		parts = append(parts, mark+" "+mrkdwn.EscapeText(mrkdwn.ClipRunes(c.name, maxProgressName)))
	}
	return strings.Join(parts, " · ")
}
