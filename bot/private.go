package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot/ask"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// Private results: in a channel, the result of a tool whose policy is
// `private` goes to the asker only (an ephemeral message) with Share in
// thread and Keep private; the model goes on only after the choice, and
// with Keep private it hears that the asker saw the result, not the
// result. The choice is an approval record (session), so the click may
// land on any replica and Stop withdraws it.

// Action ids and labels of the private-result buttons (value: the id).
const (
	actionShare = "bobbin_private_share"
	actionKeep  = "bobbin_private_keep"
	labelShare  = "Share in thread"
	labelKeep   = "Keep private"
)

// privateResultLimit bounds the result shown in one message.
const privateResultLimit = 2800

// auditPrivate records the asker's choice.
const auditPrivate = "private_result"

// keptPrivate is what the model hears after Keep private.
const keptPrivate = "The result of this call was shown privately to the person who asked, who chose to keep it private. " +
	"You do not have it: do not guess or invent it. Continue without it, or ask the person."

// inDM reports whether a conversation id is a direct message (the
// assistant pane is one too).
func inDM(channel string) bool { return strings.HasPrefix(channel, "D") }

// withPrivate wraps the turn's private tools, in channels only.
func (b *Bot) withPrivate(k session.ThreadKey, requester string, tools []agent.Tool) []agent.Tool {
	if inDM(k.Channel) {
		return tools
	}
	for i, t := range tools {
		if ht, ok := t.(agent.HintedTool); ok && ht.Hints().Private {
			tools[i] = privateTool{HintedTool: ht, b: b, k: k, requester: requester}
		}
	}
	return tools
}

type privateTool struct {
	agent.HintedTool
	b         *Bot
	k         session.ThreadKey
	requester string
}

var _ agent.PartsTool = privateTool{}

func (t privateTool) Call(ctx context.Context, input json.RawMessage) (string, error) {
	out, err := t.HintedTool.Call(ctx, input)
	if err != nil {
		return out, err
	}
	return t.choose(ctx, out)
}

// CallParts keeps the images with the text: both go to the model only
// when the asker shares.
func (t privateTool) CallParts(ctx context.Context, input json.RawMessage) (string, []provider.Part, error) {
	pt, ok := t.HintedTool.(agent.PartsTool)
	if !ok {
		out, err := t.Call(ctx, input)
		return out, nil, err
	}
	out, parts, err := pt.CallParts(ctx, input)
	if err != nil {
		return out, parts, err
	}
	res, err := t.choose(ctx, out)
	if res != out {
		parts = nil
	}
	return res, parts, err
}

// choose shows out to the asker and waits for their choice.
func (t privateTool) choose(ctx context.Context, out string) (string, error) {
	b, k := t.b, t.k
	cs := b.store
	h := t.Hints()
	title := t.Spec().Name
	if h.Server != "" && h.Tool != "" {
		title = h.Server + "/" + h.Tool
	}
	id := session.NewApprovalID()
	expires := time.Now().Add(b.ask.Timeout())
	if dl, ok := ctx.Deadline(); ok && dl.Before(expires) {
		expires = dl
	}
	ap, err := cs.CreateApproval(ctx, session.Approval{Prompt: session.Prompt{ID: id, Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS,
		Requester: t.requester, Server: h.Server, Expires: expires},
		Tool: t.Spec().Name})
	if err != nil {
		return "", fmt.Errorf("the private result could not be offered to the person who asked, so it was not used: %w", err)
	}
	body := fmt.Sprintf(":lock: *Private result* of `%s` (only you can see this). Share it in the thread, or keep it to yourself: I continue once you choose.", mrkdwn.InlineCode(title))
	blocks := []slack.Block{
		slack.NewSectionBlock(mdText(body), nil, nil),
		slack.NewSectionBlock(mdText("```\n"+mrkdwn.FenceSafe(mrkdwn.TruncateAt(mrkdwn.EscapeText(out), privateResultLimit))+"\n```"), nil, nil),
		slack.NewActionBlock("bobbin_private_actions",
			slack.NewButtonBlockElement(actionShare, id, mrkdwn.Plain(labelShare)).WithStyle(slack.StylePrimary),
			slack.NewButtonBlockElement(actionKeep, id, mrkdwn.Plain(labelKeep))),
	}
	// The title and result are escaped above: this is the bot's wording.
	err = b.slack.Ephemeral(ctx, k.Team, k.Channel, t.requester, slackapi.Msg{
		Text: mrkdwn.Text("Private result of " + mrkdwn.EscapeText(title)), Blocks: blocks, Thread: k.ThreadTS})
	if err != nil {
		return "", fmt.Errorf("the private result could not be shown to the person who asked, so it was not used: %w", err)
	}
	got, err := cs.WaitApproval(ctx, ap.ID)
	if err != nil {
		return "", err
	}
	share := got.State == session.ApprovalAllowOnce
	outcome := "keep"
	if share {
		outcome = "share"
	} else if got.State != session.ApprovalDeny {
		outcome = got.State // expired, withdrawn: kept private
	}
	b.audit(ctx, k.Team, map[string]string{"event": auditPrivate, "channel": k.Channel, "thread": k.ThreadTS,
		"user": t.requester, "by": got.DecidedBy, "server": h.Server, "tool": t.Spec().Name, "outcome": outcome})
	if !share {
		return keptPrivate, nil
	}
	text := fmt.Sprintf("<@%s> shared the result of `%s`:\n```\n%s\n```", t.requester, mrkdwn.InlineCode(title), mrkdwn.FenceSafe(mrkdwn.TruncateAt(mrkdwn.EscapeText(out), privateResultLimit)))
	// text is built from escaped parts (mention, inline code, escaped result).
	if _, err := b.slack.Post(ctx, k.Team, k.Channel, slackapi.Msg{Text: mrkdwn.Text(text), Thread: k.ThreadTS}); err != nil {
		b.log.Warn("bot: posting a shared result failed", "team", k.Team, "channel", k.Channel, "err", err)
	}
	return out, nil
}

// privateClicks extracts the Share / Keep private clicks of a callback.
func privateClicks(cb slack.InteractionCallback) []*slack.BlockAction {
	if cb.Type != slack.InteractionTypeBlockActions {
		return nil
	}
	var out []*slack.BlockAction
	for _, a := range cb.ActionCallback.BlockActions {
		if a != nil && (a.ActionID == actionShare || a.ActionID == actionKeep) && ask.ValidID(a.Value) {
			out = append(out, a)
		}
	}
	return out
}

// privateAction records the asker's choice; only the asker sees the
// buttons, and only their click counts.
func (b *Bot) privateAction(ctx context.Context, cb slack.InteractionCallback, act *slack.BlockAction) {
	cs := b.store
	ap, err := cs.GetApproval(ctx, act.Value)
	switch {
	case errors.Is(err, session.ErrNotFound):
		b.tell(ctx, cb, "", "I don't know this result any more (it is too old).")
		return
	case err != nil:
		b.tell(ctx, cb, "", "I couldn't read your choice just now. Please try again in a moment.")
		return
	}
	if cb.User.ID != ap.Requester || (cb.Team.ID != "" && cb.Team.ID != ap.Team) {
		b.tell(ctx, cb, ap.ThreadTS, "Only the person who asked can share this result.")
		return
	}
	state := session.ApprovalDeny
	if act.ActionID == actionShare {
		state = session.ApprovalAllowOnce
	}
	got, won, err := cs.Decide(ctx, ap.ID, state, cb.User.ID)
	switch {
	case err != nil:
		b.tell(ctx, cb, ap.ThreadTS, "I couldn't record your choice just now. Please try again.")
	case !won:
		b.tell(ctx, cb, ap.ThreadTS, "This result was already "+map[bool]string{true: "shared.", false: "kept private (or its time ran out)."}[got.State == session.ApprovalAllowOnce])
	case state == session.ApprovalDeny:
		b.tell(ctx, cb, ap.ThreadTS, "Kept private: I continue without it.")
	}
}

func mdText(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, false)
}
