package slackemu

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Message is a stored channel message (a copy: mutate nothing).
type Message struct {
	Team     string
	Channel  string
	TS       string
	ThreadTS string // "" for a top-level message
	User     string // author; the bot's user id for bot posts
	BotID    string // set for bot posts
	// Current content.
	Text         string
	MarkdownText string
	Blocks       json.RawMessage
	Metadata     json.RawMessage
	// Files are the ids of the files shared with the message (FileInfo
	// has them).
	Files []string
	// Subtype is Slack's message subtype: "file_share" for a person's
	// message with files, "bot_message" for a classic bot post, "" else.
	Subtype    string
	botName    string // another app's bot (UserPost.BotID)
	sourceTeam string // UserPost.SourceTeam
	// Chunks are the non-text stream chunks received (task_update,
	// plan_update, blocks), in order.
	Chunks []json.RawMessage
	// PlanTitle is the stream's plan title (plan_update chunks);
	// TaskDisplayMode its chat.startStream task_display_mode. TaskCards
	// has the task cards.
	PlanTitle       string
	TaskDisplayMode string
	tasks           []TaskCard
	// UnfurlLinks / UnfurlMedia are the flags the post carried (nil when
	// absent; Slack's default then is to unfurl).
	UnfurlLinks *bool
	UnfurlMedia *bool
	// History holds every version of the content, the first post included:
	// one entry per post, edit, stream start, append and stop.
	History []Version
	// Streaming is true between chat.startStream and chat.stopStream (or
	// the stream's expiry).
	Streaming   bool
	StreamEnded string // "stopped", "expired", "stopped_by_user" or "" while streaming/never
	Deleted     bool
	Edited      bool
	// Reactions maps emoji names to the users who added them, in order.
	Reactions map[string][]string
	// Via records how the message was made: "chat.postMessage",
	// "chat.startStream", "user" (test helpers), "slash", "response_url".
	Via string
	// Recipient of a stream (recipient_team_id / recipient_user_id).
	RecipientTeam, RecipientUser string

	streamStart time.Time
}

// Version is one state of a message's content.
type Version struct {
	Time         time.Time
	Method       string // the call that produced it
	Text         string
	MarkdownText string
	Blocks       json.RawMessage
}

// Visible is the text a person reads: markdown_text when set, else the text
// of the markdown/section/header/context/rich_text blocks when any carries
// text, else the text field.
func (v Version) Visible() string {
	if v.MarkdownText != "" {
		return v.MarkdownText
	}
	if bt := blocksText(v.Blocks); bt != "" {
		return bt
	}
	return v.Text
}

// Visible is the current Version's Visible text.
func (m Message) Visible() string {
	return Version{Text: m.Text, MarkdownText: m.MarkdownText, Blocks: m.Blocks}.Visible()
}

// Versions returns the Visible text of every version, in order.
func (m Message) Versions() []string {
	out := make([]string, len(m.History))
	for i, v := range m.History {
		out[i] = v.Visible()
	}
	return out
}

// IsBot reports whether a bot posted the message.
func (m Message) IsBot() bool { return m.BotID != "" }

// Ephemeral is a message only one user sees.
type Ephemeral struct {
	Team     string
	Channel  string
	User     string // who sees it
	TS       string // message_ts
	ThreadTS string
	Text     string
	Markdown string
	Blocks   json.RawMessage
	// Via: "chat.postEphemeral", "slash_ack", "response_url".
	Via string
	// Replaced / Deleted by a response_url call.
	Replaced bool
	Deleted  bool
}

// AssistantStatus is one assistant.threads.* call.
type AssistantStatus struct {
	Time     time.Time
	Method   string // setStatus, setSuggestedPrompts, setTitle
	Team     string
	Channel  string
	ThreadTS string
	Status   string
	Loading  []string
	Title    string
	Prompts  json.RawMessage
	// Ignored is set for a call Slack accepts but does nothing with
	// (setSuggestedPrompts with thread_ts under Options.AgentView).
	Ignored bool
}

func msgKey(channel, ts string) string { return channel + "/" + ts }

func (s *Server) putMessageLocked(m *Message) {
	s.msgs[msgKey(m.Channel, m.TS)] = m
	s.order[m.Channel] = append(s.order[m.Channel], m)
	s.trimChannelLocked(m.Channel)
	s.changedLocked()
}

func (s *Server) recordVersionLocked(m *Message, method string) {
	m.History = append(m.History, Version{Time: time.Now(), Method: method, Text: m.Text, MarkdownText: m.MarkdownText, Blocks: m.Blocks})
	s.trimHistoryLocked(m)
	s.changedLocked()
}

func copyMessage(m *Message) Message {
	c := *m
	c.History = slices.Clone(m.History)
	c.Chunks = slices.Clone(m.Chunks)
	c.Files = slices.Clone(m.Files)
	if m.Reactions != nil {
		c.Reactions = map[string][]string{}
		for k, v := range m.Reactions {
			c.Reactions[k] = slices.Clone(v)
		}
	}
	return c
}

// Messages returns the channel's messages (top-level and replies, deleted
// ones included) in ts order.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.order[channel] {
		out = append(out, copyMessage(m))
	}
	return out
}

// MessageAt returns one message.
func (s *Server) MessageAt(channel, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgs[msgKey(channel, ts)]
	if m == nil {
		return Message{}, false
	}
	return copyMessage(m), true
}

// Thread returns the parent (when stored) and the replies of a thread,
// deleted messages excluded, in ts order.
func (s *Server) Thread(channel, threadTS string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.threadLocked(channel, threadTS) {
		out = append(out, copyMessage(m))
	}
	return out
}

// BotReplies returns the bot's (non-deleted) messages in a thread.
func (s *Server) BotReplies(channel, threadTS string) []Message {
	var out []Message
	for _, m := range s.Thread(channel, threadTS) {
		if m.IsBot() && m.TS != threadTS {
			out = append(out, m)
		}
	}
	return out
}

func (s *Server) threadLocked(channel, threadTS string) []*Message {
	var out []*Message
	for _, m := range s.order[channel] {
		if m.Deleted {
			continue
		}
		if m.TS == threadTS || m.ThreadTS == threadTS {
			out = append(out, m)
		}
	}
	return out
}

// History returns every version of a message (nil if unknown).
func (s *Server) History(channel, ts string) []Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgs[msgKey(channel, ts)]
	if m == nil {
		return nil
	}
	return slices.Clone(m.History)
}

// Ephemerals returns the ephemeral messages shown to user, in order.
func (s *Server) Ephemerals(user string) []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Ephemeral
	for _, e := range s.ephemerals[user] {
		out = append(out, *e)
	}
	return out
}

// AssistantStatuses returns every assistant.threads.* call, in order.
func (s *Server) AssistantStatuses() []AssistantStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.statuses)
}

// PostUserMessage stores a message from a person without delivering any
// event (see Message and Mention for that). It returns the ts.
func (s *Server) PostUserMessage(team, channel, user, text, threadTS string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.postUserLocked(team, channel, user, text, threadTS).TS
}

func (s *Server) postUserLocked(team, channel, user, text, threadTS string) *Message {
	m := &Message{Team: team, Channel: channel, TS: s.newTSLocked(), ThreadTS: threadTS, User: user, Text: text, Via: "user"}
	m.Blocks = richTextBlocks(text)
	s.recordVersionLocked(m, "user")
	s.putMessageLocked(m)
	return m
}

// richTextBlocks renders text as the rich_text block Slack attaches to user
// messages (mentions as user elements). The message text escapes &, <
// and >; rich_text elements carry them as they are.
func richTextBlocks(text string) json.RawMessage {
	var elems []map[string]any
	unescape := strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace
	rest := text
	for rest != "" {
		i := strings.Index(rest, "<@")
		if i < 0 {
			elems = append(elems, map[string]any{"type": "text", "text": unescape(rest)})
			break
		}
		j := strings.Index(rest[i:], ">")
		if j < 0 {
			elems = append(elems, map[string]any{"type": "text", "text": unescape(rest)})
			break
		}
		if i > 0 {
			elems = append(elems, map[string]any{"type": "text", "text": unescape(rest[:i])})
		}
		elems = append(elems, map[string]any{"type": "user", "user_id": rest[i+2 : i+j]})
		rest = rest[i+j+1:]
	}
	b, _ := json.Marshal([]any{map[string]any{
		"type": "rich_text", "block_id": "emu",
		"elements": []any{map[string]any{"type": "rich_text_section", "elements": elems}},
	}})
	return b
}

// messageJSON renders a message as the Web API and events show it.
func (s *Server) messageJSONLocked(m *Message) map[string]any {
	text := m.Text
	if text == "" {
		text = m.MarkdownText
	}
	out := map[string]any{"type": "message", "ts": m.TS, "text": text, "team": m.Team}
	if m.User != "" {
		out["user"] = m.User
	}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
		if p := s.msgs[msgKey(m.Channel, m.ThreadTS)]; p != nil && m.TS != m.ThreadTS {
			out["parent_user_id"] = p.User
		}
	}
	if m.BotID != "" && m.botName != "" {
		// Another app's bot.
		out["bot_id"] = m.BotID
		out["app_id"] = "A0" + m.BotID
		out["bot_profile"] = map[string]any{"id": m.BotID, "app_id": "A0" + m.BotID, "name": m.botName, "team_id": m.Team, "deleted": false}
		if m.Subtype == "bot_message" {
			out["username"] = m.botName
		}
	} else if m.BotID != "" {
		out["bot_id"] = m.BotID
		out["app_id"] = s.opts.AppID
		if t := s.teams[m.Team]; t != nil {
			out["bot_profile"] = map[string]any{"id": m.BotID, "app_id": s.opts.AppID, "name": t.BotName, "team_id": t.ID, "deleted": false}
		}
	}
	if m.Subtype != "" {
		out["subtype"] = m.Subtype
	}
	if len(m.Files) > 0 {
		var fs []any
		for _, id := range m.Files {
			if f := s.files[id]; f != nil {
				fs = append(fs, s.fileJSONLocked(f))
			}
		}
		out["files"], out["upload"], out["display_as_bot"] = fs, false, false
	}
	if len(m.Blocks) > 0 {
		out["blocks"] = m.Blocks
	}
	if len(m.Metadata) > 0 {
		out["metadata"] = m.Metadata
	}
	if len(m.Reactions) > 0 {
		var rs []any
		for _, name := range slices.Sorted(maps.Keys(m.Reactions)) {
			users := m.Reactions[name]
			rs = append(rs, map[string]any{"name": name, "users": users, "count": len(users)})
		}
		out["reactions"] = rs
	}
	if m.Edited {
		out["edited"] = map[string]any{"user": m.User, "ts": m.History[len(m.History)-1].tsString()}
	}
	if m.ThreadTS == "" || m.ThreadTS == m.TS {
		n, latest := 0, ""
		var users []string
		for _, r := range s.order[m.Channel] {
			if r.ThreadTS == m.TS && r.TS != m.TS && !r.Deleted {
				n++
				latest = r.TS
				if !slices.Contains(users, r.User) {
					users = append(users, r.User)
				}
			}
		}
		if n > 0 {
			out["reply_count"] = n
			out["thread_ts"] = m.TS
			out["reply_users"], out["reply_users_count"], out["latest_reply"] = users, len(users), latest
		}
	}
	return out
}

func (v Version) tsString() string {
	us := v.Time.UnixMicro()
	return fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
}
