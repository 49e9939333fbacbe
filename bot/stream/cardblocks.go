package stream

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// Task cards after a native stream (reference slack-agents-2026.md §3,
// §5). A stream shows each tool call as a task card (task_update chunks,
// taskcards.go), but a closed stream takes no more chunks: a card still
// pending or in progress when the stream closed (for its age, life.go;
// before a wait on a person; or because Slack ended it) would stay so for
// good although its call went on to complete or fail. So once its stream
// has closed the reply keeps the cards itself: each of its messages shows
// the tool calls of its stretch of the answer (the stream's message those
// before the first approval prompt, a message below a prompt those after
// it) as task_card blocks, with their current status while the turn runs
// and their final status in the final edit.
//
// Why task_card blocks rather than the progress line (progress.go): Slack
// documents task_card as a Block Kit block for messages, the block form of
// the task_update chunk (same task id, title, status, details, output,
// sources), and chat.update replaces a message's blocks. The card the
// person saw in the stream is therefore the card they keep, now with its
// true status: the rendition closest to what the stream would have shown
// had it lived, and the one that stays in the final message (the progress
// line is dropped by the final edit). Not confirmed by Slack: that
// chat.update and chat.postMessage take task_card blocks in every
// workspace (slack-go notes that some agent blocks go only in stream
// chunks), and whether chat.update keeps a stopped stream's own cards
// beside the new blocks (then the stale card is still shown, next to the
// true one). A workspace where Slack refuses the blocks (invalid_blocks)
// gets the calls as one compact line in the progress line's form instead,
// in the final edit too; it is remembered for the workspace (Sessions)
// and the refused final call is made again at once without the cards, so
// the answer's text never waits on them.

// maxCardBlocks bounds the task_card blocks of one message (Slack allows
// 50 blocks); a stretch's older calls are counted instead.
const maxCardBlocks = 20

// cardsAfterStream reports whether the reply shows its tool calls as task
// cards in its messages: a native reply whose stream has closed and which
// goes on with edits. Owned by Run, then by Finish.
func (r *Reply) cardsAfterStream() bool {
	return r.native && r.ns.failed && r.ns.ts != ""
}

// toolsByPiece places the turn's tool calls in the reply's pieces (segs:
// the stretch of each piece, Reply.stretches): a call stays in the message
// that first showed it; a new one goes to the first piece of its stretch,
// or to the last piece (the live one) while its stretch has no text yet.
// earlier counts the calls no longer kept (shown with the first piece).
func (r *Reply) toolsByPiece(segs []int) (byPiece map[int][]toolCall, earlier int) {
	r.mu.Lock()
	calls := slices.Clone(r.calls.list)
	earlier = r.calls.dropped
	r.mu.Unlock()
	if len(calls) == 0 || len(segs) == 0 {
		return nil, earlier
	}
	if r.cardPiece == nil {
		r.cardPiece = map[string]int{}
	}
	byPiece = map[int][]toolCall{}
	for _, c := range calls {
		at, ok := r.cardPiece[c.id]
		if !ok || at >= len(segs) {
			at = slices.Index(segs, c.seg)
			if at < 0 {
				at = len(segs) - 1
			}
			r.cardPiece[c.id] = at
		}
		byPiece[at] = append(byPiece[at], c)
	}
	return byPiece, earlier
}

// liveToolsOnly keeps a stream's message live when the stream closed
// before any text came (it showed tool calls only, such as one long
// call): the message shows the calls as cards, the status and the Stop
// button until text comes. Lossy, like every interim edit.
func (r *Reply) liveToolsOnly(ctx context.Context, status string) {
	tools, earlier := r.toolsByPiece([]int{0}) // no text, so no approval prompt yet: one stretch
	v := view{status: status, live: true, tools: tools[0], earlier: earlier}
	p := &r.posted[0]
	if p.rendered == r.renderKey(v) || time.Since(p.at) < r.editSpacing() ||
		(!r.held[slackapi.PoolEdit] && !r.mayGoLive(slackapi.PoolEdit)) {
		return
	}
	r.update(ctx, p, v, false)
}

// toolBlocks renders a piece's tool calls: task_card blocks (the last
// maxCardBlocks, the others counted) or, where the workspace refuses them,
// a context line.
func (r *Reply) toolBlocks(v view) []slack.Block {
	if len(v.tools) == 0 {
		return nil
	}
	if r.cardsOff() {
		line := callsLine(v.tools, v.earlier) // progress.go
		return []slack.Block{slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, line, false, false))}
	}
	tools, earlier := v.tools, v.earlier
	if n := len(tools) - maxCardBlocks; n > 0 {
		tools, earlier = tools[n:], earlier+n
	}
	var out []slack.Block
	if earlier > 0 {
		out = append(out, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType,
			"+"+strconv.Itoa(earlier)+" earlier tool calls", false, false)))
	}
	for _, c := range tools {
		out = append(out, c.block())
	}
	return out
}

// toolsKey names what toolBlocks shows, for Reply.renderKey.
func (r *Reply) toolsKey(v view) string {
	b, _ := json.Marshal(r.toolBlocks(v))
	return string(b)
}

// block is the card as a task_card block: the title as in the chunk, the
// details and output as rich text (taken literally, so not escaped),
// clipped like the chunk's.
func (c taskCard) block() slack.Block {
	b := slack.NewTaskCardBlock(c.id, escClip(c.title, maxTaskTitle)).WithStatus(c.status)
	if c.details != "" {
		b.WithDetails(richText(mrkdwn.ClipRunes(c.details, maxTaskDetails)))
	}
	if c.output != "" {
		b.WithOutput(richText(mrkdwn.ClipRunes(c.output, maxTaskOutput)))
	}
	if len(c.sources) > 0 {
		b.WithSources(c.sources...)
	}
	return b
}

func richText(s string) *slack.RichTextBlock {
	return slack.NewRichTextBlock("", slack.NewRichTextSection(slack.NewRichTextSectionTextElement(s, nil)))
}

// cardsOff reports whether the workspace refused task_card blocks.
func (r *Reply) cardsOff() bool {
	_, off := r.o.Sessions.noCards.Load(r.k.Team)
	return off
}

// cardsRefused reports whether err is Slack refusing the task_card blocks
// of v; the workspace then gets the line from now on (the call is to be
// made again).
func (r *Reply) cardsRefused(v view, err error) bool {
	var se slack.SlackErrorResponse
	if len(v.tools) == 0 || r.cardsOff() || !errors.As(err, &se) || (se.Err != "invalid_blocks" && se.Err != "invalid_blocks_format") {
		return false
	}
	if _, seen := r.o.Sessions.noCards.LoadOrStore(r.k.Team, struct{}{}); !seen {
		r.log.Warn("bot: Slack refuses task_card blocks in messages in this workspace; tool calls after a native stream are shown as a line",
			"team", r.k.Team, "err", se.Err)
	}
	return true
}
