package ask

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent/ask"
	"github.com/bobbinbot/bobbin/bot/internal/jobs"
	"github.com/bobbinbot/bobbin/bot/internal/pause"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// DefaultTimeout is how long a prompt waits for an answer when
// Options.Timeout is zero (APPROVAL_TIMEOUT).
const DefaultTimeout = 10 * time.Minute

// Store is what prompts keep in Redis (*session.Store): approvals and the
// thread grants they give, questions, where Connect was asked, and the
// transcript a "View full arguments" click reads the call from.
type Store interface {
	CreateApproval(ctx context.Context, a session.Approval) (session.Approval, error)
	GetApproval(ctx context.Context, id string) (session.Approval, error)
	Decide(ctx context.Context, id, state, by string) (session.Approval, bool, error)
	WaitApproval(ctx context.Context, id string) (session.Approval, error)
	PendingApprovals(ctx context.Context, k session.ThreadKey) ([]session.Approval, error)
	ThreadApprovals(ctx context.Context, k session.ThreadKey) ([]session.Approval, error)
	Grant(ctx context.Context, k session.ThreadKey, tool string) error
	RevokeGrant(ctx context.Context, k session.ThreadKey, tool string) error

	CreateQuestion(ctx context.Context, q session.Question) (session.Question, error)
	GetQuestion(ctx context.Context, id string) (session.Question, error)
	AnswerQuestion(ctx context.Context, id, state, by string, answer []byte) (session.Question, bool, error)
	ClearQuestionAnswer(ctx context.Context, id string) error
	WaitQuestion(ctx context.Context, id string) (session.Question, error)
	PendingQuestions(ctx context.Context, k session.ThreadKey) ([]session.Question, error)

	PutConnectNotice(ctx context.Context, team, server, user string, rec []byte, ttl time.Duration) error
	ConnectNotice(ctx context.Context, team, server, user string) ([]byte, error)

	Load(ctx context.Context, k session.ThreadKey) (session.Meta, []provider.Message, error)
}

// Roles is who may do what (the root's roles): the person a prompt is
// for, a workspace admin, anyone of the workspace.
type Roles interface {
	// MayAct reports whether user (of userTeam) may act on a prompt
	// requester's turn asked: the requester or an admin. action names the
	// act in deny, what the clicker is told otherwise ("answer this
	// request").
	MayAct(ctx context.Context, team, user, userTeam, requester, action string) (ok bool, deny string)
	// IsAdmin reports whether user is a workspace admin; unchecked is true
	// when that could not be checked (Slack did not answer).
	IsAdmin(ctx context.Context, team, user, userTeam string) (admin, unchecked bool)
	// MaySee reports whether user may see what a prompt hides from the
	// thread (a call's full arguments): a person of the workspace.
	MaySee(ctx context.Context, team, user, userTeam string) bool
}

// Options configure Prompts. API, Store, Roles, Audit and Jobs are
// required.
type Options struct {
	API   *slackapi.Client
	Store Store
	Roles Roles
	// Audit writes one audit entry (the root's audit log).
	Audit func(ctx context.Context, team string, fields map[string]string)
	// Jobs runs a prompt's update that waits on the chat.update budget
	// after the click's ack (the root's runner, waited for on shutdown).
	Jobs *jobs.Runner
	// Timeout is how long a prompt waits (default DefaultTimeout).
	Timeout time.Duration
	// CheckForm validates a form answer against its fields and returns a
	// message per failing field name ("" for the form as a whole); nil
	// checks required fields only.
	CheckForm func(fields []ask.Field, content map[string]any) map[string]string
	// HTTPClient carries response_url answers (default: 10 s timeout).
	HTTPClient *http.Client
	Logger     *slog.Logger

	// Waiting records that a turn waits on a person for what (the root's
	// shutdown withdraws turns that only wait on people); the returned
	// func ends the wait. Nil records nothing.
	Waiting func(what string) (end func())
	// StoppedBy reads a turn's cancel cause: who pressed Stop, if anyone.
	StoppedBy func(cause error) (user string, ok bool)
	// Shutdown is the cancel cause of turns withdrawn by a restart.
	Shutdown error
	// Stop stops the turn of thread k running here, for a Stop by user
	// that reached another replica and withdrew the prompt it waits on.
	Stop func(k session.ThreadKey, user string)
	// Home refreshes user's App Home (after a connection completed).
	Home func(ctx context.Context, team, user string)
}

// Prompts posts the prompts of a thread's turns, records them, waits for
// the answer from any replica and settles or withdraws them.
type Prompts struct {
	opts  Options
	api   *slackapi.Client
	store Store
	log   *slog.Logger
}

// New builds Prompts; it panics without a required option.
func New(opts Options) *Prompts {
	if opts.API == nil || opts.Store == nil || opts.Roles == nil || opts.Audit == nil || opts.Jobs == nil {
		panic("ask: New needs API, Store, Roles, Audit and Jobs")
	}
	opts.Timeout = cmp.Or(opts.Timeout, DefaultTimeout)
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Waiting == nil {
		opts.Waiting = func(string) func() { return func() {} }
	}
	if opts.StoppedBy == nil {
		opts.StoppedBy = func(error) (string, bool) { return "", false }
	}
	if opts.Stop == nil {
		opts.Stop = func(session.ThreadKey, string) {}
	}
	if opts.Home == nil {
		opts.Home = func(context.Context, string, string) {}
	}
	return &Prompts{opts: opts, api: opts.API, store: opts.Store, log: opts.Logger}
}

// Timeout is how long a prompt waits for an answer.
func (p *Prompts) Timeout() time.Duration { return p.opts.Timeout }

// expiry is when a prompt posted now expires: after Timeout, or when the
// call's own deadline comes first.
func (p *Prompts) expiry(ctx context.Context) time.Time {
	expires := time.Now().Add(p.opts.Timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(expires) {
		expires = dl
	}
	return expires
}

// post posts a prompt in thread k (must-deliver) and returns its ts. The
// record is stored after it: the buttons carry its id, and a click that
// beats the store waits for it (load).
func (p *Prompts) post(ctx context.Context, k session.ThreadKey, fallback string, blocks []slack.Block) (string, error) {
	return p.api.Post(ctx, k.Team, k.Channel, slackapi.Msg{Text: mrkdwn.Text(fallback), Blocks: blocks, Thread: k.ThreadTS})
}

// wait records that the turn waits on a person while wait runs.
func wait[R any](ctx context.Context, p *Prompts, what, id string, fn func(ctx context.Context, id string) (R, error)) (R, error) {
	end := p.opts.Waiting(what)
	defer end()
	return fn(ctx, id)
}

// ending is how a prompt closes when its turn's context ended while it
// was open.
type ending struct {
	// expired: the call's own deadline; else withdrawn (by whoever pressed
	// Stop, if anyone).
	expired bool
	by      string
	// shutdown: the bot restarts.
	shutdown bool
}

func (p *Prompts) ended(ctx context.Context) ending {
	cause := context.Cause(ctx)
	if by, ok := p.opts.StoppedBy(cause); ok {
		return ending{by: by}
	}
	return ending{shutdown: p.opts.Shutdown != nil && errors.Is(cause, p.opts.Shutdown), expired: errors.Is(cause, context.DeadlineExceeded)}
}

// abandon closes a prompt whose turn's context ended: close records how
// (and settles the message when it won; a click that got there first
// updated it). It returns the context's error.
func (p *Prompts) abandon(ctx context.Context, what, id string, close func(ctx context.Context, e ending) error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := close(dctx, p.ended(ctx)); err != nil {
		p.log.Warn("bot: closing an abandoned "+what+" failed", what, id, "err", err)
	}
	return ctx.Err()
}

// remoteStop stops thread k's turn here when a Stop on another replica
// withdrew the prompt it waited on (now, not at the next stop poll).
func (p *Prompts) remoteStop(k session.ThreadKey, withdrawn bool, by string) {
	if withdrawn && by != "" {
		p.opts.Stop(k, by)
	}
}

// settle updates the message of a prompt this turn closed (expired or
// withdrawn) and audits it, past the turn's end; clicks update their own
// prompt (closeMessage).
func (p *Prompts) settle(ctx context.Context, team, channel, ts, fallback string, blocks []slack.Block, audit map[string]string) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	p.closeMessage(uctx, team, channel, ts, fallback, blocks, audit)
}

// closeMessage updates a closed prompt's message (soon) and audits it.
func (p *Prompts) closeMessage(ctx context.Context, team, channel, ts, fallback string, blocks []slack.Block, audit map[string]string) {
	p.soon(ctx, func(ctx context.Context) error {
		return p.update(ctx, team, channel, ts, fallback, blocks)
	})
	p.opts.Audit(ctx, team, audit)
}

// update replaces a prompt's message (must-deliver: it waits for budget,
// and through rate limits, until ctx ends). The edit is the same whenever
// it lands, so it may be repeated.
func (p *Prompts) update(ctx context.Context, team, channel, ts, fallback string, blocks []slack.Block) error {
	if ts == "" {
		return nil
	}
	err := p.api.Do(ctx, slackapi.Call{Team: team, Method: slackapi.ChatUpdate}, func(ctx context.Context, api *slack.Client) error {
		_, _, _, err := api.UpdateMessageContext(ctx, channel, ts,
			slack.MsgOptionText(fallback, false), slack.MsgOptionBlocks(blocks...))
		return err
	})
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		p.log.Warn("bot: updating the approval prompt failed", "team", team, "channel", channel, "err", err)
	}
	return err
}

// soonWait is how long soon lets its caller wait.
const soonWait = time.Second

// soon runs fn, a must-deliver and repeatable Slack call (a prompt's
// update): at once when the budget has room, else in the background, so
// that neither a click's ack (Slack waits 3 s) nor a turn waits on a busy
// chat.update budget. The root waits for it on shutdown.
func (p *Prompts) soon(ctx context.Context, fn func(ctx context.Context) error) {
	sctx, cancel := context.WithTimeout(ctx, soonWait)
	err := fn(sctx)
	cancel()
	if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return
	}
	// Shutting down (the runner closed), Do finishes it here.
	p.opts.Jobs.Do(ctx, "answering a click", func(jctx context.Context) {
		if err := fn(jctx); err != nil {
			p.log.Warn("bot: answering a click failed", "err", err)
		}
	})
}

// Tell answers the person who clicked, visible only to them, in threadTS
// ("" for the click's thread).
func (p *Prompts) Tell(ctx context.Context, cb slack.InteractionCallback, threadTS, text string) {
	channel := cmp.Or(cb.Channel.ID, cb.Container.ChannelID)
	if channel == "" || cb.User.ID == "" {
		return
	}
	msg := slackapi.Msg{Text: mrkdwn.Text(text), Thread: cmp.Or(threadTS, cb.Container.ThreadTs)}
	if err := p.api.Ephemeral(ctx, cmp.Or(cb.Team.ID, cb.User.TeamID), channel, cb.User.ID, msg); err != nil {
		p.log.Debug("bot: ephemeral answer failed", "err", err)
	}
}

// ephemeralIn posts text (and blocks) only user sees, in channel and
// thread ("" for none), must-deliver within ctx.
func (p *Prompts) ephemeralIn(ctx context.Context, team, channel, thread, user, text string, blocks []slack.Block) error {
	return p.api.Ephemeral(ctx, team, channel, user, slackapi.Msg{Text: mrkdwn.Text(text), Blocks: blocks, Thread: thread})
}

// load reads the record a click names. The prompt is posted just before
// its record is stored: a very quick click waits a little. what names the
// prompt for the clicker ("request", "question") and the log ("an
// approval", "a question"; key is the log's attribute).
func load[R any](ctx context.Context, p *Prompts, cb slack.InteractionCallback, id, what, logWhat, key string,
	get func(ctx context.Context, id string) (R, error), team func(R) string) (R, bool) {
	rec, err := get(ctx, id)
	for try := 0; errors.Is(err, session.ErrNotFound) && try < 40 && pause.Sleep(ctx, 25*time.Millisecond); try++ {
		rec, err = get(ctx, id)
	}
	switch {
	case errors.Is(err, session.ErrNotFound):
		p.Tell(ctx, cb, "", "I don't know this "+what+" any more (it is too old or still being set up). If it was just posted, try again in a second.")
		return rec, false
	case err != nil:
		p.log.Warn("bot: reading "+logWhat+" failed", "err", err)
		p.Tell(ctx, cb, "", "I couldn't read this "+what+" just now. Please try again in a moment.")
		return rec, false
	}
	if cb.Team.ID != "" && cb.Team.ID != team(rec) {
		p.log.Warn("bot: "+key+" click from another workspace ignored", "team", cb.Team.ID, key+"_team", team(rec))
		return rec, false
	}
	return rec, true
}

// Withdraw closes thread k's open prompts (approvals and questions), for a
// Stop by user that reached a replica not running the turn: the waiting
// turn, wherever it runs, wakes, does not go on and updates its prompts.
func (p *Prompts) Withdraw(ctx context.Context, k session.ThreadKey, by string) {
	approvals, err := p.store.PendingApprovals(ctx, k)
	if err != nil {
		p.log.Warn("bot: listing open approvals failed", append(threadAttrs(k), "err", err)...)
	}
	for _, ap := range approvals {
		if _, _, err := p.store.Decide(ctx, ap.ID, session.ApprovalWithdrawn, by); err != nil {
			p.log.Warn("bot: withdrawing an approval failed", "approval", ap.ID, "err", err)
		}
	}
	questions, err := p.store.PendingQuestions(ctx, k)
	if err != nil {
		p.log.Warn("bot: listing open questions failed", append(threadAttrs(k), "err", err)...)
	}
	for _, q := range questions {
		if _, _, err := p.store.AnswerQuestion(ctx, q.ID, session.QuestionWithdrawn, by, nil); err != nil {
			p.log.Warn("bot: withdrawing a question failed", "question", q.ID, "err", err)
		}
	}
}

// Action ids of every prompt button; each value is the prompt's id.
var actionIDs = []string{
	actionAllowOnce, actionAllowThread, actionDeny, actionRevoke, actionViewArgs,
	actionQAnswer, actionQDecline, actionQCancel, actionQDone, actionQOpen,
}

// ActionIDs are the action ids of the prompts' buttons (Action handles
// them). The Connect button (a link) is not among them: its click is
// only acked.
func ActionIDs() []string { return append([]string(nil), actionIDs...) }

// Clicks extracts the prompt-button actions of a block_actions callback,
// with a value that can be a prompt id.
func Clicks(cb slack.InteractionCallback) []*slack.BlockAction {
	if cb.Type != slack.InteractionTypeBlockActions {
		return nil
	}
	var out []*slack.BlockAction
	for _, a := range cb.ActionCallback.BlockActions {
		if a != nil && isAction(a.ActionID) && ValidID(a.Value) {
			out = append(out, a)
		}
	}
	return out
}

func isAction(id string) bool {
	for _, a := range actionIDs {
		if a == id {
			return true
		}
	}
	return false
}

// Action handles a click on a prompt's button (one of Clicks).
func (p *Prompts) Action(ctx context.Context, cb slack.InteractionCallback, act *slack.BlockAction) {
	switch act.ActionID {
	case actionAllowOnce, actionAllowThread, actionDeny, actionRevoke, actionViewArgs:
		p.approvalAction(ctx, cb, act)
	default:
		p.questionAction(ctx, cb, act)
	}
}

// ValidID reports whether id can be a prompt's id (session ids are hex).
func ValidID(id string) bool {
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

// words are what one kind of prompt says of its closed states: status
// lines like ":white_check_mark: Allowed once by <@U1> at <date>.".
type words struct {
	// decided maps a state to its phrase, followed by " by <@who>" and
	// " at <date>.".
	decided map[string]string
	// expired is the phrase of an expiry, followed by " at <date>.".
	expired string
	// alone is the line of a withdrawal nobody pressed Stop for (a
	// format of the date).
	alone string
	// expiredState and withdrawnState are the kind's states of an expiry
	// and a withdrawal.
	expiredState, withdrawnState string
}

// status says how a prompt ended, by whom and when.
func (w words) status(state, by string, at time.Time) string {
	when := mrkdwn.Date(at)
	if by != "" {
		by = fmt.Sprintf(" by <@%s>", by)
	}
	switch state {
	case w.expiredState:
		return fmt.Sprintf("%s at %s.", w.expired, when)
	case w.withdrawnState:
		if by != "" {
			return fmt.Sprintf(":black_square_for_stop: Withdrawn: the answer was stopped%s at %s.", by, when)
		}
		return fmt.Sprintf(w.alone, when)
	}
	if phrase, ok := w.decided[state]; ok {
		return fmt.Sprintf("%s%s at %s.", phrase, by, when)
	}
	return "Pending."
}

// closeBlocks is a closed prompt: base (what stays of it), the status in
// a context block statusID, then more (buttons left, for instance).
func closeBlocks(base []slack.Block, statusID, status string, more ...slack.Block) []slack.Block {
	out := append(base[:len(base):len(base)], slack.NewContextBlock(statusID, slack.NewTextBlockObject(slack.MarkdownType, status, false, false)))
	return append(out, more...)
}

// waited is how long a prompt waited for its answer, in ms.
func waited(created, decided time.Time) string {
	if created.IsZero() || decided.IsZero() {
		return ""
	}
	return strconv.FormatInt(decided.Sub(created).Milliseconds(), 10)
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

// inDM reports whether a conversation id is a direct message.
func inDM(channel string) bool { return strings.HasPrefix(channel, "D") }

func threadAttrs(k session.ThreadKey) []any {
	return []any{slog.String("team", k.Team), slog.String("channel", k.Channel), slog.String("thread", k.ThreadTS)}
}
