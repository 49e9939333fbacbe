package ask

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// Approvals of tool calls: the Approver, the prompt's rendering, the
// click handlers (they change together, hence this file's length).

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

// Audit events of approvals.
const (
	auditApprovalAsked = "approval_requested"
	auditDecision      = "approval_decided"
	auditRefused       = "approval_refused"
	auditRevoke        = "grant_revoked"
)

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

// approvalWords are the status lines of an approval.
var approvalWords = words{
	decided: map[string]string{
		session.ApprovalAllowOnce:    ":white_check_mark: Allowed once",
		session.ApprovalAllowSession: ":white_check_mark: Always allowed in this thread",
		session.ApprovalDeny:         ":no_entry_sign: Denied",
	},
	expired:        ":hourglass: Nobody answered in time; denied",
	alone:          ":black_square_for_stop: Withdrawn: the answer was stopped at %s.",
	expiredState:   session.ApprovalExpired,
	withdrawnState: session.ApprovalWithdrawn,
}

// statusLine says what was decided, by whom and when.
func statusLine(a session.Approval) string {
	return approvalWords.status(a.State, a.DecidedBy, a.DecidedAt)
}

// threadApprover is the agent.Approver of one turn: it asks in the thread
// and waits for the answer through Redis, so the click may land on any
// replica.
type threadApprover struct {
	p         *Prompts
	k         session.ThreadKey
	requester string
}

// Approver returns the Approver of a turn in thread k started by
// requester.
func (p *Prompts) Approver(k session.ThreadKey, requester string) agent.Approver {
	return &threadApprover{p: p, k: k, requester: requester}
}

// Approve posts the prompt (or, when this turn resumes one another replica
// started, finds it), waits for the decision and returns it.
func (a *threadApprover) Approve(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
	p, k := a.p, a.k
	pr := newPrompt(req, a.requester)
	if req.Hints.Private && !inDM(k.Channel) {
		pr.args, pr.truncated, pr.hidden = "", false, true // onlookers see no arguments (the root's private results)
	}

	ap, found := a.resume(ctx, req.Call.ID)
	if !found {
		id := session.NewApprovalID()
		expires := p.expiry(ctx)
		ts, err := p.post(ctx, k, pr.fallback(), pr.pendingBlocks(id, expires))
		if err != nil {
			return agent.Deny, fmt.Errorf("posting the approval prompt: %w", err)
		}
		ap, err = p.store.CreateApproval(ctx, session.Approval{
			Prompt: session.Prompt{ID: id, Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS,
				Requester: a.requester, Server: req.Hints.Server, Expires: expires, MessageTS: ts},
			Tool: req.Call.Name, ArgsDigest: ArgsDigest(json.RawMessage(req.Call.Arguments)), CallID: req.Call.ID,
			AdminOnly: req.Hints.AdminOnly, OnceOnly: req.Hints.OnceOnly, Grant: agent.GrantKey(req.Call.Name, req.Hints),
		})
		if err != nil {
			p.log.With(threadAttrs(k)...).Error("bot: storing the approval failed; denying", "err", err)
			p.update(ctx, k.Team, k.Channel, ts, pr.fallback(), pr.closedBlocks("_This request could not be recorded, so the tool did not run._"))
			return agent.Deny, fmt.Errorf("storing the approval: %w", err)
		}
		p.opts.Audit(ctx, k.Team, map[string]string{
			"event": auditApprovalAsked, "channel": k.Channel, "thread": k.ThreadTS, "user": a.requester,
			"server": req.Hints.Server, "tool": req.Call.Name, "args_digest": ap.ArgsDigest, "approval": ap.ID,
		})
	}

	got := ap
	var err error
	if ap.State == session.ApprovalPending {
		got, err = wait(ctx, p, "approval of "+req.Hints.Server+"/"+req.Hints.Tool+" by "+a.requester+" in "+k.Channel, ap.ID, p.store.WaitApproval)
	}
	if err != nil {
		if ctx.Err() != nil {
			return agent.Deny, a.abandon(ctx, ap, pr)
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
		a.settle(ctx, got, pr, statusLine(got))
		return agent.Deny, errApprovalExpired
	}
	a.settle(ctx, got, pr, statusLine(got))
	p.remoteStop(k, got.State == session.ApprovalWithdrawn, got.DecidedBy)
	return agent.Deny, errApprovalWithdrawn
}

// resume finds the approval of call id that an earlier holder of this
// turn posted, so the person is not asked twice: a pending one to wait on,
// or one a person answered while the turn changed hands (a replica shut
// down as they clicked), whose answer stands. One withdrawn or expired is
// not found: the call is asked about again.
func (a *threadApprover) resume(ctx context.Context, callID string) (session.Approval, bool) {
	if callID == "" {
		return session.Approval{}, false
	}
	all, err := a.p.store.ThreadApprovals(ctx, a.k)
	if err != nil {
		return session.Approval{}, false
	}
	for _, ap := range slices.Backward(all) {
		if ap.CallID != callID {
			continue
		}
		switch ap.State {
		case session.ApprovalPending, session.ApprovalAllowOnce, session.ApprovalAllowSession, session.ApprovalDeny:
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
func (a *threadApprover) abandon(ctx context.Context, ap session.Approval, pr prompt) error {
	if errors.Is(context.Cause(ctx), session.ErrLeaseLost) {
		return ctx.Err()
	}
	return a.p.abandon(ctx, "approval", ap.ID, func(ctx context.Context, e ending) error {
		state := session.ApprovalWithdrawn
		if e.expired {
			state = session.ApprovalExpired
		}
		got, won, err := a.p.store.Decide(ctx, ap.ID, state, e.by)
		if err != nil || !won {
			return err // a click got there first and updated the prompt
		}
		status := statusLine(got)
		if e.shutdown {
			status = ":black_square_for_stop: Withdrawn: the bot restarted before anyone answered. I'll ask again if the tool is still needed."
		}
		a.settle(ctx, got, pr, status)
		return nil
	})
}

// settle updates the prompt for an approval this turn closed (expired or
// withdrawn) and audits it; clicks update their own prompt.
func (a *threadApprover) settle(ctx context.Context, got session.Approval, pr prompt, status string) {
	a.p.settle(ctx, got.Team, got.Channel, got.MessageTS, pr.fallback(), pr.closedBlocks(status), decisionAudit(got))
}

// decisionAudit is the audit entry of a decided approval.
func decisionAudit(got session.Approval) map[string]string {
	return map[string]string{
		"event": auditDecision, "channel": got.Channel, "thread": got.ThreadTS, "user": got.Requester,
		"by": got.DecidedBy, "server": got.Server, "tool": got.Tool, "args_digest": got.ArgsDigest,
		"decision": got.State, "approval": got.ID, "duration_ms": waited(got.Created, got.DecidedAt),
	}
}

// prompt is the content of one approval message.
type prompt struct {
	title     string // server/tool
	requester string
	risk      string
	args      string // escaped, truncated pretty JSON
	truncated bool
	// adminOnly and onceOnly come from the tool policy (agent.Hints, set by mcp).
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

func (pr prompt) fallback() string {
	return "Approval needed to run " + mrkdwn.EscapeText(pr.title)
}

func (pr prompt) baseBlocks() []slack.Block {
	head := fmt.Sprintf(":lock: *Approval needed* to run `%s`", mrkdwn.InlineCode(pr.title))
	if pr.requester != "" {
		head += fmt.Sprintf(" for <@%s>", pr.requester)
	}
	args := "```\n" + pr.args + "\n```"
	if a := strings.TrimSpace(pr.args); a == "{}" || a == "" || a == "null" {
		args = "_No arguments._"
	}
	if pr.hidden {
		args = "_Arguments hidden: this tool's results are private to the person who asked._"
	}
	return []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, head, false, false), nil, nil, slack.SectionBlockOptionBlockID(blockApprovalHead)),
		slack.NewContextBlock(blockApprovalRisk, slack.NewTextBlockObject(slack.MarkdownType, mrkdwn.EscapeText(pr.risk), false, false)),
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, args, false, false), nil, nil, slack.SectionBlockOptionBlockID(blockApprovalArgs)),
	}
}

// pendingBlocks is the prompt with its buttons.
func (pr prompt) pendingBlocks(id string, expires time.Time) []slack.Block {
	once := slack.NewButtonBlockElement(actionAllowOnce, id, slack.NewTextBlockObject(slack.PlainTextType, labelAllowOnce, false, false)).WithStyle(slack.StylePrimary)
	thread := slack.NewButtonBlockElement(actionAllowThread, id, slack.NewTextBlockObject(slack.PlainTextType, labelAllowThread, false, false))
	deny := slack.NewButtonBlockElement(actionDeny, id, slack.NewTextBlockObject(slack.PlainTextType, labelDeny, false, false)).WithStyle(slack.StyleDanger)
	elems := []slack.BlockElement{once, thread, deny}
	if pr.onceOnly {
		elems = []slack.BlockElement{once, deny}
	}
	if pr.truncated {
		elems = append(elems, slack.NewButtonBlockElement(actionViewArgs, id, slack.NewTextBlockObject(slack.PlainTextType, labelViewArgs, false, false)))
	}
	who := "The person who asked or a workspace admin can decide."
	if pr.requester != "" {
		who = fmt.Sprintf("<@%s> or a workspace admin can decide.", pr.requester)
	}
	if pr.adminOnly {
		who = policyAdminWho
	}
	status := fmt.Sprintf("%s Without an answer by %s it is denied.", who, mrkdwn.Date(expires))
	return append(pr.baseBlocks(),
		slack.NewActionBlock(blockApprovalActions, elems...),
		slack.NewContextBlock(blockApprovalStatus, slack.NewTextBlockObject(slack.MarkdownType, status, false, false)))
}

// closedBlocks is the prompt after a decision, without buttons.
func (pr prompt) closedBlocks(status string) []slack.Block {
	return closeApproval(pr.baseBlocks(), status, nil)
}

// closeApproval keeps the head, risk and arguments of base (the message
// clicked) and appends the status and only the given buttons (Revoke for
// a thread-wide grant).
func closeApproval(base []slack.Block, status string, buttons []slack.BlockElement) []slack.Block {
	var kept []slack.Block
	for _, bl := range base {
		switch bl.ID() {
		case blockApprovalHead, blockApprovalRisk, blockApprovalArgs:
			kept = append(kept, bl)
		}
	}
	var more []slack.Block
	if len(buttons) > 0 {
		more = append(more, slack.NewActionBlock(blockApprovalActions, buttons...))
	}
	return closeBlocks(kept, blockApprovalStatus, status, more...)
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
func (p *Prompts) approvalAction(ctx context.Context, cb slack.InteractionCallback, act *slack.BlockAction) {
	cs := p.store
	ap, ok := load(ctx, p, cb, act.Value, "request", "an approval", "approval", cs.GetApproval, func(a session.Approval) string { return a.Team })
	if !ok {
		return
	}
	if act.ActionID == actionViewArgs {
		p.showArgs(ctx, cb, ap)
		return
	}
	user := cb.User.ID
	log := p.log.With(threadAttrs(ap.Thread())...)
	if ok, why := p.opts.Roles.MayAct(ctx, ap.Team, user, cb.User.TeamID, ap.Requester, actApprove); !ok {
		p.Tell(ctx, cb, ap.ThreadTS, why)
		p.opts.Audit(ctx, ap.Team, map[string]string{
			"event": auditRefused, "channel": ap.Channel, "thread": ap.ThreadTS, "user": ap.Requester, "by": user,
			"tool": ap.Tool, "server": ap.Server, "approval": ap.ID, "outcome": act.ActionID,
		})
		return
	}
	if !p.policyMayDecide(ctx, cb, ap, act.ActionID) {
		return
	}
	base := cb.Message.Blocks.BlockSet
	ts := cmp.Or(ap.MessageTS, cb.Container.MessageTs)
	fallback := "Approval for " + mrkdwn.EscapeText(ap.Tool)
	if len(base) == 0 {
		base = []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType,
			fmt.Sprintf(":lock: Approval for `%s`", mrkdwn.InlineCode(ap.Tool)), false, false), nil, nil, slack.SectionBlockOptionBlockID(blockApprovalHead))}
	}

	if act.ActionID == actionRevoke {
		if ap.State != session.ApprovalAllowSession {
			p.Tell(ctx, cb, ap.ThreadTS, "There is no thread-wide permission to revoke here.")
			return
		}
		if err := cs.RevokeGrant(ctx, ap.Thread(), ap.GrantName()); err != nil {
			log.Warn("bot: revoking a grant failed", "err", err)
			p.Tell(ctx, cb, ap.ThreadTS, "I couldn't revoke the permission just now. Please try again.")
			return
		}
		status := statusLine(ap) + fmt.Sprintf(" Revoked by <@%s> at %s: I'll ask again next time.", user, mrkdwn.Date(time.Now()))
		p.opts.Audit(ctx, ap.Team, map[string]string{
			"event": auditRevoke, "channel": ap.Channel, "thread": ap.ThreadTS, "user": ap.Requester, "by": user,
			"tool": ap.Tool, "server": ap.Server, "approval": ap.ID,
		})
		p.soon(ctx, func(ctx context.Context) error {
			return p.update(ctx, ap.Team, ap.Channel, ts, fallback, closeApproval(base, status, nil))
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
		if err := cs.Grant(ctx, ap.Thread(), ap.GrantName()); err != nil {
			log.Warn("bot: storing the thread grant failed", "err", err)
			p.Tell(ctx, cb, ap.ThreadTS, "I couldn't record your answer just now. Please try again.")
			return
		}
	}
	got, won, err := cs.Decide(ctx, ap.ID, state, user)
	if err != nil {
		log.Warn("bot: recording a decision failed", "err", err)
		p.Tell(ctx, cb, ap.ThreadTS, "I couldn't record your answer just now. Please try again.")
		return
	}
	if !won {
		if state == session.ApprovalAllowSession && got.State != session.ApprovalAllowSession {
			if err := cs.RevokeGrant(ctx, ap.Thread(), ap.GrantName()); err != nil {
				log.Warn("bot: taking back a grant failed", "err", err)
			}
		}
		if got.DecidedBy != user {
			p.Tell(ctx, cb, ap.ThreadTS, "This request was already answered: "+stripEmoji(statusLine(got)))
		}
		return
	}
	var buttons []slack.BlockElement
	if got.State == session.ApprovalAllowSession {
		buttons = append(buttons, slack.NewButtonBlockElement(actionRevoke, ap.ID,
			slack.NewTextBlockObject(slack.PlainTextType, labelRevoke, false, false)))
	}
	p.closeMessage(ctx, ap.Team, ap.Channel, ts, fallback, closeApproval(base, statusLine(got), buttons), decisionAudit(got))
}

// showArgs opens a modal with a call's full arguments, read from the
// thread's transcript (the approval record holds only their digest).
func (p *Prompts) showArgs(ctx context.Context, cb slack.InteractionCallback, ap session.Approval) {
	if !p.opts.Roles.MaySee(ctx, ap.Team, cb.User.ID, cb.User.TeamID) {
		p.Tell(ctx, cb, ap.ThreadTS, "You can't see the arguments of this request.")
		return
	}
	_, history, err := p.store.Load(ctx, ap.Thread())
	if err != nil {
		p.Tell(ctx, cb, ap.ThreadTS, "I couldn't load the arguments just now. Please try again.")
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
		p.Tell(ctx, cb, ap.ThreadTS, "I couldn't find the arguments of this request any more.")
		return
	}
	err = p.api.Do(ctx, slackapi.Call{Team: ap.Team, Method: slackapi.ViewsOpen}, func(ctx context.Context, api *slack.Client) error {
		_, err := api.OpenViewContext(ctx, cb.TriggerID, argsModal(ap.Tool, args))
		return err
	})
	if err != nil {
		p.log.Warn("bot: opening the arguments modal failed", "err", err)
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
