package bot

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// Thread context: what the people in a thread can see, in the session.
// When the bot is first addressed in a thread it has no session for, it
// reads the thread's earlier messages (conversations.replies) and puts them
// before the question as context blocks: user messages that say they are
// context, one line per message with its speaker (name and id) and time.
// The bot's own earlier posts become assistant text. With
// THREAD_FOLLOWUPS=mention, replies in a thread with a session that do not
// mention the bot are recorded the same way (queued like any message and
// appended under the thread's lease by whichever replica holds it), so the
// next mention sees the whole conversation. Context is only ever appended:
// earlier messages are never rewritten, so prompt caches keep hitting.

// Follow-up modes (THREAD_FOLLOWUPS).
const (
	// FollowupsAll: any person's reply in a thread that has a session
	// starts a turn.
	FollowupsAll = "all"
	// FollowupsMention: only mentions start turns in channel threads; other
	// replies are recorded as context.
	FollowupsMention = "mention"
)

// Defaults of the thread-context import.
const (
	// DefaultThreadContextMessages is THREAD_CONTEXT_MESSAGES' default.
	DefaultThreadContextMessages = 100
	// DefaultThreadContextShare is the share of the context window the
	// imported messages may take at most.
	DefaultThreadContextShare = 0.25
	// threadImportWait bounds how long the import holds the turn back
	// (budget waits, pages, names); past it the turn goes on with what was
	// read.
	threadImportWait = 2 * time.Second
	// threadPagesWait is the part of it the pages may take; the rest is
	// for the speakers' names.
	threadPagesWait = 1500 * time.Millisecond
	// maxReplyPages bounds the conversations.replies pages one import
	// reads.
	maxReplyPages = 10
	// maxContextMedia is how many images and PDFs of imported messages
	// are downloaded (the newest); older ones are notes.
	maxContextMedia = provider.MaxImagesPerMessage
)

// Context block headers.
const (
	headerImported = "[Slack: messages posted in this thread before you were asked, oldest first. " +
		"They are context to read, not messages you were asked to answer.]"
	headerRecorded = "[Slack: replies posted in this thread that did not mention you. " +
		"They are context to read; nobody asked you to answer them.]"
	noteUnread = "[Slack: this thread's earlier messages could not be read just now, so you do not see them.]"
)

// threadEntry is one message of a thread as context.
type threadEntry struct {
	ts, user, name string
	// app is the name of another app that posted it.
	app string
	// own: the bot's own post (assistant text).
	own    bool
	text   string
	edited bool
	files  []fileTask
}

// contextEnabled reports whether a thread's earlier messages are read.
func (b *Bot) contextEnabled() bool { return b.opts.ThreadContextMessages > 0 }

// importWanted reports whether the first turn of thread k, for batch, reads
// the thread: in a channel (DMs and the assistant pane have no thread
// history the bot did not see), when the question is a reply in a thread
// or a shortcut on a message with a thread.
func (b *Bot) importWanted(k session.ThreadKey, batch []inbound) bool {
	if !b.contextEnabled() || strings.HasPrefix(k.Channel, "D") || len(batch) == 0 {
		return false
	}
	first := batch[0]
	if sc := first.Shortcut; sc != nil {
		return sc.TS != k.ThreadTS || sc.Replies > 0
	}
	return first.TS != "" && first.TS != k.ThreadTS
}

// importThread reads thread k's messages before until (all when empty),
// leaving out skip, within threadImportWait. A failure is logged and gives
// what was read (maybe nothing): the turn goes on without it. more reports
// that pages were left unread; total is the thread's size as its root
// said (0 when not read).
func (b *Bot) importThread(ctx context.Context, k session.ThreadKey, until, skip string) (entries []threadEntry, more bool, total int) {
	log := b.log.With(threadAttrs(k.Team, k.Channel, k.ThreadTS)...)
	ictx, cancel := context.WithTimeout(ctx, threadImportWait)
	defer cancel()
	pctx, pcancel := context.WithTimeout(ictx, threadPagesWait)
	defer pcancel()
	deadline, _ := pctx.Deadline()
	var all []slack.Message
	cursor, calls := "", 0
	var err error
	for calls < maxReplyPages {
		var msgs []slack.Message
		var next string
		c := slackapi.Call{Team: k.Team, Method: slackapi.ConversationsReplies, Prio: slackapi.Lossy, Wait: max(time.Until(deadline), time.Millisecond)}
		err = b.slack.Do(pctx, c, func(ctx context.Context, api *slack.Client) error {
			var err error
			msgs, more, next, err = api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: k.Channel, Timestamp: k.ThreadTS, Cursor: cursor, Limit: 1000, Latest: until,
			})
			return err
		})
		calls++
		if err != nil {
			more = true
			break
		}
		all = append(all, msgs...)
		if !more || next == "" {
			more = false
			break
		}
		cursor = next
	}
	result := "full"
	switch {
	case err != nil && len(all) == 0:
		result = "failed"
		log.Warn("bot: thread context not imported; answering without the thread's earlier messages", "err", err, "calls", calls)
	case more:
		result = "partial"
		log.Info("bot: thread context imported in part; the newest earlier messages are missing", "err", err, "calls", calls, "messages", len(all))
	}
	b.m.ThreadImports.WithLabelValues(result).Inc()
	for _, m := range all {
		if m.Timestamp == k.ThreadTS && m.ReplyCount > 0 {
			total = m.ReplyCount + 1
		}
		if m.Timestamp == skip || m.Timestamp == "" || (until != "" && !tsBefore(m.Timestamp, until)) {
			continue
		}
		if e, ok := b.entryOf(k.Team, m); ok {
			entries = append(entries, e)
		}
	}
	sortEntries(entries) // oldest first, whatever order the pages came in
	b.nameEntries(ictx, k.Team, entries)
	return entries, more, total
}

// entryOf is a thread message as context; false for messages people do
// not read as part of the conversation (joins, tombstones, hidden updates).
func (b *Bot) entryOf(team string, m slack.Message) (threadEntry, bool) {
	switch m.SubType {
	case "", "thread_broadcast", "file_share", "bot_message", "me_message":
	default:
		return threadEntry{}, false
	}
	e := threadEntry{ts: m.Timestamp, user: m.User, text: m.Text, edited: m.Edited != nil}
	switch {
	case b.self(team).is(m.BotID, m.User):
		e.own = true
	case m.BotID != "" || m.SubType == "bot_message":
		e.app = cmp0(botProfileName(m.BotProfile), m.Username, m.BotID)
	}
	for _, f := range fromSlackFiles(m.Files) {
		e.files = append(e.files, fileTask{f: f})
	}
	if e.text == "" && len(e.files) == 0 {
		return e, false
	}
	return e, true
}

func botProfileName(p *slack.BotProfile) string {
	if p == nil {
		return ""
	}
	return p.Name
}

// nameEntries looks up the speakers' names (a few at once, cached); within
// ctx, else the id stands in.
func (b *Bot) nameEntries(ctx context.Context, team string, entries []threadEntry) {
	names := map[string]string{}
	var users []string
	for _, e := range entries {
		if _, ok := names[e.user]; !ok && e.user != "" && !e.own && e.app == "" {
			names[e.user] = ""
			users = append(users, e.user)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, u := range users {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			n := b.people.Name(ctx, team, u)
			mu.Lock()
			names[u] = n
			mu.Unlock()
		})
	}
	wg.Wait()
	for i := range entries {
		if entries[i].name == "" {
			entries[i].name = names[entries[i].user]
		}
	}
}

// selectContext keeps the newest entries within max messages and
// maxTokens (their text and, estimated from what Slack says, their files;
// a file over the budget becomes a note), and at most maxContextMedia
// images and PDFs downloaded. It returns the entries kept, oldest first,
// and how many older ones were left out.
func (b *Bot) selectContext(entries []threadEntry, maxMsgs, maxTokens int) ([]threadEntry, int) {
	count := b.countTokens
	if b.contextBound(entries, maxMsgs) <= maxTokens {
		// Everything within maxMsgs fits even counted by upper bounds, so
		// no exact count could change what is kept: the bounds stand in
		// and no tokenizer is built.
		count = b.boundTokens
	}
	used, media, first := 0, 0, len(entries)
	for i := len(entries) - 1; i >= 0; i-- {
		e := &entries[i]
		cost := count(contextLine(*e)) + 8
		if len(entries)-i > maxMsgs || used+cost > maxTokens {
			break
		}
		used += cost
		first = i
		for j := len(e.files) - 1; j >= 0; j-- {
			t := &e.files[j]
			if t.note != "" {
				continue
			}
			k := t.f.kind()
			fc := fileTokens(t.f, k)
			switch {
			case used+fc > maxTokens:
				t.note = noteContextShare
			case (k == kindImage || k == kindPDF) && media >= maxContextMedia:
				t.note = noteContextMedia
			default:
				used += fc
				if k == kindImage || k == kindPDF {
					media++
				}
			}
		}
	}
	return entries[first:], first
}

// fileTokens estimates a file's cost before downloading it, the way the
// agent counts it: images at most ~1,600 tokens (both providers' formulas
// after scaling), PDFs 3,000 a page at 100 KB a page, text by its inlined
// bytes.
func fileTokens(f sharedFile, k fileKind) int {
	switch k {
	case kindImage:
		return 1600
	case kindPDF:
		return 3000 * max(1, int(f.Size/(100<<10)))
	case kindText:
		return int(min(f.Size, provider.MaxTextFileBytes)+3)/4 + 20
	}
	return 30
}

// countTokens counts s with Options.Tokens, else estimates 4 bytes a token.
func (b *Bot) countTokens(s string) int {
	if b.opts.Tokens != nil {
		return b.opts.Tokens.Count(s)
	}
	return (len(s) + 3) / 4
}

// boundTokens is an upper bound of countTokens(s) that needs no tokenizer.
func (b *Bot) boundTokens(s string) int {
	if b.opts.Tokens != nil {
		return b.opts.Tokens.Bound(s)
	}
	return (len(s) + 3) / 4
}

// contextBound is an upper bound of the tokens selectContext can count for
// the newest maxMsgs entries: each line by its bound, every file not
// already a note by its estimate.
func (b *Bot) contextBound(entries []threadEntry, maxMsgs int) int {
	n := 0
	for i := len(entries) - 1; i >= 0 && len(entries)-i <= maxMsgs; i-- {
		e := &entries[i]
		n += b.boundTokens(contextLine(*e)) + 8
		for _, t := range e.files {
			if t.note == "" {
				n += fileTokens(t.f, t.f.kind())
			}
		}
	}
	return n
}

// contextBudget is the tokens imported context may take.
func (b *Bot) contextBudget() int {
	return int(float64(b.opts.ContextWindow) * b.opts.ThreadContextShare)
}

// contextLine renders one message: "[Alice (U1), 2025-05-01 10:02 UTC] text".
func contextLine(e threadEntry) string {
	var s strings.Builder
	s.WriteByte('[')
	switch {
	case e.own:
		s.WriteString("you (Bobbin)")
	case e.app != "":
		s.WriteString(oneLineName(e.app) + " (app)")
	case e.name != "" && e.user != "":
		s.WriteString(oneLineName(e.name) + " (" + e.user + ")")
	case e.user != "":
		s.WriteString(e.user)
	default:
		s.WriteString("someone")
	}
	if t := tsTime(e.ts); !t.IsZero() {
		s.WriteString(", " + t.UTC().Format("2006-01-02 15:04 UTC"))
	}
	s.WriteString("] ")
	s.WriteString(slackText(e.text))
	if e.edited {
		s.WriteString(" (edited)")
	}
	if len(e.files) > 0 {
		names := make([]string, len(e.files))
		for i, t := range e.files {
			names[i] = oneLineName(t.f.name())
		}
		s.WriteString(" [files: " + strings.Join(names, ", ") + "]")
	}
	return s.String()
}

// oneLineName keeps a person-chosen name on one line.
func oneLineName(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0x2028 || r == 0x2029 {
			return ' '
		}
		return r
	}, s)
}

// tsTime reads a Slack ts ("1700000000.000100").
func tsTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || s <= 0 {
		return time.Time{}
	}
	us, _ := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	return time.Unix(s, us*1000)
}

// tsBefore reports whether Slack ts a is earlier than b.
func tsBefore(a, b string) bool {
	ta, tb := tsTime(a), tsTime(b)
	if ta.IsZero() || tb.IsZero() {
		return a < b
	}
	return ta.Before(tb)
}

// msgBuilder assembles messages whose files are fetched together.
type msgBuilder struct {
	msgs   []provider.Message
	groups [][]fileTask
	dest   []int
}

func (mb *msgBuilder) add(m provider.Message) int {
	mb.msgs = append(mb.msgs, m)
	return len(mb.msgs) - 1
}

// files attaches one Slack message's files to message i.
func (mb *msgBuilder) files(i int, ts []fileTask) {
	if len(ts) > 0 {
		mb.groups = append(mb.groups, ts)
		mb.dest = append(mb.dest, i)
	}
}

// contextBlocks adds entries as context: runs of other people's messages
// as one user message under header (notes after it), the bot's own posts as
// assistant messages.
func (mb *msgBuilder) contextBlocks(entries []threadEntry, header string, notes ...string) {
	head := header
	for _, n := range notes {
		if n != "" {
			head += "\n" + n
		}
	}
	open := -1
	for _, e := range entries {
		if e.own {
			if open < 0 && head != "" {
				mb.add(provider.Message{Role: provider.RoleUser, Content: head, Meta: map[string]string{"context": "thread"}})
				head = ""
			}
			open = -1
			i := mb.add(provider.Message{Role: provider.RoleAssistant, Content: slackText(e.text), Meta: map[string]string{"ts": e.ts, "context": "thread"}})
			mb.files(i, e.files)
			continue
		}
		if open < 0 {
			h := head
			if h == "" {
				h = header
			}
			head = ""
			open = mb.add(provider.Message{Role: provider.RoleUser, Content: h, Meta: map[string]string{"context": "thread", "ts": e.ts}})
		}
		mb.msgs[open].Content += "\n" + contextLine(e)
		mb.files(open, e.files)
	}
}

// build fetches every file and puts the parts on their messages.
func (mb *msgBuilder) build(ctx context.Context, b *Bot, team string) []provider.Message {
	parts := b.fileParts(ctx, team, mb.groups)
	for gi, ps := range parts {
		m := &mb.msgs[mb.dest[gi]]
		m.Parts = append(m.Parts, ps...)
	}
	return mb.msgs
}

// importContext reads thread k before the batch (first turn of the
// session) and adds it to mb as context blocks.
func (b *Bot) importContext(ctx context.Context, k session.ThreadKey, batch []inbound, mb *msgBuilder) {
	until, skip := batch[0].TS, ""
	if sc := batch[0].Shortcut; sc != nil {
		until, skip = "", sc.TS
	}
	r := b.readThread(ctx, k, until, skip) // threadcache.go
	entries, more := r.entries, r.more
	if len(entries) == 0 {
		if more {
			mb.add(provider.Message{Role: provider.RoleUser, Content: noteUnread, Meta: map[string]string{"context": "thread"}})
		}
		return
	}
	kept, dropped := b.selectContext(entries, b.opts.ThreadContextMessages, b.contextBudget())
	dropped += r.omitted
	var notes []string
	if dropped > 0 {
		notes = append(notes, "[Slack: the thread's "+strconv.Itoa(dropped)+" earliest messages are left out here (limits on thread context).]")
	}
	if more {
		notes = append(notes, unreadNote(r))
	}
	mb.contextBlocks(kept, headerImported, notes...)
}

// entryOfInbound is a recorded reply (THREAD_FOLLOWUPS=mention) as context.
func (b *Bot) entryOfInbound(ctx context.Context, k session.ThreadKey, m inbound) threadEntry {
	e := threadEntry{ts: m.TS, user: m.User, text: m.Text, name: b.people.Name(ctx, k.Team, m.User)}
	for _, f := range m.Files {
		e.files = append(e.files, fileTask{f: f})
	}
	return e
}

// recordContext appends replies that start no turn to the session, under
// the thread's lease (the fencing token refuses a writer that lost it).
func (b *Bot) recordContext(ctx context.Context, lease *session.Lease, batch []inbound) {
	if len(batch) == 0 {
		return
	}
	k := lease.Key()
	log := b.log.With(threadAttrs(k.Team, k.Channel, k.ThreadTS)...)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fileWork+5*time.Second)
	defer cancel()
	var mb msgBuilder
	entries := make([]threadEntry, 0, len(batch))
	for _, m := range batch {
		entries = append(entries, b.entryOfInbound(rctx, k, m))
	}
	sortEntries(entries)
	mb.contextBlocks(entries, headerRecorded)
	msgs := mb.build(rctx, b, k.Team)
	if err := b.store.Append(rctx, k, lease.Token(), msgs...); err != nil {
		if errors.Is(err, session.ErrStaleFence) {
			log.Warn("bot: thread lease lost before replies were recorded as context", "replies", len(batch))
			return
		}
		log.Error("bot: recording replies as context failed", "err", err, "replies", len(batch))
		return
	}
	b.m.ContextReplies.Add(float64(len(batch)))
}

// asksForAnswer reports whether m starts a turn (everything but a reply
// recorded as context).
func (m inbound) asksForAnswer() bool { return m.Kind != kindContext }

// takeTurnBudget spends from the person's turn budget
// (USER_TURNS_PER_MINUTE); replies recorded as context start no turn and
// spend nothing.
func (b *Bot) takeTurnBudget(ctx context.Context, m inbound) (bool, time.Duration, error) {
	if m.Kind == kindContext {
		return true, 0, nil
	}
	return b.store.Take(ctx, m.Team+":user:"+m.User, b.opts.UserTurnsPerMinute, b.opts.UserTurnsPerMinute)
}

// batchMessages adds a turn's queued messages to mb: a person's message
// with its files, a shortcut's message, and replies recorded as context
// (a run of them as one context block).
func (b *Bot) batchMessages(ctx context.Context, k session.ThreadKey, batch []inbound, mb *msgBuilder) {
	for i := 0; i < len(batch); i++ {
		m := batch[i]
		switch m.Kind {
		case kindContext:
			var entries []threadEntry
			for ; i < len(batch) && batch[i].Kind == kindContext; i++ {
				entries = append(entries, b.entryOfInbound(ctx, k, batch[i]))
			}
			i--
			sortEntries(entries)
			mb.contextBlocks(entries, headerRecorded)
			continue
		case kindShortcut:
			if m.Shortcut != nil {
				mb.files(mb.add(b.shortcutMessage(ctx, k, m)), tasksOf(m.Files))
				continue
			}
		}
		j := mb.add(provider.Message{
			Role:     provider.RoleUser,
			Content:  m.Text,
			UserID:   m.User,
			UserName: b.people.Name(ctx, k.Team, m.User),
			Meta:     map[string]string{"ts": m.TS},
		})
		mb.files(j, tasksOf(m.Files))
	}
}

func tasksOf(fs []sharedFile) []fileTask {
	ts := make([]fileTask, len(fs))
	for i, f := range fs {
		ts[i] = fileTask{f: f}
	}
	return ts
}

// sortEntries puts replies in the order they were posted: events of one
// thread may be delivered (and queued) in another.
func sortEntries(es []threadEntry) {
	slices.SortStableFunc(es, func(a, b threadEntry) int {
		switch {
		case tsBefore(a.ts, b.ts):
			return -1
		case tsBefore(b.ts, a.ts):
			return 1
		}
		return 0
	})
}
