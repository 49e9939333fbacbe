package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bobbinbot/bobbin/provider"
)

// errNothingToCompact means the history holds nothing older than the kept
// recent messages (or only an earlier summary).
var errNothingToCompact = errors.New("agent: nothing to compact")

// summaryPrompt asks for a summary that lets the conversation continue
// without the original messages.
const summaryPrompt = `You summarize the earlier part of a conversation between people in a chat thread and an AI assistant that can call tools, so the assistant can continue without the original messages.

Keep, as concise notes:
- what each person asked for and any constraints or preferences they gave;
- decisions made and facts established (names, numbers, identifiers, URLs, file paths, exact values);
- every tool call that matters: which tool, with what, and its outcome or error;
- open tasks, unanswered questions and what the assistant promised to do next.

Drop greetings, repetition and anything superseded. Write in the language of the conversation. Output only the notes.`

// summaryHeader starts the summary message that replaces older history.
const summaryHeader = "Summary of the earlier conversation (older messages were replaced by this summary):\n\n"

// Summary request limits. The summary's output cap is the turn's
// (Options.MaxTokens, zero = the provider's default): a reasoning model
// spends part of it thinking, and a fixed cap sent where the operator set
// none is what the issue of max_tokens on o-series models was about.
const (
	summaryToolResult  = 2000 // bytes of one tool result or text file shown to the summarizer
	summaryInputShare  = 2    // the transcript gets at most 1/2 of the window
	summaryBytesPerTok = 3    // conservative bytes per token for that cut
)

// overBudget reports whether the next request's estimate passes the
// compaction threshold.
func (r *run) overBudget() bool {
	o := r.a.opts
	limit := int(o.CompactAt * float64(o.ContextWindow))
	if o.MaxTokens > 0 {
		limit = min(limit, o.ContextWindow-o.MaxTokens)
	}
	return r.budget.over(limit)
}

// splitPoint returns the index of the first kept message: the last keep
// messages, moved back so no tool result is separated from the assistant
// message that made the call.
func splitPoint(h []provider.Message, keep int) int {
	s := len(h) - keep
	if s <= 0 {
		return 0
	}
	for s > 0 && h[s].Role == provider.RoleTool {
		s--
	}
	return s
}

// compact replaces the older part of the history with a summary made by the
// same provider, keeps the recent messages verbatim and checkpoints the new
// history with Replace. The summarizer sees TurnOnly results as their
// placeholders, so the summary, which is kept, cannot carry them.
func (r *run) compact(ctx context.Context) error {
	s := splitPoint(r.history, r.a.opts.KeepRecent)
	if s == 0 || s == 1 && r.history[0].Summary {
		return errNothingToCompact
	}
	older := r.history[:s]
	summary, err := r.summarize(ctx, older)
	if err != nil {
		return fmt.Errorf("agent: compaction: %w", err)
	}
	h := make([]provider.Message, 0, len(r.history)-s+1)
	h = append(h, provider.Message{Role: provider.RoleSystem, Content: summaryHeader + summary, Summary: true})
	h = append(h, r.history[s:]...)
	r.history = h
	r.remapTurnOnly(s)
	r.budget.anchor = Anchor{}
	r.budget.reset(r.sentForm(h))
	r.res.Compacted = true
	if err := r.checkpoint(ctx, Checkpoint{Append: h, Replace: true}); err != nil {
		return err
	}
	r.observe(Event{Kind: EventCompacted, Text: fmt.Sprintf("summarized %d earlier messages", s), Step: r.res.Steps})
	return nil
}

// summarize asks the provider for a summary of msgs, consuming the stream
// without showing it.
func (r *run) summarize(ctx context.Context, msgs []provider.Message) (string, error) {
	req := provider.Request{
		Model: r.model(),
		Messages: []provider.Message{
			{Role: provider.RoleSystem, Content: summaryPrompt},
			{Role: provider.RoleUser, Content: renderTranscript(msgs, r.a.opts.ContextWindow/summaryInputShare*summaryBytesPerTok) +
				"\n\nWrite the notes for the conversation above."},
		},
		MaxTokens: r.maxTokens(),
	}
	var text strings.Builder
	var final string
	var done bool
	ctx, span := r.startChat(ctx, req, false)
	s := &streamed{}
	defer func() { r.endChat(span, s, nil) }()
	for ev, err := range r.provider().Stream(ctx, req) {
		if err != nil {
			return "", err
		}
		switch ev.Type {
		case provider.EventTextDelta:
			text.WriteString(ev.Text)
		case provider.EventDone:
			done = true
			r.res.Usage.Add(ev.Usage)
			r.spent(ctx, ev.Usage)
			s.usage, s.stop = ev.Usage, ev.StopReason
			if ev.Message != nil {
				final = ev.Message.Content
			}
		}
	}
	if !done {
		return "", provider.ErrTruncated
	}
	out := strings.TrimSpace(final)
	if out == "" {
		out = strings.TrimSpace(text.String())
	}
	if out == "" {
		return "", errors.New("empty summary")
	}
	return out, nil
}

// renderTranscript writes msgs as plain text for the summarizer, keeping at
// most limit bytes: when too long, the oldest messages after an earlier
// summary are dropped first.
func renderTranscript(msgs []provider.Message, limit int) string {
	parts := make([]string, 0, len(msgs))
	for _, m := range msgs {
		parts = append(parts, renderMessage(m))
	}
	total := 0
	for _, p := range parts {
		total += len(p) + 2
	}
	first := 0
	if len(msgs) > 0 && msgs[0].Summary {
		first = 1
	}
	dropped := 0
	for i := first; i < len(parts)-1 && total > limit; i++ {
		total -= len(parts[i]) + 2
		parts[i] = ""
		dropped++
	}
	var b strings.Builder
	b.WriteString("<conversation>\n")
	for i, p := range parts {
		if p == "" {
			if i == first && dropped > 0 {
				fmt.Fprintf(&b, "[%d older messages omitted]\n\n", dropped)
			}
			continue
		}
		b.WriteString(p)
		b.WriteString("\n\n")
	}
	b.WriteString("</conversation>")
	return b.String()
}

func renderMessage(m provider.Message) string {
	var b strings.Builder
	switch {
	case m.Summary:
		b.WriteString("[summary of what came before]\n")
		b.WriteString(strings.TrimPrefix(m.Content, summaryHeader))
	case m.Role == provider.RoleUser:
		b.WriteString("[user")
		if name := cmp.Or(m.UserName, m.UserID); name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("]\n" + m.Content)
	case m.Role == provider.RoleAssistant:
		b.WriteString("[assistant]")
		if m.Content != "" {
			b.WriteString("\n" + m.Content)
		}
		if m.Interrupted {
			b.WriteString("\n(answer interrupted)")
		}
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, "\n(called tool %s with %s)", c.Name, truncate(c.Arguments, summaryToolResult))
		}
	case m.Role == provider.RoleTool:
		kind := "result"
		if m.IsError {
			kind = "error"
		}
		fmt.Fprintf(&b, "[tool %s %s]\n%s", m.ToolName, kind, truncate(m.Content, summaryToolResult))
	default:
		b.WriteString("[" + string(m.Role) + "]\n" + m.Content)
	}
	// Images and PDFs are not sent to the summarizer: a note names them,
	// and the summary keeps what was said about them.
	for _, p := range m.Parts {
		switch p.Type {
		case provider.PartTextFile:
			p.Text = truncate(p.Text, summaryToolResult)
		case provider.PartImage, provider.PartDocument:
			p = p.AsNote("shared here; not shown to the summarizer")
		}
		b.WriteString("\n" + p.AsText())
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xc0 == 0x80 {
		cut--
	}
	return fmt.Sprintf("%s…[%d more bytes]", s[:cut], len(s)-cut)
}
