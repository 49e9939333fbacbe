package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent/ask"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// Questions from MCP servers (elicitation, issue 14): a server asks the
// person behind a tool call for input. Shaped like the approval flow: Ask
// posts the question in the thread, stores it in Redis (session.Question)
// and blocks until someone allowed answers on any replica, the question
// expires (APPROVAL_TIMEOUT) or the turn stops; the answer is taken
// exactly once by a compare-and-set. Forms open a modal built from the
// schema (elicit_form.go); URL questions send the link to the requester
// only, with Done and Cancel.

// Question modes.
const (
	QuestionForm = "form"
	QuestionURL  = "url"
)

// Answer actions.
const (
	AnswerAccept  = "accept"
	AnswerDecline = "decline"
	AnswerCancel  = "cancel"
)

// Question is what an MCP server asks the person behind a tool call
// (cmd/bot adapts mcp.Elicitation). It is stored as JSON with the
// question, so any replica can render it.
type Question struct {
	// Team, User, Channel, Thread: who is asked, and where.
	Team    string `json:"team"`
	User    string `json:"user"`
	Channel string `json:"channel"`
	Thread  string `json:"thread"`
	Server  string `json:"server"`
	// Mode is QuestionForm or QuestionURL.
	Mode    string `json:"mode"`
	Message string `json:"message"`
	// Fields are the form's (form mode), in order.
	Fields []FormField `json:"fields,omitempty"`
	// AsksForSecret: a field looks like a password, token or key.
	AsksForSecret bool `json:"asks_for_secret,omitempty"`
	// URL is the page to open (URL mode).
	URL string `json:"url,omitempty"`
}

// Field kinds of a form (ask's).
const (
	FieldString    = ask.FieldString
	FieldNumber    = ask.FieldNumber
	FieldInteger   = ask.FieldInteger
	FieldBoolean   = ask.FieldBoolean
	FieldEnum      = ask.FieldEnum
	FieldMultiEnum = ask.FieldMultiEnum
)

// FormField is one field of a form: mcp parses it from the server's
// schema, the bot renders and stores it (one definition, ask.Field).
type FormField = ask.Field

// FormOption is one choice of an enum (ask.Option).
type FormOption = ask.Option

// QuestionAnswer is the person's answer. Content (form accept only) maps
// field names to string, float64, int64, bool or []string values.
type QuestionAnswer struct {
	Action  string
	Content map[string]any
}

// questionStore keeps questions (*session.Store).
type questionStore interface {
	CreateQuestion(ctx context.Context, q session.Question) (session.Question, error)
	GetQuestion(ctx context.Context, id string) (session.Question, error)
	AnswerQuestion(ctx context.Context, id, state, by string, answer []byte) (session.Question, bool, error)
	ClearQuestionAnswer(ctx context.Context, id string) error
	WaitQuestion(ctx context.Context, id string) (session.Question, error)
	PendingQuestions(ctx context.Context, k session.ThreadKey) ([]session.Question, error)
}

// Action ids of the question buttons; every value is the question id.
const (
	actionQAnswer  = "bobbin_q_answer"
	actionQDecline = "bobbin_q_decline"
	actionQCancel  = "bobbin_q_cancel"
	actionQDone    = "bobbin_q_done"
	actionQOpen    = "bobbin_q_open" // the URL button: ack only
)

// Button labels.
const (
	labelAnswer  = "Answer"
	labelDecline = "Decline"
	labelCancel  = "Cancel"
	labelDone    = "Done"
)

// Block ids of a question message.
const (
	blockQHead    = "bobbin_q_head"
	blockQWarn    = "bobbin_q_warn"
	blockQActions = "bobbin_q_actions"
	blockQAnswers = "bobbin_q_answers"
	blockQStatus  = "bobbin_q_status"
)

var errQuestionUnrecorded = errors.New("the question could not be recorded")

// Ask posts a server's question in the thread, addressed to the requester,
// and waits for the answer from any replica. The question expires after
// APPROVAL_TIMEOUT (answered cancel); Stop withdraws it. An error means
// nobody answered (callers answer the server cancel).
func (b *Bot) Ask(ctx context.Context, q Question) (QuestionAnswer, error) {
	qs := b.store
	if q.Team == "" || q.User == "" || q.Channel == "" || q.Thread == "" {
		return QuestionAnswer{Action: AnswerCancel}, errors.New("the question has nobody to ask")
	}
	if q.Mode == QuestionURL {
		if u, err := url.Parse(q.URL); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || len(q.URL) > 3000 {
			return QuestionAnswer{Action: AnswerCancel}, errors.New("the page to open is not a usable https URL")
		}
	}
	k := session.ThreadKey{Team: q.Team, Channel: q.Channel, ThreadTS: q.Thread}
	log := b.log.With(threadAttrs(k.Team, k.Channel, k.ThreadTS)...)
	spec, err := json.Marshal(q)
	if err != nil {
		return QuestionAnswer{Action: AnswerCancel}, fmt.Errorf("encoding the question: %w", err)
	}
	id := session.NewApprovalID()
	expires := time.Now().Add(b.approvalTimeout())
	if dl, ok := ctx.Deadline(); ok && dl.Before(expires) {
		expires = dl
	}
	// Post first, then store (as approvals): a click that beats the store
	// waits for it.
	var ts string
	err = b.slack.Do(ctx, slackapi.Call{Team: k.Team, Method: slackapi.ChatPostMessage, Channel: k.Channel}, func(ctx context.Context, api *slack.Client) error {
		var err error
		_, ts, err = api.PostMessageContext(ctx, k.Channel, slack.MsgOptionTS(k.ThreadTS),
			slack.MsgOptionText(questionFallback(q), false),
			slack.MsgOptionBlocks(questionPending(id, q, expires)...),
			slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl())
		return err
	})
	if err != nil {
		return QuestionAnswer{Action: AnswerCancel}, fmt.Errorf("posting the question: %w", err)
	}
	if q.Mode == QuestionURL {
		// The link goes to the requester alone: it may be bound to them.
		if err := b.ephemeralIn(ctx, k.Team, k.Channel, k.ThreadTS, q.User, questionFallback(q), urlBlocks(id, q)); err != nil {
			b.updatePrompt(ctx, k.Team, k.Channel, ts, questionFallback(q), questionClosed(q, ":x: I couldn't send the link, so the question was cancelled.", ""))
			return QuestionAnswer{Action: AnswerCancel}, fmt.Errorf("sending the link: %w", err)
		}
	}
	rec, err := qs.CreateQuestion(ctx, session.Question{ID: id, Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS,
		Requester: q.User, Server: q.Server, Mode: q.Mode, Spec: spec, Expires: expires, MessageTS: ts})
	if err != nil {
		log.Error("bot: storing a question failed; cancelling it", "err", err)
		b.updatePrompt(ctx, k.Team, k.Channel, ts, questionFallback(q), questionClosed(q, ":x: This question could not be recorded, so it was cancelled.", ""))
		return QuestionAnswer{Action: AnswerCancel}, errQuestionUnrecorded
	}
	f := map[string]string{"event": auditQuestionAsked, "channel": k.Channel, "thread": k.ThreadTS, "user": q.User,
		"server": q.Server, "outcome": q.Mode, "question": id}
	if q.Mode == QuestionForm {
		f["fields"] = fieldNames(q.Fields)
	} else if u, err := url.Parse(q.URL); err == nil {
		f["url"] = u.Scheme + "://" + u.Host // the path and query may carry a token
	}
	b.audit(ctx, k.Team, f)

	endWait := b.waits.waiting("answer of " + q.User + " to a question of " + q.Server + " in " + k.Channel)
	got, err := qs.WaitQuestion(ctx, id)
	endWait()
	if err != nil {
		if ctx.Err() != nil {
			return QuestionAnswer{Action: AnswerCancel}, b.withdrawQuestion(ctx, rec, q)
		}
		return QuestionAnswer{Action: AnswerCancel}, fmt.Errorf("waiting for the answer: %w", err)
	}
	switch got.State {
	case session.QuestionAccept:
		content, err := decodeAnswer(q.Fields, got.Answer)
		if cerr := qs.ClearQuestionAnswer(context.WithoutCancel(ctx), id); cerr != nil {
			log.Warn("bot: clearing an answer failed", "question", id, "err", cerr)
		}
		if err != nil {
			return QuestionAnswer{Action: AnswerCancel}, fmt.Errorf("reading the answer: %w", err)
		}
		return QuestionAnswer{Action: AnswerAccept, Content: content}, nil
	case session.QuestionDecline:
		return QuestionAnswer{Action: AnswerDecline}, nil
	case session.QuestionCancel:
		return QuestionAnswer{Action: AnswerCancel}, nil
	}
	// Expired here, or withdrawn by a Stop on another replica: this
	// replica closes the message and, for a Stop, stops the turn now
	// rather than at the next stop poll (the call would otherwise go on
	// with "cancel" and the model answer as if nobody had pressed Stop).
	b.settleQuestion(ctx, got, q)
	if got.State == session.QuestionWithdrawn && got.DecidedBy != "" {
		b.cancels.cancel(k, stopCause{user: got.DecidedBy})
	}
	return QuestionAnswer{Action: AnswerCancel}, nil
}

// withdrawQuestion closes an open question when the turn's context ended
// (Stop, shutdown, the call's own timeout, a lost lease: a replica that
// resumes the turn runs the call again, and the server asks again).
func (b *Bot) withdrawQuestion(ctx context.Context, rec session.Question, q Question) error {
	state, by := session.QuestionWithdrawn, ""
	var stop stopCause
	cause := context.Cause(ctx)
	switch {
	case errors.As(cause, &stop):
		by = stop.user
	case errors.Is(cause, context.DeadlineExceeded):
		state = session.QuestionExpired
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	got, won, err := b.store.AnswerQuestion(dctx, rec.ID, state, by, nil)
	if err != nil {
		b.log.Warn("bot: closing an abandoned question failed", "question", rec.ID, "err", err)
		return ctx.Err()
	}
	if won {
		b.settleQuestion(dctx, got, q)
	}
	return ctx.Err()
}

// settleQuestion updates the message of a question this replica closed
// (expired or withdrawn) and audits it; clicks update their own.
func (b *Bot) settleQuestion(ctx context.Context, got session.Question, q Question) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	b.deliverSoon(uctx, func(ctx context.Context) error {
		return b.updatePrompt(ctx, got.Team, got.Channel, got.MessageTS, questionFallback(q), questionClosed(q, questionStatus(got), ""))
	})
	b.audit(uctx, got.Team, map[string]string{"event": auditQuestionAnswered, "channel": got.Channel, "thread": got.ThreadTS,
		"user": got.Requester, "by": got.DecidedBy, "server": got.Server, "decision": got.State, "question": got.ID})
}

// withdrawQuestions closes the thread's open questions, for a Stop click
// on a replica not running the turn: the waiting Ask, wherever it runs,
// wakes and closes its message.
func (b *Bot) withdrawQuestions(ctx context.Context, k session.ThreadKey, by string) {
	qs := b.store
	open, err := qs.PendingQuestions(ctx, k)
	if err != nil {
		b.log.Warn("bot: listing open questions failed", append(threadAttrs(k.Team, k.Channel, k.ThreadTS), "err", err)...)
		return
	}
	for _, q := range open {
		if _, _, err := qs.AnswerQuestion(ctx, q.ID, session.QuestionWithdrawn, by, nil); err != nil {
			b.log.Warn("bot: withdrawing a question failed", "question", q.ID, "err", err)
		}
	}
}

func fieldNames(fs []FormField) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return mrkdwn.Clip(strings.Join(names, ","), 300)
}

// questionFallback is the notification text of a question.
func questionFallback(q Question) string {
	return mrkdwn.EscapeText(q.Server) + " asks: " + mrkdwn.EscapeText(mrkdwn.Clip(q.Message, 200))
}

// urlHost is a URL's host, for showing where a link goes.
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "?"
	}
	return u.Hostname()
}

// questionHead is the first block of a question's message.
func questionHead(q Question) slack.Block {
	var text string
	if q.Mode == QuestionURL {
		text = fmt.Sprintf(":link: *`%s`* asks <@%s> to open a page on *%s*: %s",
			mrkdwn.InlineCode(q.Server), q.User, mrkdwn.EscapeText(urlHost(q.URL)), mrkdwn.EscapeText(mrkdwn.Clip(q.Message, 2000)))
	} else {
		text = fmt.Sprintf(":speech_balloon: *`%s`* asks <@%s>: %s", mrkdwn.InlineCode(q.Server), q.User, mrkdwn.EscapeText(mrkdwn.Clip(q.Message, 2500)))
	}
	return slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, text, false, false), nil, nil, slack.SectionBlockOptionBlockID(blockQHead))
}

// secretWarning is shown with forms that ask for a password, token or key.
const secretWarning = ":warning: This form asks for something that looks like a password, token or key. MCP servers must not ask for secrets in a form: answer only if you trust this server, or Decline."

func questionBase(q Question) []slack.Block {
	blocks := []slack.Block{questionHead(q)}
	if q.AsksForSecret {
		blocks = append(blocks, slack.NewContextBlock(blockQWarn, slack.NewTextBlockObject(slack.MarkdownType, secretWarning, false, false)))
	}
	return blocks
}

// questionPending is the question with its buttons.
func questionPending(id string, q Question, expires time.Time) []slack.Block {
	btn := func(action, label string, style slack.Style) *slack.ButtonBlockElement {
		e := slack.NewButtonBlockElement(action, id, slack.NewTextBlockObject(slack.PlainTextType, label, false, false))
		if style != "" {
			e = e.WithStyle(style)
		}
		return e
	}
	var elems []slack.BlockElement
	var who string
	if q.Mode == QuestionURL {
		elems = append(elems, btn(actionQCancel, labelCancel, ""))
		who = fmt.Sprintf("I sent <@%s> the link, to them only. They or a workspace admin can cancel.", q.User)
	} else {
		elems = append(elems, btn(actionQAnswer, labelAnswer, slack.StylePrimary), btn(actionQDecline, labelDecline, ""), btn(actionQCancel, labelCancel, ""))
		who = fmt.Sprintf("<@%s> or a workspace admin can answer.", q.User)
	}
	status := fmt.Sprintf("%s Without an answer by %s it is cancelled.", who, mrkdwn.Date(expires))
	return append(questionBase(q),
		slack.NewActionBlock(blockQActions, elems...),
		slack.NewContextBlock(blockQStatus, slack.NewTextBlockObject(slack.MarkdownType, status, false, false)))
}

// questionClosed is the question after it was answered or closed, with the
// answers shown (summary, "" for none).
func questionClosed(q Question, status, summary string) []slack.Block {
	blocks := questionBase(q)
	if summary != "" {
		blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, summary, false, false), nil, nil, slack.SectionBlockOptionBlockID(blockQAnswers)))
	}
	return append(blocks, slack.NewContextBlock(blockQStatus, slack.NewTextBlockObject(slack.MarkdownType, status, false, false)))
}

// urlBlocks is the requester's private message of a URL question: the
// server's message, the full URL (host first, not clickable outside the
// button), the link button, Done and Cancel.
func urlBlocks(id string, q Question) []slack.Block {
	host := urlHost(q.URL)
	where := fmt.Sprintf("*%s*\n`%s`", mrkdwn.EscapeText(host), mrkdwn.EscapeText(strings.ReplaceAll(q.URL, "`", "%60")))
	if strings.Contains(strings.ToLower(host), "xn--") {
		where += "\n:warning: This address uses punycode (`xn--`): it may imitate another site's name. Check it before you open it."
	}
	open := slack.NewButtonBlockElement(actionQOpen, id, slack.NewTextBlockObject(slack.PlainTextType, mrkdwn.ClipRunes("Open "+host, 75), false, false))
	open.URL = q.URL
	done := slack.NewButtonBlockElement(actionQDone, id, slack.NewTextBlockObject(slack.PlainTextType, labelDone, false, false)).WithStyle(slack.StylePrimary)
	cancel := slack.NewButtonBlockElement(actionQCancel, id, slack.NewTextBlockObject(slack.PlainTextType, labelCancel, false, false))
	head := fmt.Sprintf(":link: *`%s`* asks you to open this page: %s", mrkdwn.InlineCode(q.Server), mrkdwn.EscapeText(mrkdwn.Clip(q.Message, 2000)))
	return []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, head, false, false), nil, nil),
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, mrkdwn.ClipRunes(where, 2900), false, false), nil, nil),
		slack.NewActionBlock(blockQActions, open, done, cancel),
		slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, "Press *Done* once you have finished on that page, or *Cancel*. Only you see this message.", false, false)),
	}
}

// questionStatus says how a question ended, by whom and when.
func questionStatus(q session.Question) string {
	when := mrkdwn.Date(q.DecidedAt)
	by := ""
	if q.DecidedBy != "" {
		by = fmt.Sprintf(" by <@%s>", q.DecidedBy)
	}
	switch q.State {
	case session.QuestionAccept:
		if q.Mode == QuestionURL {
			return fmt.Sprintf(":white_check_mark: Done%s at %s.", by, when)
		}
		return fmt.Sprintf(":white_check_mark: Answered%s at %s.", by, when)
	case session.QuestionDecline:
		return fmt.Sprintf(":no_entry_sign: Declined%s at %s.", by, when)
	case session.QuestionCancel:
		return fmt.Sprintf(":heavy_multiplication_x: Cancelled%s at %s.", by, when)
	case session.QuestionExpired:
		return fmt.Sprintf(":hourglass: Nobody answered in time; cancelled at %s.", when)
	case session.QuestionWithdrawn:
		if by != "" {
			return fmt.Sprintf(":black_square_for_stop: Withdrawn: the answer was stopped%s at %s.", by, when)
		}
		return fmt.Sprintf(":black_square_for_stop: Withdrawn at %s: the request ended before anyone answered.", when)
	}
	return "Pending."
}

// questionClicks extracts the question-button actions of a block_actions
// callback, with an id that can be one.
func questionClicks(cb slack.InteractionCallback) []*slack.BlockAction {
	if cb.Type != slack.InteractionTypeBlockActions {
		return nil
	}
	var out []*slack.BlockAction
	for _, a := range cb.ActionCallback.BlockActions {
		if a == nil {
			continue
		}
		switch a.ActionID {
		case actionQAnswer, actionQDecline, actionQCancel, actionQDone, actionQOpen:
			if validApprovalID(a.Value) {
				out = append(out, a)
			}
		}
	}
	return out
}

// loadQuestion reads a question a click names; the message is posted just
// before its record is stored, so a very quick click waits a little.
func (b *Bot) loadQuestion(ctx context.Context, cb slack.InteractionCallback, id string) (session.Question, Question, bool) {
	qs := b.store
	rec, err := qs.GetQuestion(ctx, id)
	for try := 0; errors.Is(err, session.ErrNotFound) && try < 40 && sleepCtx(ctx, 25*time.Millisecond); try++ {
		rec, err = qs.GetQuestion(ctx, id)
	}
	switch {
	case errors.Is(err, session.ErrNotFound):
		b.tell(ctx, cb, "", "I don't know this question any more (it is too old or still being set up). If it was just posted, try again in a second.")
		return rec, Question{}, false
	case err != nil:
		b.log.Warn("bot: reading a question failed", "err", err)
		b.tell(ctx, cb, "", "I couldn't read this question just now. Please try again in a moment.")
		return rec, Question{}, false
	}
	if cb.Team.ID != "" && cb.Team.ID != rec.Team {
		b.log.Warn("bot: question click from another workspace ignored", "team", cb.Team.ID, "question_team", rec.Team)
		return rec, Question{}, false
	}
	var q Question
	if err := json.Unmarshal(rec.Spec, &q); err != nil {
		b.log.Warn("bot: a stored question does not decode", "question", id, "err", err)
		return rec, Question{}, false
	}
	return rec, q, true
}

// questionAction handles a click on a question's button.
func (b *Bot) questionAction(ctx context.Context, cb slack.InteractionCallback, act *slack.BlockAction) {
	if act.ActionID == actionQOpen {
		return // the browser opened the link; Done says it is finished
	}
	rec, q, ok := b.loadQuestion(ctx, cb, act.Value)
	if !ok {
		return
	}
	user := cb.User.ID
	if ok, why := b.mayDecide(ctx, rec.Team, user, cb.User.TeamID, rec.Requester); !ok {
		b.tell(ctx, cb, rec.ThreadTS, strings.Replace(why, "answer this request", "answer this question", 1))
		b.audit(ctx, rec.Team, map[string]string{"event": auditQuestionRefused, "channel": rec.Channel, "thread": rec.ThreadTS,
			"user": rec.Requester, "by": user, "server": rec.Server, "question": rec.ID, "outcome": act.ActionID})
		return
	}
	if rec.Decided() {
		b.tell(ctx, cb, rec.ThreadTS, "This question was already closed: "+stripEmoji(questionStatus(rec)))
		return
	}
	var state string
	switch act.ActionID {
	case actionQAnswer:
		b.openQuestionModal(ctx, cb, rec, q)
		return
	case actionQDone:
		state = session.QuestionAccept
	case actionQDecline:
		state = session.QuestionDecline
	default:
		state = session.QuestionCancel
	}
	if state == session.QuestionAccept && q.Mode != QuestionURL {
		return // forms are accepted through their modal only
	}
	got, won, err := b.store.AnswerQuestion(ctx, rec.ID, state, user, nil)
	if err != nil {
		b.log.Warn("bot: recording an answer failed", "question", rec.ID, "err", err)
		b.tell(ctx, cb, rec.ThreadTS, "I couldn't record your answer just now. Please try again.")
		return
	}
	if !won {
		if got.DecidedBy != user {
			b.tell(ctx, cb, rec.ThreadTS, "This question was already closed: "+stripEmoji(questionStatus(got)))
		}
		return
	}
	b.questionAnswered(ctx, got, q, "")
	if cb.Container.IsEphemeral && cb.ResponseURL != "" {
		b.replaceEphemeral(ctx, cb.ResponseURL, questionFallback(q), questionClosed(q, questionStatus(got), ""))
	}
}

// questionAnswered updates the question's message after an answer won and
// audits it (field names only: values may be sensitive).
func (b *Bot) questionAnswered(ctx context.Context, got session.Question, q Question, summary string) {
	b.deliverSoon(ctx, func(ctx context.Context) error {
		return b.updatePrompt(ctx, got.Team, got.Channel, got.MessageTS, questionFallback(q), questionClosed(q, questionStatus(got), summary))
	})
	f := map[string]string{"event": auditQuestionAnswered, "channel": got.Channel, "thread": got.ThreadTS,
		"user": got.Requester, "by": got.DecidedBy, "server": got.Server, "decision": got.State, "question": got.ID,
		"duration_ms": waited(session.Approval{Created: got.Created, DecidedAt: got.DecidedAt})}
	if got.State == session.QuestionAccept && q.Mode == QuestionForm {
		f["fields"] = fieldNames(q.Fields)
	}
	b.audit(ctx, got.Team, f)
}

// replaceEphemeral replaces the ephemeral message a click came from
// (through its response_url: ephemeral messages have no ts to update).
func (b *Bot) replaceEphemeral(ctx context.Context, responseURL, text string, blocks []slack.Block) {
	hc := b.webhookClient()
	msg := &slack.WebhookMessage{ResponseType: "ephemeral", ReplaceOriginal: true, Text: text, Blocks: &slack.Blocks{BlockSet: blocks}}
	if err := slack.PostWebhookCustomHTTPContext(ctx, responseURL, hc, msg); err != nil {
		b.log.Debug("bot: replacing an ephemeral message failed", "err", err)
	}
}
