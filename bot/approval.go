package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// This file holds the whole approval flow (the Approver, the prompt's
// rendering, the click handlers): they change together, hence its length.

// Action ids of the approval buttons; every value is the approval id.
const (
	actionAllowOnce   = "bobbin_allow_once"
	actionAllowThread = "bobbin_allow_thread"
	actionDeny        = "bobbin_deny"
	actionRevoke      = "bobbin_revoke"
	actionViewArgs    = "bobbin_view_args"
)

// Button labels.
const (
	labelAllowOnce   = "Allow once"
	labelAllowThread = "Always allow in this thread"
	labelDeny        = "Deny"
	labelRevoke      = "Revoke"
	labelViewArgs    = "View full arguments"
)

// Block ids of the approval message. The first three survive a decision;
// actions and status are replaced.
const (
	blockApprovalHead    = "bobbin_approval_head"
	blockApprovalRisk    = "bobbin_approval_risk"
	blockApprovalArgs    = "bobbin_approval_args"
	blockApprovalActions = "bobbin_approval_actions"
	blockApprovalStatus  = "bobbin_approval_status"
)

// DefaultApprovalTimeout is how long a prompt waits for an answer when
// Options.ApprovalTimeout is zero (APPROVAL_TIMEOUT).
const DefaultApprovalTimeout = 10 * time.Minute

// Limits of the arguments shown in the prompt.
const (
	argValueLimit  = 300  // runes of one string value
	argBlockLimit  = 2600 // bytes of the escaped code block (a section takes 3 000)
	argsModalLimit = 2800 // bytes of escaped code per modal section
	argsModalParts = 24   // sections in the modal
)

// errApprovalExpired is what the model hears when nobody answered in time.
var errApprovalExpired = errors.New("nobody answered the approval request in time")

// errApprovalWithdrawn: the turn was stopped while the prompt was open.
var errApprovalWithdrawn = errors.New("the request was withdrawn")

// threadApprover is the bot's agent.Approver for one turn: it asks in the
// thread and waits for the answer through Redis, so the click may land on
// any replica.
type threadApprover struct {
	b         *Bot
	k         session.ThreadKey
	requester string
}

// approverFor returns the Approver of a turn in thread k started by
// requester; nil (deny what needs approval) without a control store.
func (b *Bot) approverFor(k session.ThreadKey, requester string) agent.Approver {
	return &threadApprover{b: b, k: k, requester: requester}
}

func (b *Bot) approvalTimeout() time.Duration {
	if b.opts.ApprovalTimeout > 0 {
		return b.opts.ApprovalTimeout
	}
	return DefaultApprovalTimeout
}

// Approve posts the prompt (or, when this turn resumes one another replica
// started, finds it), waits for the decision and returns it.
func (a *threadApprover) Approve(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
	b, k := a.b, a.k
	cs := b.store
	log := b.log.With(threadAttrs(k.Team, k.Channel, k.ThreadTS)...)
	p := newPrompt(req, a.requester)
	if req.Hints.Private && !inDM(k.Channel) {
		p.args, p.truncated, p.hidden = "", false, true // onlookers see no arguments (private.go)
	}

	ap, found := a.resume(ctx, req.Call.ID)
	if !found {
		id := session.NewApprovalID()
		expires := time.Now().Add(b.approvalTimeout())
		if dl, ok := ctx.Deadline(); ok && dl.Before(expires) {
			expires = dl
		}
		// Post first, then store: the buttons carry the id, and a click that
		// beats the store is told to try again.
		var ts string
		err := b.slack.Do(ctx, slackapi.Call{Team: k.Team, Method: slackapi.ChatPostMessage, Channel: k.Channel}, func(ctx context.Context, api *slack.Client) error {
			var err error
			_, ts, err = api.PostMessageContext(ctx, k.Channel,
				slack.MsgOptionTS(k.ThreadTS),
				slack.MsgOptionText(p.fallback(), false),
				slack.MsgOptionBlocks(p.pendingBlocks(id, expires)...),
				slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl())
			return err
		})
		if err != nil {
			return agent.Deny, fmt.Errorf("posting the approval prompt: %w", err)
		}
		ap, err = cs.CreateApproval(ctx, session.Approval{
			ID: id, Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS, Requester: a.requester,
			Server: req.Hints.Server, Tool: req.Call.Name, ArgsDigest: argsDigest(json.RawMessage(req.Call.Arguments)),
			CallID: req.Call.ID, Expires: expires, MessageTS: ts,
			AdminOnly: req.Hints.AdminOnly, OnceOnly: req.Hints.OnceOnly,
		})
		if err != nil {
			log.Error("bot: storing the approval failed; denying", "err", err)
			b.updatePrompt(ctx, k.Team, k.Channel, ts, p.fallback(), p.closedBlocks("_This request could not be recorded, so the tool did not run._", nil))
			return agent.Deny, fmt.Errorf("storing the approval: %w", err)
		}
		b.audit(ctx, k.Team, map[string]string{
			"event": auditApprovalAsked, "channel": k.Channel, "thread": k.ThreadTS, "user": a.requester,
			"server": req.Hints.Server, "tool": req.Call.Name, "args_digest": ap.ArgsDigest, "approval": ap.ID,
		})
	}

	endWait := b.waits.waiting("approval of " + req.Hints.Server + "/" + req.Hints.Tool + " by " + a.requester + " in " + k.Channel)
	got, err := cs.WaitApproval(ctx, ap.ID)
	endWait()
	if err != nil {
		if ctx.Err() != nil {
			return agent.Deny, a.abandon(ctx, ap, p)
		}
		return agent.Deny, fmt.Errorf("waiting for the approval: %w", err)
	}
	switch got.State {
	case session.ApprovalAllowOnce:
		return agent.AllowOnce, nil
	case session.ApprovalAllowSession:
		return agent.AllowForSession, nil
	case session.ApprovalDeny:
		return agent.Deny, nil
	case session.ApprovalExpired:
		a.settle(ctx, got, p)
		return agent.Deny, errApprovalExpired
	}
	a.settle(ctx, got, p)
	if got.State == session.ApprovalWithdrawn && got.DecidedBy != "" {
		// Withdrawn by a Stop on another replica: stop the turn now, not
		// at the next stop poll (as for questions, elicit.go).
		a.b.cancels.cancel(a.k, stopCause{user: got.DecidedBy})
	}
	return agent.Deny, errApprovalWithdrawn
}

// resume finds the pending approval of call id that an earlier holder of
// this turn posted, so the person is not asked twice.
func (a *threadApprover) resume(ctx context.Context, callID string) (session.Approval, bool) {
	if callID == "" {
		return session.Approval{}, false
	}
	pending, err := a.b.store.PendingApprovals(ctx, a.k)
	if err != nil {
		return session.Approval{}, false
	}
	for _, ap := range pending {
		if ap.CallID == callID {
			return ap, true
		}
	}
	return session.Approval{}, false
}

// abandon handles the turn's context ending while the prompt is open. When
// the thread's lease was lost the approval stays pending: the new holder
// resumes the turn from the transcript (where this call has no result yet)
// and waits on the same prompt. Otherwise (Stop, shutdown, the agent's own
// timeout) the agent records the call as not run, so the approval is
// closed and the prompt updated.
func (a *threadApprover) abandon(ctx context.Context, ap session.Approval, p prompt) error {
	cause := context.Cause(ctx)
	if errors.Is(cause, session.ErrLeaseLost) {
		return ctx.Err()
	}
	state, by, status := session.ApprovalWithdrawn, "", ""
	var stop stopCause
	switch {
	case errors.As(cause, &stop):
		by = stop.user
	case errors.Is(cause, errShutdown):
		status = ":black_square_for_stop: Withdrawn: the bot restarted before anyone answered. I'll ask again if the tool is still needed."
	case errors.Is(cause, context.DeadlineExceeded):
		state = session.ApprovalExpired
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	got, won, err := a.b.store.Decide(dctx, ap.ID, state, by)
	if err != nil {
		a.b.log.Warn("bot: closing an abandoned approval failed", "approval", ap.ID, "err", err)
		return ctx.Err()
	}
	if !won {
		return ctx.Err() // a click got there first and updated the prompt
	}
	if status == "" {
		status = statusLine(got)
	}
	a.settleWith(dctx, got, p, status)
	return ctx.Err()
}

// settle updates the prompt for an approval this turn closed (expired or
// withdrawn) and audits it; clicks update their own prompt.
func (a *threadApprover) settle(ctx context.Context, got session.Approval, p prompt) {
	a.settleWith(ctx, got, p, statusLine(got))
}

func (a *threadApprover) settleWith(ctx context.Context, got session.Approval, p prompt, status string) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	a.b.deliverSoon(uctx, func(ctx context.Context) error {
		return a.b.updatePrompt(ctx, got.Team, got.Channel, got.MessageTS, p.fallback(), p.closedBlocks(status, nil))
	})
	a.b.audit(uctx, got.Team, map[string]string{
		"event": auditDecision, "channel": got.Channel, "thread": got.ThreadTS, "user": got.Requester,
		"by": got.DecidedBy, "server": got.Server, "tool": got.Tool, "args_digest": got.ArgsDigest,
		"decision": got.State, "approval": got.ID, "duration_ms": waited(got),
	})
}

// updatePrompt replaces the approval message (must-deliver: it waits for
// budget, and through rate limits, until ctx ends). The edit is the same
// whenever it lands, so it may be repeated.
func (b *Bot) updatePrompt(ctx context.Context, team, channel, ts, fallback string, blocks []slack.Block) error {
	if ts == "" {
		return nil
	}
	err := b.slack.Do(ctx, slackapi.Call{Team: team, Method: slackapi.ChatUpdate}, func(ctx context.Context, api *slack.Client) error {
		_, _, _, err := api.UpdateMessageContext(ctx, channel, ts,
			slack.MsgOptionText(fallback, false), slack.MsgOptionBlocks(blocks...))
		return err
	})
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		b.log.Warn("bot: updating the approval prompt failed", "team", team, "channel", channel, "err", err)
	}
	return err
}

// prompt is the content of one approval message.
type prompt struct {
	title     string // server/tool
	requester string
	risk      string
	args      string // escaped, truncated pretty JSON
	truncated bool
	// adminOnly and onceOnly come from the tool policy (policy_approval.go).
	adminOnly, onceOnly bool
	// hidden: the tool's results are private, so are its arguments.
	hidden bool
}

func newPrompt(req agent.ApprovalRequest, requester string) prompt {
	h := req.Hints
	title := req.Call.Name
	if h.Server != "" && h.Tool != "" {
		title = h.Server + "/" + h.Tool
	}
	args, truncated := shortArgs(json.RawMessage(req.Call.Arguments))
	return prompt{title: title, requester: requester, risk: riskLine(h), args: args, truncated: truncated,
		adminOnly: h.AdminOnly, onceOnly: h.OnceOnly}
}

// riskLine summarizes a tool's hints for the person deciding.
func riskLine(h agent.Hints) string {
	var parts []string
	if h.ReadOnly {
		parts = append(parts, "read-only")
	} else {
		parts = append(parts, "may change data")
	}
	if h.Destructive {
		parts = append(parts, ":warning: destructive")
	}
	if h.OpenWorld {
		parts = append(parts, "open-world (reaches outside systems)")
	}
	if !h.Trusted {
		parts = append(parts, "unverified server (these hints come from the server itself)")
	}
	return "Risk: " + strings.Join(parts, " · ")
}

func (p prompt) fallback() string {
	return "Approval needed to run " + mrkdwn.EscapeText(p.title)
}

func (p prompt) baseBlocks() []slack.Block {
	head := fmt.Sprintf(":lock: *Approval needed* to run `%s`", mrkdwn.InlineCode(p.title))
	if p.requester != "" {
		head += fmt.Sprintf(" for <@%s>", p.requester)
	}
	args := "```\n" + p.args + "\n```"
	if a := strings.TrimSpace(p.args); a == "{}" || a == "" || a == "null" {
		args = "_No arguments._"
	}
	if p.hidden {
		args = "_Arguments hidden: this tool's results are private to the person who asked._"
	}
	return []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, head, false, false), nil, nil, slack.SectionBlockOptionBlockID(blockApprovalHead)),
		slack.NewContextBlock(blockApprovalRisk, slack.NewTextBlockObject(slack.MarkdownType, mrkdwn.EscapeText(p.risk), false, false)),
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, args, false, false), nil, nil, slack.SectionBlockOptionBlockID(blockApprovalArgs)),
	}
}

// pendingBlocks is the prompt with its buttons.
func (p prompt) pendingBlocks(id string, expires time.Time) []slack.Block {
	once := slack.NewButtonBlockElement(actionAllowOnce, id, slack.NewTextBlockObject(slack.PlainTextType, labelAllowOnce, false, false)).WithStyle(slack.StylePrimary)
	thread := slack.NewButtonBlockElement(actionAllowThread, id, slack.NewTextBlockObject(slack.PlainTextType, labelAllowThread, false, false))
	deny := slack.NewButtonBlockElement(actionDeny, id, slack.NewTextBlockObject(slack.PlainTextType, labelDeny, false, false)).WithStyle(slack.StyleDanger)
	elems := []slack.BlockElement{once, thread, deny}
	if p.onceOnly {
		elems = []slack.BlockElement{once, deny}
	}
	if p.truncated {
		elems = append(elems, slack.NewButtonBlockElement(actionViewArgs, id, slack.NewTextBlockObject(slack.PlainTextType, labelViewArgs, false, false)))
	}
	who := "The person who asked or a workspace admin can decide."
	if p.requester != "" {
		who = fmt.Sprintf("<@%s> or a workspace admin can decide.", p.requester)
	}
	if p.adminOnly {
		who = policyAdminWho
	}
	status := fmt.Sprintf("%s Without an answer by %s it is denied.", who, mrkdwn.Date(expires))
	return append(p.baseBlocks(),
		slack.NewActionBlock(blockApprovalActions, elems...),
		slack.NewContextBlock(blockApprovalStatus, slack.NewTextBlockObject(slack.MarkdownType, status, false, false)))
}

// closedBlocks is the prompt after a decision: the status line, and only
// the given buttons (Revoke for a thread-wide grant, View full arguments).
func (p prompt) closedBlocks(status string, buttons []slack.BlockElement) []slack.Block {
	return closeBlocks(p.baseBlocks(), status, buttons)
}

// closeBlocks keeps the head, risk and arguments of base and appends the
// status and buttons.
func closeBlocks(base []slack.Block, status string, buttons []slack.BlockElement) []slack.Block {
	var out []slack.Block
	for _, bl := range base {
		switch bl.ID() {
		case blockApprovalHead, blockApprovalRisk, blockApprovalArgs:
			out = append(out, bl)
		}
	}
	out = append(out, slack.NewContextBlock(blockApprovalStatus, slack.NewTextBlockObject(slack.MarkdownType, status, false, false)))
	if len(buttons) > 0 {
		out = append(out, slack.NewActionBlock(blockApprovalActions, buttons...))
	}
	return out
}

// statusLine says what was decided, by whom and when.
func statusLine(a session.Approval) string {
	when := mrkdwn.Date(a.DecidedAt)
	by := ""
	if a.DecidedBy != "" {
		by = fmt.Sprintf(" by <@%s>", a.DecidedBy)
	}
	switch a.State {
	case session.ApprovalAllowOnce:
		return fmt.Sprintf(":white_check_mark: Allowed once%s at %s.", by, when)
	case session.ApprovalAllowSession:
		return fmt.Sprintf(":white_check_mark: Always allowed in this thread%s at %s.", by, when)
	case session.ApprovalDeny:
		return fmt.Sprintf(":no_entry_sign: Denied%s at %s.", by, when)
	case session.ApprovalExpired:
		return fmt.Sprintf(":hourglass: Nobody answered in time; denied at %s.", when)
	case session.ApprovalWithdrawn:
		if by != "" {
			return fmt.Sprintf(":black_square_for_stop: Withdrawn: the answer was stopped%s at %s.", by, when)
		}
		return fmt.Sprintf(":black_square_for_stop: Withdrawn: the answer was stopped at %s.", when)
	}
	return "Pending."
}

// shortArgs renders arguments as pretty JSON with long strings cut, escaped
// for mrkdwn so mentions stay inert, within one section; truncated reports
// whether anything was left out.
func shortArgs(raw json.RawMessage) (string, bool) {
	v, err := decodeArgs(raw)
	if err != nil {
		s := mrkdwn.EscapeText(mrkdwn.FenceSafe(string(raw)))
		if len(s) > argBlockLimit {
			return mrkdwn.Truncate(s, argBlockLimit), true
		}
		return s, false
	}
	cut := false
	v = shortenValues(v, &cut)
	s := mrkdwn.EscapeText(mrkdwn.FenceSafe(prettyJSON(v)))
	if len(s) > argBlockLimit {
		s, cut = mrkdwn.Truncate(s, argBlockLimit), true
	}
	return s, cut
}

// fullArgs is the whole argument text, escaped, for the modal.
func fullArgs(raw json.RawMessage) string {
	v, err := decodeArgs(raw)
	if err != nil {
		return mrkdwn.EscapeText(mrkdwn.FenceSafe(string(raw)))
	}
	return mrkdwn.EscapeText(mrkdwn.FenceSafe(prettyJSON(v)))
}

func decodeArgs(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func shortenValues(v any, cut *bool) any {
	switch x := v.(type) {
	case string:
		if utf8.RuneCountInString(x) > argValueLimit {
			*cut = true
			r := []rune(x)
			return string(r[:argValueLimit]) + fmt.Sprintf("… (%d more characters)", len(r)-argValueLimit)
		}
	case []any:
		for i := range x {
			x[i] = shortenValues(x[i], cut)
		}
	case map[string]any:
		for k := range x {
			x[k] = shortenValues(x[k], cut)
		}
	}
	return v
}

func prettyJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimRight(buf.String(), "\n")
}

// approvalAction handles a click on an approval button.
func (b *Bot) approvalAction(ctx context.Context, cb slack.InteractionCallback, act *slack.BlockAction) {
	cs := b.store
	id := act.Value
	user := cb.User.ID
	ap, err := cs.GetApproval(ctx, id)
	// The prompt is posted just before its record is stored: a very quick
	// click may arrive in between.
	for try := 0; errors.Is(err, session.ErrNotFound) && try < 40 && sleepCtx(ctx, 25*time.Millisecond); try++ {
		ap, err = cs.GetApproval(ctx, id)
	}
	switch {
	case errors.Is(err, session.ErrNotFound):
		b.tell(ctx, cb, "", "I don't know this request any more (it is too old or still being set up). If it was just posted, try again in a second.")
		return
	case err != nil:
		b.log.Warn("bot: reading an approval failed", "err", err)
		b.tell(ctx, cb, "", "I couldn't read this request just now. Please try again in a moment.")
		return
	}
	if cb.Team.ID != "" && cb.Team.ID != ap.Team {
		b.log.Warn("bot: approval click from another workspace ignored", "team", cb.Team.ID, "approval_team", ap.Team)
		return
	}
	if act.ActionID == actionViewArgs {
		b.showArgs(ctx, cb, ap)
		return
	}
	log := b.log.With(threadAttrs(ap.Team, ap.Channel, ap.ThreadTS)...)
	if ok, why := b.mayDecide(ctx, ap.Team, user, cb.User.TeamID, ap.Requester); !ok {
		b.tell(ctx, cb, ap.ThreadTS, why)
		b.audit(ctx, ap.Team, map[string]string{
			"event": auditRefused, "channel": ap.Channel, "thread": ap.ThreadTS, "user": ap.Requester, "by": user,
			"tool": ap.Tool, "server": ap.Server, "approval": ap.ID, "outcome": act.ActionID,
		})
		return
	}
	if !b.policyMayDecide(ctx, cb, ap, act.ActionID) {
		return
	}
	base := cb.Message.Blocks.BlockSet
	ts := cmpOr(ap.MessageTS, cb.Container.MessageTs)
	fallback := "Approval for " + mrkdwn.EscapeText(ap.Tool)
	if len(base) == 0 {
		base = []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType,
			fmt.Sprintf(":lock: Approval for `%s`", mrkdwn.InlineCode(ap.Tool)), false, false), nil, nil, slack.SectionBlockOptionBlockID(blockApprovalHead))}
	}

	if act.ActionID == actionRevoke {
		if ap.State != session.ApprovalAllowSession {
			b.tell(ctx, cb, ap.ThreadTS, "There is no thread-wide permission to revoke here.")
			return
		}
		if err := cs.RevokeGrant(ctx, ap.Thread(), ap.Tool); err != nil {
			log.Warn("bot: revoking a grant failed", "err", err)
			b.tell(ctx, cb, ap.ThreadTS, "I couldn't revoke the permission just now. Please try again.")
			return
		}
		b.audit(ctx, ap.Team, map[string]string{
			"event": auditRevoke, "channel": ap.Channel, "thread": ap.ThreadTS, "user": ap.Requester, "by": user,
			"tool": ap.Tool, "server": ap.Server, "approval": ap.ID,
		})
		status := statusLine(ap) + fmt.Sprintf(" Revoked by <@%s> at %s: I'll ask again next time.", user, mrkdwn.Date(time.Now()))
		b.deliverSoon(ctx, func(ctx context.Context) error {
			return b.updatePrompt(ctx, ap.Team, ap.Channel, ts, fallback, closeBlocks(base, status, nil))
		})
		return
	}

	var state string
	switch act.ActionID {
	case actionAllowOnce:
		state = session.ApprovalAllowOnce
	case actionAllowThread:
		state = session.ApprovalAllowSession
		if ap.OnceOnly {
			state = session.ApprovalAllowOnce // no thread-wide permission for this tool
		}
	default:
		state = session.ApprovalDeny
	}
	// Grant before deciding: the waiting turn may end, and the next one
	// start, right after the decision; a lost race takes the grant back.
	if state == session.ApprovalAllowSession && !ap.Decided() {
		if err := cs.Grant(ctx, ap.Thread(), ap.Tool); err != nil {
			log.Warn("bot: storing the thread grant failed", "err", err)
			b.tell(ctx, cb, ap.ThreadTS, "I couldn't record your answer just now. Please try again.")
			return
		}
	}
	got, won, err := cs.Decide(ctx, ap.ID, state, user)
	if err != nil {
		log.Warn("bot: recording a decision failed", "err", err)
		b.tell(ctx, cb, ap.ThreadTS, "I couldn't record your answer just now. Please try again.")
		return
	}
	if !won {
		if state == session.ApprovalAllowSession && got.State != session.ApprovalAllowSession {
			if err := cs.RevokeGrant(ctx, ap.Thread(), ap.Tool); err != nil {
				log.Warn("bot: taking back a grant failed", "err", err)
			}
		}
		if got.DecidedBy != user {
			b.tell(ctx, cb, ap.ThreadTS, "This request was already answered: "+stripEmoji(statusLine(got)))
		}
		return
	}
	b.audit(ctx, ap.Team, map[string]string{
		"event": auditDecision, "channel": ap.Channel, "thread": ap.ThreadTS, "user": ap.Requester, "by": user,
		"server": ap.Server, "tool": ap.Tool, "args_digest": ap.ArgsDigest, "decision": got.State, "approval": ap.ID,
		"duration_ms": waited(got),
	})
	var buttons []slack.BlockElement
	if got.State == session.ApprovalAllowSession {
		buttons = append(buttons, slack.NewButtonBlockElement(actionRevoke, ap.ID,
			slack.NewTextBlockObject(slack.PlainTextType, labelRevoke, false, false)))
	}
	b.deliverSoon(ctx, func(ctx context.Context) error {
		return b.updatePrompt(ctx, ap.Team, ap.Channel, ts, fallback, closeBlocks(base, statusLine(got), buttons))
	})
}

// soonWait is how long deliverSoon lets its caller wait.
const soonWait = time.Second

// deliverSoon runs fn, a must-deliver and repeatable Slack call (a
// prompt's update): at once when the budget has room, else in the
// background, so that neither a click's ack (Slack waits 3 s) nor a turn
// waits on a busy chat.update budget. Run waits for it on shutdown.
func (b *Bot) deliverSoon(ctx context.Context, fn func(ctx context.Context) error) {
	sctx, cancel := context.WithTimeout(ctx, soonWait)
	err := fn(sctx)
	cancel()
	if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return
	}
	// Shutting down (the runner closed), Do finishes it here.
	b.jobs.Do(ctx, "answering a click", func(jctx context.Context) {
		if err := fn(jctx); err != nil {
			b.log.Warn("bot: answering a click failed", "err", err)
		}
	})
}

// waited is how long an approval waited for its decision, in ms.
func waited(a session.Approval) string {
	if a.Created.IsZero() || a.DecidedAt.IsZero() {
		return ""
	}
	return strconv.FormatInt(a.DecidedAt.Sub(a.Created).Milliseconds(), 10)
}

// stripEmoji drops the leading :emoji: of a status line.
func stripEmoji(s string) string {
	if strings.HasPrefix(s, ":") {
		if i := strings.Index(s[1:], ": "); i >= 0 {
			return s[i+3:]
		}
	}
	return s
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// tell answers the person who clicked, visible only to them.
func (b *Bot) tell(ctx context.Context, cb slack.InteractionCallback, threadTS, text string) {
	channel := cmpOr(cb.Channel.ID, cb.Container.ChannelID)
	if channel == "" || cb.User.ID == "" {
		return
	}
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if threadTS = cmpOr(threadTS, cb.Container.ThreadTs); threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(threadTS))
	}
	err := b.slack.Do(ctx, slackapi.Call{Team: cmpOr(cb.Team.ID, cb.User.TeamID), Method: slackapi.ChatPostEphemeral}, func(ctx context.Context, api *slack.Client) error {
		_, err := api.PostEphemeralContext(ctx, channel, cb.User.ID, opts...)
		return err
	})
	if err != nil {
		b.log.Debug("bot: ephemeral answer failed", "err", err)
	}
}

// showArgs opens a modal with a call's full arguments, read from the
// thread's transcript (the approval record holds only their digest).
func (b *Bot) showArgs(ctx context.Context, cb slack.InteractionCallback, ap session.Approval) {
	if r, why := b.roleOf(ctx, ap.Team, cb.User.ID, cb.User.TeamID); r == roleNone && why != "guest" {
		b.tell(ctx, cb, ap.ThreadTS, "You can't see the arguments of this request.")
		return
	}
	_, history, err := b.store.Load(ctx, ap.Thread())
	if err != nil {
		b.tell(ctx, cb, ap.ThreadTS, "I couldn't load the arguments just now. Please try again.")
		return
	}
	var args json.RawMessage
	found := false
	for i := len(history) - 1; i >= 0 && !found; i-- {
		for _, c := range history[i].ToolCalls {
			if c.ID == ap.CallID {
				args, found = json.RawMessage(c.Arguments), true
				break
			}
		}
	}
	if !found {
		b.tell(ctx, cb, ap.ThreadTS, "I couldn't find the arguments of this request any more.")
		return
	}
	err = b.slack.Do(ctx, slackapi.Call{Team: ap.Team, Method: slackapi.ViewsOpen}, func(ctx context.Context, api *slack.Client) error {
		_, err := api.OpenViewContext(ctx, cb.TriggerID, argsModal(ap.Tool, args))
		return err
	})
	if err != nil {
		b.log.Warn("bot: opening the arguments modal failed", "err", err)
	}
}

// argsModal shows the full arguments in code sections.
func argsModal(tool string, args json.RawMessage) slack.ModalViewRequest {
	text := fullArgs(args)
	var blocks []slack.Block
	blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, "Arguments of `"+mrkdwn.InlineCode(tool)+"`", false, false)))
	for len(text) > 0 && len(blocks) <= argsModalParts {
		part := text
		if len(part) > argsModalLimit {
			part = mrkdwn.TruncateAt(text, argsModalLimit)
		}
		text = text[len(part):]
		blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "```\n"+part+"\n```", false, false), nil, nil))
	}
	if len(text) > 0 {
		blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, fmt.Sprintf("… %d more bytes not shown.", len(text)), false, false)))
	}
	return slack.ModalViewRequest{
		Type:   slack.VTModal,
		Title:  slack.NewTextBlockObject(slack.PlainTextType, "Tool arguments", false, false),
		Close:  slack.NewTextBlockObject(slack.PlainTextType, "Close", false, false),
		Blocks: slack.Blocks{BlockSet: blocks},
	}
}

// approvalClicks extracts the approval-button actions of a block_actions
// callback, with an approval id that can be one (session ids are hex).
func approvalClicks(cb slack.InteractionCallback) []*slack.BlockAction {
	if cb.Type != slack.InteractionTypeBlockActions {
		return nil
	}
	var out []*slack.BlockAction
	for _, a := range cb.ActionCallback.BlockActions {
		if a == nil {
			continue
		}
		switch a.ActionID {
		case actionAllowOnce, actionAllowThread, actionDeny, actionRevoke, actionViewArgs:
		default:
			continue
		}
		if validApprovalID(a.Value) {
			out = append(out, a)
		}
	}
	return out
}

func validApprovalID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// handleControl handles approval buttons and the add-server form. handled
// is false for callbacks that are not ours.
func (b *Bot) handleControl(ctx context.Context, cb slack.InteractionCallback) (ack any, handled bool) {
	switch cb.Type {
	case slack.InteractionTypeBlockActions:
		clicks := approvalClicks(cb)
		for _, a := range clicks {
			b.approvalAction(ctx, cb, a)
		}
		private := privateClicks(cb) // private.go
		for _, a := range private {
			b.privateAction(ctx, cb, a)
		}
		questions, home := questionClicks(cb), homeClicks(cb) // elicit.go, home.go
		for _, a := range questions {
			b.questionAction(ctx, cb, a)
		}
		for _, a := range home {
			b.homeAction(ctx, cb, a)
		}
		return nil, len(clicks)+len(private)+len(questions)+len(home) > 0
	case slack.InteractionTypeViewSubmission:
		switch cb.View.CallbackID {
		case callbackMCPAdd:
			return b.addSubmitted(ctx, cb), true
		case callbackQuestion:
			return b.questionSubmitted(ctx, cb), true
		}
	}
	return nil, false
}

// withdrawApprovals closes the thread's open prompts, for a Stop click that
// reached a replica not running the turn: the waiting turn, wherever it
// runs, wakes, does not run the calls and updates its prompts.
func (b *Bot) withdrawApprovals(ctx context.Context, k session.ThreadKey, by string) {
	cs := b.store
	pending, err := cs.PendingApprovals(ctx, k)
	if err != nil {
		b.log.Warn("bot: listing open approvals failed", append(threadAttrs(k.Team, k.Channel, k.ThreadTS), "err", err)...)
		return
	}
	for _, ap := range pending {
		if _, _, err := cs.Decide(ctx, ap.ID, session.ApprovalWithdrawn, by); err != nil {
			b.log.Warn("bot: withdrawing an approval failed", "approval", ap.ID, "err", err)
		}
	}
}
