package ask

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent/ask"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// The modal of a form question: one input per field, built from the
// server's flat schema (SEP-1330 enums, SEP-1034 defaults pre-filled), and
// its submission, validated against the schema with field errors shown in
// the modal (response_action errors).

// CallbackQuestion is the callback_id of a question's form (Submit
// handles its submission); its private_metadata is the question id.
const CallbackQuestion = "bobbin_question"

// actionQValue is the action id of every input (block ids tell fields
// apart: blockField(i)).
const actionQValue = "v"

// Slack's limits that the form respects.
const (
	maxModalFields   = 90 // a modal takes 100 blocks; the head takes a few
	maxSelectOptions = 100
	maxInputLength   = 3000
	maxLabel         = 150
	maxHint          = 150
	maxOptionText    = 75
	maxModalTitle    = 24
)

func blockField(i int) string { return "q_f" + strconv.Itoa(i) }

// boolAsSelect: a required boolean without a default is a yes/no select
// (so the person must choose); others are a checkbox, pre-checked when the
// default is true.
func boolAsSelect(f ask.Field) bool {
	_, has := f.Default.(bool)
	return f.Required && !has
}

func fieldLabel(f ask.Field) string {
	return mrkdwn.ClipRunes(cmp.Or(strings.TrimSpace(f.Title), f.Name), maxLabel)
}

func optionText(o ask.Option) string {
	return mrkdwn.ClipRunes(cmp.Or(o.Title, o.Value), maxOptionText)
}

// formatNum renders a number for number_input (no exponent).
func formatNum(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// fieldHint is the field's description plus what the schema requires.
func fieldHint(f ask.Field) string {
	var parts []string
	if d := strings.TrimSpace(f.Description); d != "" {
		parts = append(parts, d)
	}
	switch f.Kind {
	case ask.FieldString:
		switch f.Format {
		case "email":
			parts = append(parts, "An email address.")
		case "uri":
			parts = append(parts, "A URL.")
		case "date-time":
			parts = append(parts, "A date and time like 2026-01-31T14:00:00Z.")
		}
		switch {
		case f.MinLength != nil && f.MaxLength != nil:
			parts = append(parts, fmt.Sprintf("%d to %d characters.", *f.MinLength, *f.MaxLength))
		case f.MaxLength != nil:
			parts = append(parts, fmt.Sprintf("At most %d characters.", *f.MaxLength))
		case f.MinLength != nil:
			parts = append(parts, fmt.Sprintf("At least %d characters.", *f.MinLength))
		}
	case ask.FieldNumber, ask.FieldInteger:
		switch {
		case f.Minimum != nil && f.Maximum != nil:
			parts = append(parts, fmt.Sprintf("From %s to %s.", formatNum(*f.Minimum), formatNum(*f.Maximum)))
		case f.Minimum != nil:
			parts = append(parts, fmt.Sprintf("%s or more.", formatNum(*f.Minimum)))
		case f.Maximum != nil:
			parts = append(parts, fmt.Sprintf("%s or less.", formatNum(*f.Maximum)))
		}
	case ask.FieldMultiEnum:
		switch {
		case f.MinItems != nil && f.MaxItems != nil:
			parts = append(parts, fmt.Sprintf("Choose %d to %d.", *f.MinItems, *f.MaxItems))
		case f.MinItems != nil:
			parts = append(parts, fmt.Sprintf("Choose at least %d.", *f.MinItems))
		}
	}
	if f.Sensitive {
		parts = append(parts, "Not shown in the thread.")
	}
	return mrkdwn.ClipRunes(strings.Join(parts, " "), maxHint)
}

// fieldElement is the input element of one field, defaults pre-filled.
func fieldElement(f ask.Field) slack.BlockElement {
	switch f.Kind {
	case ask.FieldNumber, ask.FieldInteger:
		e := slack.NewNumberInputBlockElement(nil, actionQValue, f.Kind == ask.FieldNumber)
		if f.Minimum != nil {
			e.MinValue = formatNum(*f.Minimum)
		}
		if f.Maximum != nil {
			e.MaxValue = formatNum(*f.Maximum)
		}
		if x, ok := ask.Number(f.Default); ok {
			e.InitialValue = formatNum(x)
		}
		return e
	case ask.FieldBoolean:
		def, _ := f.Default.(bool)
		if boolAsSelect(f) {
			yes, no := slack.NewOptionBlockObject("true", mrkdwn.Plain("Yes"), nil), slack.NewOptionBlockObject("false", mrkdwn.Plain("No"), nil)
			return slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, mrkdwn.Plain("Yes or no"), actionQValue, yes, no)
		}
		yes := slack.NewOptionBlockObject("true", mrkdwn.Plain("Yes"), nil)
		e := slack.NewCheckboxGroupsBlockElement(actionQValue, yes)
		if def {
			e.InitialOptions = []*slack.OptionBlockObject{yes}
		}
		return e
	case ask.FieldEnum, ask.FieldMultiEnum:
		opts := make([]*slack.OptionBlockObject, 0, min(len(f.Options), maxSelectOptions))
		var initial []*slack.OptionBlockObject
		defaults := defaultStrings(f.Default)
		for i, o := range f.Options {
			if i >= maxSelectOptions {
				break
			}
			// Values are indexes: Slack caps option values at 150
			// characters and the server's may be longer.
			opt := slack.NewOptionBlockObject(strconv.Itoa(i), mrkdwn.Plain(optionText(o)), nil)
			opts = append(opts, opt)
			for _, d := range defaults {
				if d == o.Value {
					initial = append(initial, opt)
				}
			}
		}
		if f.Kind == ask.FieldEnum {
			e := slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, mrkdwn.Plain("Choose one"), actionQValue, opts...)
			if len(initial) > 0 {
				e.InitialOption = initial[0]
			}
			return e
		}
		e := slack.NewOptionsMultiSelectBlockElement(slack.MultiOptTypeStatic, mrkdwn.Plain("Choose"), actionQValue, opts...)
		e.InitialOptions = initial
		if f.MaxItems != nil && *f.MaxItems > 0 {
			n := *f.MaxItems
			e.MaxSelectedItems = &n
		}
		return e
	}
	// Strings.
	def, _ := f.Default.(string)
	if f.Format == "date" {
		e := slack.NewDatePickerBlockElement(actionQValue)
		if _, err := time.Parse("2006-01-02", def); err == nil {
			e.InitialDate = def
		}
		return e
	}
	var ph *slack.TextBlockObject
	switch f.Format {
	case "email":
		ph = mrkdwn.Plain("name@example.com")
	case "uri":
		ph = mrkdwn.Plain("https://…")
	case "date-time":
		ph = mrkdwn.Plain("2026-01-31T14:00:00Z")
	}
	e := slack.NewPlainTextInputBlockElement(ph, actionQValue)
	if f.MinLength != nil && *f.MinLength > 0 && *f.MinLength <= maxInputLength {
		e.MinLength = *f.MinLength
	}
	if f.MaxLength != nil && *f.MaxLength > 0 {
		e.MaxLength = min(*f.MaxLength, maxInputLength)
	}
	e.Multiline = f.MaxLength == nil || *f.MaxLength > 200
	if f.Format != "" {
		e.Multiline = false
	}
	if utf8.RuneCountInString(def) <= maxInputLength {
		e.InitialValue = def
	}
	return e
}

// questionModal is the form of question id.
func questionModal(id string, q Question) slack.ModalViewRequest {
	head := fmt.Sprintf("*`%s`* asks: %s", mrkdwn.InlineCode(q.Server), mrkdwn.EscapeText(mrkdwn.Clip(q.Message, 2500)))
	blocks := []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, head, false, false), nil, nil)}
	if q.AsksForSecret {
		blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, secretWarning, false, false)))
	}
	for i, f := range q.Fields {
		if i >= maxModalFields {
			break
		}
		var hint *slack.TextBlockObject
		if h := fieldHint(f); h != "" {
			hint = mrkdwn.Plain(h)
		}
		in := slack.NewInputBlock(blockField(i), mrkdwn.Plain(fieldLabel(f)), hint, fieldElement(f))
		// Checkboxes are always optional: unchecked means false.
		in.Optional = !f.Required || (f.Kind == ask.FieldBoolean && !boolAsSelect(f))
		blocks = append(blocks, in)
	}
	if len(q.Fields) == 0 {
		blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, "_The server asks for no details: Send answers yes._", false, false)))
	}
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		CallbackID:      CallbackQuestion,
		Title:           mrkdwn.Plain(mrkdwn.ClipRunes("Answer "+q.Server, maxModalTitle)),
		Submit:          mrkdwn.Plain("Send"),
		Close:           mrkdwn.Plain("Close"),
		PrivateMetadata: id,
		Blocks:          slack.Blocks{BlockSet: blocks},
	}
}

// openQuestionModal opens the form for the person who clicked Answer.
func (p *Prompts) openQuestionModal(ctx context.Context, cb slack.InteractionCallback, rec session.Question, q Question) {
	if len(q.Fields) > maxModalFields {
		p.Tell(ctx, cb, rec.ThreadTS, "This form has more fields than a Slack form can show. Decline or Cancel it.")
		return
	}
	err := p.api.Do(ctx, slackapi.Call{Team: rec.Team, Method: slackapi.ViewsOpen}, func(ctx context.Context, api *slack.Client) error {
		_, err := api.OpenViewContext(ctx, cb.TriggerID, questionModal(rec.ID, q))
		return err
	})
	if err != nil {
		p.log.Warn("bot: opening a question's form failed", "question", rec.ID, "err", err)
		p.Tell(ctx, cb, rec.ThreadTS, "I couldn't open the form. Please press Answer again.")
	}
}

// Submit handles the submission of a question's form (CallbackQuestion)
// and returns the ack: field errors go back to the modal; a valid answer
// is taken once (on any replica) and closes it.
func (p *Prompts) Submit(ctx context.Context, cb slack.InteractionCallback) any {
	// Failures that are not about a field replace the form with a note.
	fail := func(msg string) any {
		return slack.NewUpdateViewSubmissionResponse(&slack.ModalViewRequest{
			Type: slack.VTModal, Title: mrkdwn.Plain("Answer"), Close: mrkdwn.Plain("Close"),
			Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, mrkdwn.EscapeText(msg), false, false), nil, nil)}},
		})
	}
	id := cb.View.PrivateMetadata
	if !ValidID(id) {
		return fail("This form is broken. Close it and press Answer again.")
	}
	rec, q, ok := p.loadQuestion(ctx, cb, id)
	if !ok {
		return fail("I can't find this question any more. Close this form.")
	}
	user := cb.User.ID
	if ok, _ := p.opts.Roles.MayAct(ctx, rec.Team, user, cb.User.TeamID, rec.Requester, actAnswer); !ok {
		p.opts.Audit(ctx, rec.Team, map[string]string{"event": auditQuestionRefused, "channel": rec.Channel, "thread": rec.ThreadTS,
			"user": rec.Requester, "by": user, "server": rec.Server, "question": rec.ID, "outcome": "submit"})
		return fail("Only the person who was asked, or a workspace admin, can answer this question.")
	}
	if rec.Decided() {
		return fail("This question is closed: " + stripEmoji(questionStatus(rec)) + " Close this form.")
	}
	content, errs := formContent(q.Fields, cb.View.State)
	if len(errs) == 0 {
		errs = p.checkForm(q.Fields, content)
	}
	if len(errs) > 0 {
		out := map[string]string{}
		for i, f := range q.Fields {
			if msg, ok := errs[f.Name]; ok {
				out[blockField(i)] = mrkdwn.ClipRunes(msg, 150)
			}
		}
		if msg, ok := errs[""]; ok || len(out) == 0 {
			if len(q.Fields) == 0 {
				return fail("The server would not take this answer: " + cmp.Or(msg, "it is not valid") + ".")
			}
			if _, taken := out[blockField(0)]; !taken {
				out[blockField(0)] = mrkdwn.ClipRunes(cmp.Or(msg, "This answer is not valid."), 150)
			}
		}
		return slack.NewErrorsViewSubmissionResponse(out)
	}
	raw, err := json.Marshal(content)
	if err != nil {
		return fail("I couldn't read this answer. Please try again.")
	}
	got, won, err := p.store.AnswerQuestion(ctx, rec.ID, session.QuestionAccept, user, raw)
	if err != nil {
		p.log.Warn("bot: recording an answer failed", "question", rec.ID, "err", err)
		return fail("I couldn't record your answer just now. Please send it again.")
	}
	if !won {
		return fail("This question is closed: " + stripEmoji(questionStatus(got)) + " Close this form.")
	}
	p.questionAnswered(ctx, got, q, answerSummary(q.Fields, content, got.DecidedBy))
	return nil
}

// checkForm validates content with Options.CheckForm (mcp's validator),
// else checks required fields only.
func (p *Prompts) checkForm(fields []ask.Field, content map[string]any) map[string]string {
	if p.opts.CheckForm != nil {
		return p.opts.CheckForm(fields, content)
	}
	errs := map[string]string{}
	for _, f := range fields {
		if _, ok := content[f.Name]; !ok && f.Required {
			errs[f.Name] = "This field is required."
		}
	}
	return errs
}

// formContent reads the submitted values into typed content (string,
// float64, int64, bool, []string); errs holds what cannot be read.
func formContent(fields []ask.Field, state *slack.ViewState) (map[string]any, map[string]string) {
	content := map[string]any{}
	errs := map[string]string{}
	for i, f := range fields {
		if i >= maxModalFields {
			break
		}
		var act slack.BlockAction
		if state != nil {
			act = state.Values[blockField(i)][actionQValue]
		}
		switch f.Kind {
		case ask.FieldNumber, ask.FieldInteger:
			text := strings.TrimSpace(act.Value)
			if text == "" {
				break
			}
			x, err := strconv.ParseFloat(text, 64)
			switch {
			case err != nil || math.IsNaN(x) || math.IsInf(x, 0):
				errs[f.Name] = "Enter a number."
			case f.Kind == ask.FieldInteger && x != math.Trunc(x):
				errs[f.Name] = "Enter a whole number."
			case f.Kind == ask.FieldInteger:
				content[f.Name] = int64(x)
			default:
				content[f.Name] = x
			}
		case ask.FieldBoolean:
			if boolAsSelect(f) {
				switch act.SelectedOption.Value {
				case "true":
					content[f.Name] = true
				case "false":
					content[f.Name] = false
				}
				break
			}
			content[f.Name] = len(act.SelectedOptions) > 0
		case ask.FieldEnum:
			if v, ok := optionValue(f, act.SelectedOption.Value); ok {
				content[f.Name] = v
			} else if act.SelectedOption.Value != "" {
				errs[f.Name] = "Choose one of the options."
			}
		case ask.FieldMultiEnum:
			if len(act.SelectedOptions) == 0 {
				break
			}
			vals := make([]string, 0, len(act.SelectedOptions))
			for _, o := range act.SelectedOptions {
				v, ok := optionValue(f, o.Value)
				if !ok {
					errs[f.Name] = "Choose from the options."
					break
				}
				vals = append(vals, v)
			}
			content[f.Name] = vals
		default:
			text := act.Value
			if f.Format == "date" {
				text = act.SelectedDate
			}
			if text != "" {
				content[f.Name] = text
			}
		}
	}
	return content, errs
}

// optionValue maps a select's option value (an index) to the enum value.
func optionValue(f ask.Field, idx string) (string, bool) {
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 || i >= len(f.Options) {
		return "", false
	}
	return f.Options[i].Value, true
}

// decodeAnswer reads an answer stored by the replica that took it, typed by
// its fields (JSON numbers come back as float64; integers must stay whole).
func decodeAnswer(fields []ask.Field, raw []byte) (map[string]any, error) {
	if len(raw) == 0 {
		return map[string]any{}, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	kinds := map[string]string{}
	for _, f := range fields {
		kinds[f.Name] = f.Kind
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case json.Number:
			if kinds[k] == ask.FieldInteger {
				n, err := x.Int64()
				if err != nil {
					f, _ := x.Float64()
					n = int64(f)
				}
				out[k] = n
			} else {
				f, _ := x.Float64()
				out[k] = f
			}
		case []any:
			ss := make([]string, 0, len(x))
			for _, e := range x {
				s, _ := e.(string)
				ss = append(ss, s)
			}
			out[k] = ss
		default:
			out[k] = v
		}
	}
	return out, nil
}

// hidden: answers to fields whose name or title suggests a secret are
// never shown, whatever the server marked.
func hidden(f ask.Field) bool {
	return f.Sensitive || ask.LooksSecret(f.Name) || ask.LooksSecret(f.Title)
}

// answerSummary shows what was answered, in field order: sensitive values
// hidden, the rest escaped and cut.
func answerSummary(fields []ask.Field, content map[string]any, by string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "*Answer of <@%s>:*", by)
	n := 0
	for _, f := range fields {
		v, ok := content[f.Name]
		if !ok || n >= 30 {
			continue
		}
		n++
		val := "_hidden_"
		if !hidden(f) {
			val = mrkdwn.EscapeText(mrkdwn.Clip(answerText(f, v), 200))
		}
		fmt.Fprintf(&s, "\n• *%s*: %s", mrkdwn.EscapeText(fieldLabel(f)), val)
	}
	if n == 0 {
		s.WriteString(" _(nothing filled in)_")
	}
	return mrkdwn.ClipRunes(s.String(), 2900)
}

// answerText renders one answered value for people.
func answerText(f ask.Field, v any) string {
	title := func(val string) string {
		for _, o := range f.Options {
			if o.Value == val {
				return cmp.Or(o.Title, o.Value)
			}
		}
		return val
	}
	switch x := v.(type) {
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case string:
		if f.Kind == ask.FieldEnum {
			return title(x)
		}
		return x
	case []string:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = title(e)
		}
		if len(out) == 0 {
			return "(none)"
		}
		return strings.Join(out, ", ")
	case float64:
		return formatNum(x)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return fmt.Sprint(v)
}

// defaultStrings reads an enum default: a string or a list of them (JSON
// gives []any).
func defaultStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []string:
		return x
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
