package playground

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// What the page reads: the workspace (GET /api/state) and everything one
// person sees at once (GET /api/view): the open channel, the open thread,
// their ephemeral messages there, their open modal, the assistant pane's
// state and the bot's latest Web API calls.

// state is GET /api/state.
type state struct {
	Workspace Workspace `json:"workspace"`
	Model     ModelInfo `json:"model"`
	MCP       string    `json:"mcp"`
}

func (s *Server) handleState(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, state{Workspace: s.ws, Model: s.opts.Model, MCP: s.opts.MCP})
}

// Msg is a message as the page shows it.
type Msg struct {
	TS       string `json:"ts"`
	ThreadTS string `json:"thread_ts,omitempty"`
	User     string `json:"user,omitempty"`
	Author   string `json:"author"`
	Bot      bool   `json:"bot,omitempty"`
	// Blocks when the message has any, else Text.
	Blocks    []Block    `json:"blocks,omitempty"`
	Text      []Node     `json:"text,omitempty"`
	Edited    bool       `json:"edited,omitempty"`
	Streaming bool       `json:"streaming,omitempty"`
	Ephemeral bool       `json:"ephemeral,omitempty"`
	Reactions []Reaction `json:"reactions,omitempty"`
	Replies   int        `json:"replies,omitempty"`
	Files     []FileRef  `json:"files,omitempty"`
	// Versions counts the message's versions (edits, stream appends).
	Versions int   `json:"versions,omitempty"`
	Time     int64 `json:"time"` // Unix milliseconds
}

// Reaction is an emoji on a message.
type Reaction struct {
	Name  string `json:"name"`
	Emoji string `json:"emoji"`
	Count int    `json:"count"`
	Mine  bool   `json:"mine,omitempty"`
}

// FileRef is a file shared with a message.
type FileRef struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Type  string `json:"type"` // Slack's pretty type
	Size  int    `json:"size"`
	Image bool   `json:"image,omitempty"` // the page may show it inline
	Gone  bool   `json:"gone,omitempty"`  // its bytes were evicted
}

// Modal is the top view of a person's modal stack.
type Modal struct {
	ID     string  `json:"id"`
	Title  string  `json:"title"`
	Submit string  `json:"submit,omitempty"`
	Close  string  `json:"close"`
	Blocks []Block `json:"blocks"`
	Depth  int     `json:"depth"`
}

// Assistant is the assistant pane's state for a DM thread.
type Assistant struct {
	Status  string   `json:"status,omitempty"`
	Title   string   `json:"title,omitempty"`
	Prompts []Prompt `json:"prompts,omitempty"`
}

// Prompt is a suggested prompt.
type Prompt struct {
	Title   string `json:"title"`
	Message string `json:"message"`
}

// CallInfo is one of the bot's Web API calls, for the side panel.
type CallInfo struct {
	Seq    uint64 `json:"seq"`
	Time   int64  `json:"time"`
	Method string `json:"method"`
	Status int    `json:"status"`
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
}

// viewResp is GET /api/view.
type viewResp struct {
	Channel   []Msg      `json:"channel"`
	Thread    []Msg      `json:"thread,omitempty"`
	Modal     *Modal     `json:"modal,omitempty"`
	Assistant *Assistant `json:"assistant,omitempty"`
	Calls     []CallInfo `json:"calls"`
	Failures  []string   `json:"failures,omitempty"`
	Connected bool       `json:"connected"`
}

// channelPage is how many top-level messages the page shows.
const channelPage = 100

// callsPage is how many calls one view answer carries at most.
const callsPage = 200

func (s *Server) handleView(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	me, ok := s.ws.person(q.Get("as"))
	if !ok {
		httpError(w, http.StatusBadRequest, "unknown person")
		return
	}
	channel := q.Get("channel")
	if !s.ws.hasChannel(channel) {
		httpError(w, http.StatusBadRequest, "unknown channel")
		return
	}
	since, _ := strconv.ParseUint(q.Get("calls"), 10, 64)
	thread := q.Get("thread")

	mine := s.slack.Ephemerals(me.ID)
	var out viewResp
	all := s.slack.Messages(channel)
	replies := map[string]int{}
	for _, m := range all {
		if !m.Deleted && m.ThreadTS != "" && m.ThreadTS != m.TS {
			replies[m.ThreadTS]++
		}
	}
	for _, m := range all {
		if m.Deleted || (m.ThreadTS != "" && m.ThreadTS != m.TS) {
			continue
		}
		msg := s.msg(m, me.ID)
		msg.Replies = replies[m.TS]
		out.Channel = append(out.Channel, msg)
	}
	for _, e := range mine {
		if e.Channel == channel && e.ThreadTS == "" && !e.Deleted {
			out.Channel = append(out.Channel, s.ephemeral(e))
		}
	}
	sortByTS(out.Channel)
	if len(out.Channel) > channelPage {
		out.Channel = out.Channel[len(out.Channel)-channelPage:]
	}
	if thread != "" {
		for _, m := range s.slack.Thread(channel, thread) {
			if m.Via == "assistant_thread" && m.Text == "" && m.MarkdownText == "" && len(m.Blocks) == 0 && len(m.Files) == 0 {
				continue // the assistant pane's root: Slack shows nothing for it
			}
			out.Thread = append(out.Thread, s.msg(m, me.ID))
		}
		for _, e := range mine {
			if e.Channel == channel && e.ThreadTS == thread && !e.Deleted {
				out.Thread = append(out.Thread, s.ephemeral(e))
			}
		}
		sortByTS(out.Thread)
		if channel == me.DM {
			out.Assistant = s.assistant(channel, thread)
		}
	}
	if views := s.slack.Views(s.ws.TeamID, me.ID); len(views) > 0 {
		out.Modal = s.modal(views[len(views)-1], len(views))
	}
	out.Calls = []CallInfo{}
	for _, c := range s.slack.JournalSince(since, callsPage) {
		out.Calls = append(out.Calls, CallInfo{Seq: c.Seq, Time: c.Time.UnixMilli(), Method: c.Method, Status: c.Status, OK: c.OK, Error: c.Error})
	}
	for _, f := range s.slack.Failures() {
		if f.User == me.ID && time.Since(f.Time) < 10*time.Minute && f.Type != slackemu.TypeEventsAPI {
			out.Failures = append(out.Failures, "Bobbin did not answer in time ("+f.Reason+"): Slack would show an error here.")
		}
	}
	out.Connected = s.slack.LiveConnections() > 0
	writeJSON(w, http.StatusOK, out)
}

func sortByTS(ms []Msg) {
	slices.SortStableFunc(ms, func(a, b Msg) int {
		switch {
		case tsLess(a.TS, b.TS):
			return -1
		case tsLess(b.TS, a.TS):
			return 1
		}
		return 0
	})
}

// tsLess compares Slack timestamps ("%d.%06d").
func tsLess(a, b string) bool {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	if len(as) != len(bs) {
		return len(as) < len(bs)
	}
	if as != bs {
		return as < bs
	}
	return af < bf
}

// tsTime is a Slack timestamp's time in Unix milliseconds.
func tsTime(ts string) int64 {
	sec, frac, _ := strings.Cut(ts, ".")
	a, _ := strconv.ParseInt(sec, 10, 64)
	b, _ := strconv.ParseInt((frac + "000")[:3], 10, 64)
	return a*1000 + b
}

// msg renders a stored message for person me.
func (s *Server) msg(m slackemu.Message, me string) Msg {
	out := Msg{TS: m.TS, ThreadTS: m.ThreadTS, User: m.User, Bot: m.IsBot(), Edited: m.Edited,
		Streaming: m.Streaming, Versions: len(m.History), Time: tsTime(m.TS)}
	out.Author = s.userName(m.User)
	if out.Author == "" {
		out.Author = m.User
	}
	out.Blocks = RenderBlocks(m.Blocks, s.names, nil)
	switch {
	case !m.IsBot() && m.Text != "" && onlyRichText(m.Blocks):
		// A person's own message shows as Slack shows what they typed:
		// *bold*, :emoji:, mentions (the emulator's rich_text block
		// keeps only the mentions).
		out.Blocks = nil
		out.Text = Mrkdwn(m.Text, s.names)
	case len(out.Blocks) > 0:
	case m.MarkdownText != "":
		out.Text = Markdown(m.MarkdownText, s.names)
	default:
		out.Text = Mrkdwn(m.Text, s.names)
	}
	out.Blocks = append(out.Blocks, renderChunks(m.Chunks, s.names)...)
	for _, name := range sortedKeys(m.Reactions) {
		users := m.Reactions[name]
		out.Reactions = append(out.Reactions, Reaction{Name: name, Emoji: emojiChar(name), Count: len(users), Mine: slices.Contains(users, me)})
	}
	for _, id := range m.Files {
		f, ok := s.slack.FileMeta(id)
		if !ok {
			continue
		}
		out.Files = append(out.Files, FileRef{ID: f.ID, Name: f.Name, Type: f.PrettyType, Size: f.Size,
			Image: inlineImage(f.Mimetype), Gone: f.Evicted})
	}
	return out
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ephemeral renders an ephemeral message.
func (s *Server) ephemeral(e slackemu.Ephemeral) Msg {
	out := Msg{TS: e.TS, ThreadTS: e.ThreadTS, User: s.ws.BotUser, Author: s.ws.BotName, Bot: true, Ephemeral: true, Time: tsTime(e.TS)}
	out.Blocks = RenderBlocks(e.Blocks, s.names, nil)
	if len(out.Blocks) == 0 {
		if e.Markdown != "" {
			out.Text = Markdown(e.Markdown, s.names)
		} else {
			out.Text = Mrkdwn(e.Text, s.names)
		}
	}
	return out
}

// modal renders a view of the stack.
func (s *Server) modal(v slackemu.View, depth int) *Modal {
	var raw struct {
		Title  *rawText `json:"title"`
		Submit *rawText `json:"submit"`
		Close  *rawText `json:"close"`
	}
	_ = json.Unmarshal(v.Raw, &raw)
	return &Modal{ID: v.ID, Title: raw.Title.plain(), Submit: raw.Submit.plain(), Close: cmpOr(raw.Close.plain(), "Cancel"),
		Blocks: RenderBlocks(v.Blocks, s.names, v.Errors), Depth: depth}
}

// assistant gathers the assistant pane's latest status, title and
// suggested prompts for a thread.
func (s *Server) assistant(channel, thread string) *Assistant {
	a := &Assistant{}
	for _, st := range s.slack.AssistantStatuses() {
		if st.Channel != channel || st.ThreadTS != thread {
			continue
		}
		switch st.Method {
		case "setStatus":
			a.Status = st.Status
		case "setTitle":
			a.Title = st.Title
		case "setSuggestedPrompts":
			var ps []Prompt
			_ = json.Unmarshal(st.Prompts, &ps)
			a.Prompts = ps
		}
	}
	return a
}

// inlineImage reports whether the page may show a file inline: raster
// images only (SVG can carry script).
func inlineImage(mime string) bool {
	switch mime {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// handleFile serves a shared file's bytes: raster images inline, anything
// else as a plain-text attachment, never as HTML.
func (s *Server) handleFile(w http.ResponseWriter, r *http.Request) {
	f, ok := s.slack.FileInfo(r.PathValue("id"))
	if !ok || f.Team != s.ws.TeamID || len(f.Channels) == 0 || f.Content == nil {
		http.Error(w, "no such file", http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	if inlineImage(f.Mimetype) {
		h.Set("Content-Type", f.Mimetype)
	} else {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Content-Disposition", "attachment")
	}
	_, _ = w.Write(f.Content)
}

// onlyRichText reports whether blocks are all rich_text (what a Slack
// client attaches to a typed message).
func onlyRichText(raw json.RawMessage) bool {
	var bs []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &bs) != nil {
		return len(raw) == 0
	}
	for _, b := range bs {
		if b.Type != "rich_text" {
			return false
		}
	}
	return true
}
