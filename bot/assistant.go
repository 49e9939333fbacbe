package bot

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// The assistant pane. Slack says which channel the person is viewing when
// they open an assistant thread (assistant_thread_started) and each time
// they move (assistant_thread_context_changed). The bot records it for the
// thread's session and, when it changed since the model last heard, puts a
// line in front of the person's next message: new content is appended, so
// the prompt prefix stays cacheable.

// paneStore is session.Store's record of pane contexts and of titles
// people gave sessions (part of Store).
type paneStore interface {
	SetPaneContext(ctx context.Context, k session.ThreadKey, c session.PaneContext) (bool, error)
	PaneContext(ctx context.Context, k session.ThreadKey) (session.PaneContext, error)
	SetPersonTitle(ctx context.Context, k session.ThreadKey, pt session.PersonTitle) (bool, error)
	PersonTitle(ctx context.Context, k session.ThreadKey) (session.PersonTitle, error)
}

// paneExtra is the session metadata key of the channel the model was last
// told the person is viewing.
const paneExtra = "pane_channel"

// suggestedPrompts are offered when an assistant thread opens. Each is
// something the bot can do without tools or a channel's history (it reads
// only the threads it is asked in); manifest.yaml offers the same ones.
var suggestedPrompts = []slack.AssistantThreadsPrompt{
	{Title: "What can you do?", Message: "What can you do, and which tools do you have here?"},
	{Title: "Draft a message", Message: "Help me draft a short announcement for my team."},
	{Title: "Review my writing", Message: "I'll paste some text next: review it for clarity and tone and suggest improvements."},
}

// recordPane stores the pane context an assistant event carries; false
// when it could not be stored (the event is then not acked, so Slack
// redelivers it).
func (b *Bot) recordPane(ctx context.Context, m inbound) bool {
	if m.Pane == nil {
		return true
	}
	if _, err := b.store.SetPaneContext(ctx, m.key(), *m.Pane); err != nil {
		b.log.Warn("bot: cannot record the assistant pane's context; not acking", append(threadAttrs(m.Team, m.Channel, m.ThreadTS), "err", err)...)
		return false
	}
	return true
}

// paneNote is the line telling the model where the person is, when that
// changed since it was last told ("" otherwise); it records the change in
// meta. Only assistant threads (in DMs) have a pane.
func (b *Bot) paneNote(ctx context.Context, k session.ThreadKey, meta *session.Meta) string {
	if !strings.HasPrefix(k.Channel, "D") {
		return ""
	}
	pc, err := paneFor(ctx, b.store, k) // agentview.go
	if err != nil {
		if !errors.Is(err, session.ErrNotFound) {
			b.log.Warn("bot: cannot read the assistant pane's context", append(threadAttrs(k.Team, k.Channel, k.ThreadTS), "err", err)...)
		}
		return ""
	}
	if pc.ChannelID == "" || meta.Extra[paneExtra] == pc.ChannelID {
		return ""
	}
	if meta.Extra == nil {
		meta.Extra = map[string]string{}
	}
	meta.Extra[paneExtra] = pc.ChannelID
	where := "a direct message conversation"
	if !strings.HasPrefix(pc.ChannelID, "D") {
		where = "the channel #" + b.people.ChannelName(ctx, k.Team, pc.ChannelID) + " (" + pc.ChannelID + ")"
	}
	return "[Slack: while writing this, the person is viewing " + where + ".]"
}

// suggestPrompts answers assistant_thread_started with suggested prompts.
func (b *Bot) suggestPrompts(ctx context.Context, m inbound) {
	c := slackapi.Call{Team: m.Team, Method: slackapi.AssistantThreadsSetSuggestedPrompts, Prio: slackapi.Lossy,
		Merge: m.Channel + ":" + m.ThreadTS, Wait: 5 * time.Second}
	err := b.slack.Do(ctx, c, func(ctx context.Context, api *slack.Client) error {
		return api.SetAssistantThreadsSuggestedPromptsContext(ctx, slack.AssistantThreadsSetSuggestedPromptsParameters{
			ChannelID: m.Channel,
			ThreadTS:  m.ThreadTS,
			Title:     "Try asking",
			Prompts:   suggestedPrompts,
		})
	})
	if err != nil {
		b.log.Debug("bot: suggested prompts failed", "err", err)
	}
}

// maxTitle bounds an assistant thread's title, in runes.
const maxTitle = 80

// titleThread names a new assistant-pane thread after its first question
// (assistant.threads.setTitle, which Slack bridges to the thread's agent
// session title), so the person's thread history reads well. Only threads
// in the bot's DM have titles; a failure only loses the title. A session a
// person titled (agent_session_title_changed, agentview.go) is never
// renamed: that is checked as late as possible, once the call has its
// budget. (The bot's other title, agents.sessions.setStatus's, applies
// only when it creates the session, so it never renames one either.)
func (b *Bot) titleThread(ctx context.Context, k session.ThreadKey, first inbound) {
	if !strings.HasPrefix(k.Channel, "D") || first.Kind != kindDM || first.TS == "" || first.TS == k.ThreadTS {
		return
	}
	title := threadTitle(first.Text)
	if title == "" {
		return
	}
	c := slackapi.Call{Team: k.Team, Method: slackapi.AssistantThreadsSetTitle, Prio: slackapi.Lossy, Merge: k.Channel + ":" + k.ThreadTS, Wait: 5 * time.Second}
	err := b.slack.Do(ctx, c, func(ctx context.Context, api *slack.Client) error {
		if b.personTitled(ctx, k) {
			return errPersonTitled
		}
		return api.SetAssistantThreadsTitleContext(ctx, slack.AssistantThreadsSetTitleParameters{
			ChannelID: k.Channel, ThreadTS: k.ThreadTS, Title: title,
		})
	})
	if errors.Is(err, errPersonTitled) {
		b.log.Debug("bot: a person titled the session; keeping their title", threadAttrs(k.Team, k.Channel, k.ThreadTS)...)
		return
	}
	if err != nil {
		b.log.Debug("bot: assistant thread title not set", append(threadAttrs(k.Team, k.Channel, k.ThreadTS), "err", err)...)
	}
}

// errPersonTitled stops titleThread's call: a person titled the session.
var errPersonTitled = errors.New("bot: a person titled the session")

// threadTitle is a question's first line, without Slack markup, cut to
// maxTitle runes.
func threadTitle(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.Join(strings.Fields(slackText(line)), " ")
	return mrkdwn.Clip(line, maxTitle)
}
