package ask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
// person behind a tool call for input. The same lifecycle as approvals:
// Ask posts the question in the thread, stores it in Redis
// (session.Question) and blocks until someone allowed answers on any
// replica, the question expires (APPROVAL_TIMEOUT) or the turn stops; the
// answer is taken exactly once by a compare-and-set. Forms open a modal
// built from the schema (form.go); URL questions send the link to the
// requester only, with Done and Cancel.

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
	Fields []ask.Field `json:"fields,omitempty"`
	// AsksForSecret: a field looks like a password, token or key.
	AsksForSecret bool `json:"asks_for_secret,omitempty"`
	// URL is the page to open (URL mode).
	URL string `json:"url,omitempty"`
}

// Answer is the person's answer. Content (form accept only) maps field
// names to string, float64, int64, bool or []string values.
type Answer struct {
	Action  string
	Content map[string]any
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

// Audit events of questions.
const (
	auditQuestionAsked    = "elicitation_asked"
	auditQuestionAnswered = "elicitation_answered"
	auditQuestionRefused  = "elicitation_refused"
)

var errQuestionUnrecorded = errors.New("the question could not be recorded")

// questionWords are the status lines of a question (the mode's Accept is
// Done for a URL question: questionStatus).
var questionWords = words{
	decided: map[string]string{
		session.QuestionAccept:  ":white_check_mark: Answered",
		session.QuestionDecline: ":no_entry_sign: Declined",
		session.QuestionCancel:  ":heavy_multiplication_x: Cancelled",
	},
	expired:        ":hourglass: Nobody answered in time; cancelled",
	alone:          ":black_square_for_stop: Withdrawn at %s: the request ended before anyone answered.",
	expiredState:   session.QuestionExpired,
	withdrawnState: session.QuestionWithdrawn,
}

// questionStatus says how a question ended, by whom and when.
func questionStatus(q session.Question) string {
	if q.Mode == QuestionURL {
		return urlWords.status(q.State, q.DecidedBy, q.DecidedAt)
	}
	return questionWords.status(q.State, q.DecidedBy, q.DecidedAt)
}

// urlWords are those of a URL question: its Accept is Done.
var urlWords = func() words {
	w := questionWords
	w.decided = maps.Clone(w.decided)
	w.decided[session.QuestionAccept] = ":white_check_mark: Done"
	return w
}()

// Ask posts a server's question in the thread, addressed to the requester,
// and waits for the answer from any replica. The question expires after
// the Timeout (answered cancel); Stop withdraws it. An error means nobody
// answered (callers answer the server cancel).
func (p *Prompts) Ask(ctx context.Context, q Question) (Answer, error) {
	cancelled := Answer{Action: AnswerCancel}
	if q.Team == "" || q.User == "" || q.Channel == "" || q.Thread == "" {
		return cancelled, errors.New("the question has nobody to ask")
	}
	if q.Mode == QuestionURL {
		if u, err := url.Parse(q.URL); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || len(q.URL) > 3000 {
			return cancelled, errors.New("the page to open is not a usable https URL")
		}
	}
	k := session.ThreadKey{Team: q.Team, Channel: q.Channel, ThreadTS: q.Thread}
	log := p.log.With(threadAttrs(k)...)
	spec, err := json.Marshal(q)
	if err != nil {
		return cancelled, fmt.Errorf("encoding the question: %w", err)
	}
	id := session.NewApprovalID()
	expires := p.expiry(ctx)
	ts, err := p.post(ctx, k, questionFallback(q), questionPending(id, q, expires))
	if err != nil {
		return cancelled, fmt.Errorf("posting the question: %w", err)
	}
	if q.Mode == QuestionURL {
		// The link goes to the requester alone: it may be bound to them.
		if err := p.ephemeralIn(ctx, k.Team, k.Channel, k.ThreadTS, q.User, questionFallback(q), urlBlocks(id, q)); err != nil {
			p.update(ctx, k.Team, k.Channel, ts, questionFallback(q), questionClosed(q, ":x: I couldn't send the link, so the question was cancelled.", ""))
			return cancelled, fmt.Errorf("sending the link: %w", err)
		}
	}
	rec, err := p.store.CreateQuestion(ctx, session.Question{Prompt: session.Prompt{ID: id, Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS,
		Requester: q.User, Server: q.Server, Expires: expires, MessageTS: ts},
		Mode: q.Mode, Spec: spec})
	if err != nil {
		log.Error("bot: storing a question failed; cancelling it", "err", err)
		p.update(ctx, k.Team, k.Channel, ts, questionFallback(q), questionClosed(q, ":x: This question could not be recorded, so it was cancelled.", ""))
		return cancelled, errQuestionUnrecorded
	}
	f := map[string]string{"event": auditQuestionAsked, "channel": k.Channel, "thread": k.ThreadTS, "user": q.User,
		"server": q.Server, "outcome": q.Mode, "question": id}
	if q.Mode == QuestionForm {
		f["fields"] = fieldNames(q.Fields)
	} else if u, err := url.Parse(q.URL); err == nil {
		f["url"] = u.Scheme + "://" + u.Host // the path and query may carry a token
	}
	p.opts.Audit(ctx, k.Team, f)

	got, err := wait(ctx, p, "answer of "+q.User+" to a question of "+q.Server+" in "+k.Channel, id, p.store.WaitQuestion)
	if err != nil {
		if ctx.Err() != nil {
			return cancelled, p.abandonQuestion(ctx, rec, q)
		}
		return cancelled, fmt.Errorf("waiting for the answer: %w", err)
	}
	switch got.State {
	case session.QuestionAccept:
		content, err := decodeAnswer(q.Fields, got.Answer)
		if cerr := p.store.ClearQuestionAnswer(context.WithoutCancel(ctx), id); cerr != nil {
			log.Warn("bot: clearing an answer failed", "question", id, "err", cerr)
		}
		if err != nil {
			return cancelled, fmt.Errorf("reading the answer: %w", err)
		}
		return Answer{Action: AnswerAccept, Content: content}, nil
	case session.QuestionDecline:
		return Answer{Action: AnswerDecline}, nil
	case session.QuestionCancel:
		return cancelled, nil
	}
	// Expired here, or withdrawn by a Stop on another replica: this
	// replica closes the message and, for a Stop, stops the turn now
	// rather than at the next stop poll (the call would otherwise go on
	// with "cancel" and the model answer as if nobody had pressed Stop).
	p.settleQuestion(ctx, got, q)
	p.remoteStop(k, got.State == session.QuestionWithdrawn, got.DecidedBy)
	return cancelled, nil
}

// abandonQuestion closes an open question when the turn's context ended
// (Stop, shutdown, the call's own timeout, a lost lease: a replica that
// resumes the turn runs the call again, and the server asks again).
func (p *Prompts) abandonQuestion(ctx context.Context, rec session.Question, q Question) error {
	return p.abandon(ctx, "question", rec.ID, func(ctx context.Context, e ending) error {
		state := session.QuestionWithdrawn
		if e.expired {
			state = session.QuestionExpired
		}
		got, won, err := p.store.AnswerQuestion(ctx, rec.ID, state, e.by, nil)
		if err == nil && won {
			p.settleQuestion(ctx, got, q)
		}
		return err
	})
}

// settleQuestion updates the message of a question this replica closed
// (expired or withdrawn) and audits it; clicks update their own.
func (p *Prompts) settleQuestion(ctx context.Context, got session.Question, q Question) {
	p.settle(ctx, got.Team, got.Channel, got.MessageTS, questionFallback(q), questionClosed(q, questionStatus(got), ""),
		map[string]string{"event": auditQuestionAnswered, "channel": got.Channel, "thread": got.ThreadTS,
			"user": got.Requester, "by": got.DecidedBy, "server": got.Server, "decision": got.State, "question": got.ID})
}

func fieldNames(fs []ask.Field) string {
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
	return closeBlocks(blocks, blockQStatus, status)
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

// loadQuestion reads a question a click names, with the question itself.
func (p *Prompts) loadQuestion(ctx context.Context, cb slack.InteractionCallback, id string) (session.Question, Question, bool) {
	rec, ok := load(ctx, p, cb, id, "question", "a question", "question", p.store.GetQuestion, func(q session.Question) string { return q.Team })
	if !ok {
		return rec, Question{}, false
	}
	var q Question
	if err := json.Unmarshal(rec.Spec, &q); err != nil {
		p.log.Warn("bot: a stored question does not decode", "question", id, "err", err)
		return rec, Question{}, false
	}
	return rec, q, true
}

// questionAction handles a click on a question's button.
func (p *Prompts) questionAction(ctx context.Context, cb slack.InteractionCallback, act *slack.BlockAction) {
	if act.ActionID == actionQOpen {
		return // the browser opened the link; Done says it is finished
	}
	rec, q, ok := p.loadQuestion(ctx, cb, act.Value)
	if !ok {
		return
	}
	user := cb.User.ID
	if ok, why := p.opts.Roles.MayAct(ctx, rec.Team, user, cb.User.TeamID, rec.Requester, actAnswer); !ok {
		p.Tell(ctx, cb, rec.ThreadTS, why)
		p.opts.Audit(ctx, rec.Team, map[string]string{"event": auditQuestionRefused, "channel": rec.Channel, "thread": rec.ThreadTS,
			"user": rec.Requester, "by": user, "server": rec.Server, "question": rec.ID, "outcome": act.ActionID})
		return
	}
	if rec.Decided() {
		p.Tell(ctx, cb, rec.ThreadTS, "This question was already closed: "+stripEmoji(questionStatus(rec)))
		return
	}
	var state string
	switch act.ActionID {
	case actionQAnswer:
		p.openQuestionModal(ctx, cb, rec, q)
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
	got, won, err := p.store.AnswerQuestion(ctx, rec.ID, state, user, nil)
	if err != nil {
		p.log.Warn("bot: recording an answer failed", "question", rec.ID, "err", err)
		p.Tell(ctx, cb, rec.ThreadTS, "I couldn't record your answer just now. Please try again.")
		return
	}
	if !won {
		if got.DecidedBy != user {
			p.Tell(ctx, cb, rec.ThreadTS, "This question was already closed: "+stripEmoji(questionStatus(got)))
		}
		return
	}
	p.questionAnswered(ctx, got, q, "")
	if cb.Container.IsEphemeral && cb.ResponseURL != "" {
		// Ephemeral messages have no ts to update: replace it through
		// its response_url.
		msg := slackapi.Msg{Text: mrkdwn.Text(questionFallback(q)), Blocks: questionClosed(q, questionStatus(got), "")}
		if err := slackapi.Respond(ctx, p.opts.HTTPClient, cb.ResponseURL, msg, true); err != nil {
			p.log.Debug("bot: replacing an ephemeral message failed", "err", err)
		}
	}
}

// questionAnswered updates the question's message after an answer won and
// audits it (field names only: values may be sensitive).
func (p *Prompts) questionAnswered(ctx context.Context, got session.Question, q Question, summary string) {
	f := map[string]string{"event": auditQuestionAnswered, "channel": got.Channel, "thread": got.ThreadTS,
		"user": got.Requester, "by": got.DecidedBy, "server": got.Server, "decision": got.State, "question": got.ID,
		"duration_ms": waited(got.Created, got.DecidedAt)}
	if got.State == session.QuestionAccept && q.Mode == QuestionForm {
		f["fields"] = fieldNames(q.Fields)
	}
	p.closeMessage(ctx, got.Team, got.Channel, got.MessageTS, questionFallback(q), questionClosed(q, questionStatus(got), summary), f)
}
