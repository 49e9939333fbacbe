package stream

import (
	"strconv"
	"strings"

	"github.com/slack-go/slack"

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

// toolCall is one tool call of the turn: its task card (its state) and
// the stretch of the answer it came in (seg: how many approval prompts
// came before it, Reply.breaks), which decides the message that shows it
// after a native stream (cardblocks.go).
type toolCall struct {
	taskCard
	seg int
}

// toolCalls are the turn's tool calls in order; dropped counts the
// oldest ones no longer kept.
type toolCalls struct {
	list    []toolCall
	dropped int
}

// note records a tool call's card; a call seen before keeps its stretch.
// r.mu is held.
func (c *toolCalls) note(card taskCard, seg int) {
	for i := range c.list {
		if c.list[i].id == card.id {
			c.list[i].taskCard = card
			return
		}
	}
	if len(c.list) >= maxKeptCalls {
		c.list, c.dropped = c.list[1:], c.dropped+1
	}
	c.list = append(c.list, toolCall{taskCard: card, seg: seg})
}

// progressLine renders the tool calls as mrkdwn ("" for none).
func (r *Reply) progressLine() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return callsLine(r.calls.list, r.calls.dropped)
}

// callsLine renders calls as one mrkdwn line, the last maxProgressCalls
// of them, the others (and earlier more) counted ("" for none).
func callsLine(calls []toolCall, earlier int) string {
	if len(calls) == 0 {
		return ""
	}
	var parts []string
	if earlier += max(0, len(calls)-maxProgressCalls); earlier > 0 {
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
		parts = append(parts, mark+" "+mrkdwn.EscapeText(mrkdwn.ClipRunes(c.title, maxProgressName)))
	}
	return strings.Join(parts, " · ")
}
