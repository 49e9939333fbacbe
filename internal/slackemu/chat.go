package slackemu

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Slack's size limits.
const (
	maxPostText     = 40000 // chat.postMessage truncates beyond this
	maxUpdateText   = 4000  // chat.update answers msg_too_long beyond this
	maxMarkdownText = 12000 // markdown_text and markdown blocks
	maxBlocks       = 50
	maxSectionText  = 3000
	maxHeaderText   = 150
	// MaxAckBytes is the size from which an ack is dropped (unless
	// Options.KeepLargeAcks).
	MaxAckBytes = 20 * 1024
)

func runes(s string) int { return utf8.RuneCountInString(s) }

func truncateRunes(s string, n int) string {
	if runes(s) <= n {
		return s
	}
	i := 0
	for k := range s {
		if i == n {
			return s[:k]
		}
		i++
	}
	return s
}

// block is the part of a Block Kit block the emulator inspects.
type block struct {
	Type      string              `json:"type"`
	BlockID   string              `json:"block_id"`
	Text      json.RawMessage     `json:"text"`
	Elements  []json.RawMessage   `json:"elements"`
	Accessory json.RawMessage     `json:"accessory"`
	Fields    []textObject        `json:"fields"`
	Element   json.RawMessage     `json:"element"`
	Label     json.RawMessage     `json:"label"`
	Rows      [][]json.RawMessage `json:"rows"`
	// ColumnSettings are a table's: at most 20, each null or
	// {align, is_wrapped}.
	ColumnSettings []*struct {
		Align     string `json:"align"`
		IsWrapped *bool  `json:"is_wrapped"`
	} `json:"column_settings"`
}

type textObject struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// textOf reads a block's text: a text object or (markdown block) a string.
func textOf(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var t textObject
	_ = json.Unmarshal(raw, &t)
	return t.Text
}

// parseBlocks decodes a message's blocks array; tooMany is the error code
// for more than 50 blocks (invalid_blocks on posts, msg_blocks_too_many on
// updates).
func parseBlocks(raw json.RawMessage, tooMany string) ([]block, error) {
	return parseBlocksMax(raw, tooMany, maxBlocks)
}

// parseBlocksMax is parseBlocks with another block limit (views: 100).
func parseBlocksMax(raw json.RawMessage, tooMany string, limit int) ([]block, error) {
	if raw == nil {
		return nil, nil
	}
	var bs []block
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, apiError("invalid_blocks_format")
	}
	if len(bs) > limit {
		return nil, apiError(tooMany)
	}
	markdown, tableChars := 0, 0
	for _, b := range bs {
		t := textOf(b.Text)
		if b.Type == "markdown" {
			markdown += runes(t)
		}
		switch b.Type {
		case "context_actions":
			if err := checkContextActions(b); err != nil {
				return nil, err
			}
		case "table":
			if err := checkTable(b, &tableChars); err != nil {
				return nil, err
			}
		}
		switch {
		case markdown > maxMarkdownText:
			return nil, apiError("invalid_blocks")
		case b.Type == "":
			return nil, apiError("invalid_blocks")
		case b.Type == "section" && runes(t) > maxSectionText:
			return nil, apiError("invalid_blocks")
		case b.Type == "markdown" && runes(t) > maxMarkdownText:
			return nil, apiError("invalid_blocks")
		case b.Type == "header" && runes(t) > maxHeaderText:
			return nil, apiError("invalid_blocks")
		}
		for _, f := range b.Fields {
			if runes(f.Text) > 2000 {
				return nil, apiError("invalid_blocks")
			}
		}
	}
	return bs, nil
}

// blocksText joins the readable text of markdown, section, header and
// rich_text blocks.
func blocksText(raw json.RawMessage) string {
	if raw == nil {
		return ""
	}
	var bs []block
	if json.Unmarshal(raw, &bs) != nil {
		return ""
	}
	var parts []string
	for _, b := range bs {
		switch b.Type {
		case "markdown", "section", "header":
			if t := textOf(b.Text); t != "" {
				parts = append(parts, t)
			}
		case "rich_text":
			var sb strings.Builder
			for _, e := range b.Elements {
				richText(&sb, e)
			}
			if sb.Len() > 0 {
				parts = append(parts, sb.String())
			}
		}
	}
	return strings.Join(parts, "\n")
}

func richText(sb *strings.Builder, raw json.RawMessage) {
	var e struct {
		Type     string            `json:"type"`
		Text     string            `json:"text"`
		UserID   string            `json:"user_id"`
		Elements []json.RawMessage `json:"elements"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return
	}
	switch e.Type {
	case "text":
		sb.WriteString(e.Text)
	case "user":
		sb.WriteString("<@" + e.UserID + ">")
	}
	for _, c := range e.Elements {
		richText(sb, c)
	}
}

// channelForPostLocked resolves and checks a channel for the bot.
func (s *Server) channelForPostLocked(r *request, key string) (*channelState, error) {
	id := r.str(key)
	if id == "" {
		return nil, apiError("channel_not_found")
	}
	c := s.channels[id]
	if c == nil && (strings.HasPrefix(id, "U") || strings.HasPrefix(id, "W")) {
		// A user id as channel posts into the DM with that user.
		for _, dm := range s.channels {
			if dm.IMUser == id && seesChannel(dm, r.team.ID) {
				c = dm
			}
		}
	}
	if !seesChannel(c, r.team.ID) {
		return nil, apiError("channel_not_found")
	}
	if !c.IsIM() && !c.BotMember {
		return nil, apiError("not_in_channel")
	}
	return c, nil
}

// content is the message content of a post or edit.
type content struct {
	text, markdown string
	hasText, hasMD bool
	blocks         json.RawMessage
	hasBlocks      bool
	metadata       json.RawMessage
}

func (s *Server) readContent(r *request, tooMany string) (content, error) {
	var c content
	c.hasText = r.has("text")
	c.text = r.str("text")
	c.hasMD = r.has("markdown_text")
	c.markdown = r.str("markdown_text")
	b, err := r.raw("blocks")
	if err != nil {
		return c, apiError("invalid_blocks_format")
	}
	c.blocks, c.hasBlocks = b, b != nil
	if _, err := parseBlocks(b, tooMany); err != nil {
		return c, err
	}
	if c.hasMD && ((c.hasText && c.text != "") || c.hasBlocks) {
		return c, apiError("markdown_text_conflict")
	}
	if runes(c.markdown) > maxMarkdownText {
		return c, apiError("msg_too_long")
	}
	md, err := r.raw("metadata")
	if err != nil {
		return c, apiError("invalid_metadata_format")
	}
	if md != nil {
		var m struct {
			EventType string `json:"event_type"`
		}
		if json.Unmarshal(md, &m) != nil || m.EventType == "" {
			return c, apiError("invalid_metadata_format")
		}
	}
	c.metadata = md
	return c, nil
}

func (s *Server) chatPostMessage(r *request) (map[string]any, error) {
	ch, err := s.channelForPostLocked(r, "channel")
	if err != nil {
		return nil, err
	}
	c, err := s.readContent(r, "invalid_blocks")
	if err != nil {
		return nil, err
	}
	if c.text == "" && c.markdown == "" && !c.hasBlocks && !r.has("attachments") {
		return nil, apiError("no_text")
	}
	m := &Message{
		Team: r.team.ID, Channel: ch.ID, TS: s.newTSLocked(), ThreadTS: r.str("thread_ts"),
		User: r.botUser(), BotID: r.botID(),
		Text: truncateRunes(c.text, maxPostText), MarkdownText: c.markdown, Blocks: c.blocks, Metadata: c.metadata,
		UnfurlLinks: r.boolArg("unfurl_links"), UnfurlMedia: r.boolArg("unfurl_media"),
		Via: "chat.postMessage",
	}
	s.recordVersionLocked(m, r.method)
	s.putMessageLocked(m)
	s.echoLocked(m, "")
	return map[string]any{"channel": ch.ID, "ts": m.TS, "message": s.messageJSONLocked(m)}, nil
}

// ownMessageLocked finds a live message of this bot.
func (s *Server) ownMessageLocked(r *request, notOwn string) (*Message, error) {
	ch := s.channels[r.str("channel")]
	if !seesChannel(ch, r.team.ID) {
		return nil, apiError("channel_not_found")
	}
	m := s.msgs[msgKey(ch.ID, r.str("ts"))]
	if m == nil || m.Deleted {
		return nil, apiError("message_not_found")
	}
	if m.BotID != r.botID() {
		return nil, apiError(notOwn)
	}
	return m, nil
}

func (s *Server) chatUpdate(r *request) (map[string]any, error) {
	m, err := s.ownMessageLocked(r, "cant_update_message")
	if err != nil {
		return nil, err
	}
	s.expireStreamLocked(m)
	if m.Streaming {
		return nil, apiError("streaming_state_conflict")
	}
	c, err := s.readContent(r, "msg_blocks_too_many")
	if err != nil {
		return nil, err
	}
	if runes(c.text) > maxUpdateText {
		return nil, apiError("msg_too_long")
	}
	if c.text == "" && c.markdown == "" && !c.hasBlocks && !r.has("attachments") {
		return nil, apiError("no_text")
	}
	if c.hasMD {
		m.MarkdownText, m.Text, m.Blocks = c.markdown, "", nil
	} else {
		m.MarkdownText = ""
		m.Text = c.text
		if c.hasBlocks {
			// Slack keeps the previous blocks unless blocks is sent; "[]"
			// removes them.
			m.Blocks = c.blocks
			if string(c.blocks) == "[]" {
				m.Blocks = nil
			}
		}
	}
	if c.metadata != nil {
		m.Metadata = c.metadata
	}
	m.Edited = true
	s.recordVersionLocked(m, r.method)
	s.echoLocked(m, "message_changed")
	return map[string]any{"channel": m.Channel, "ts": m.TS, "text": m.Text, "message": s.messageJSONLocked(m)}, nil
}

func (s *Server) chatDelete(r *request) (map[string]any, error) {
	m, err := s.ownMessageLocked(r, "cant_delete_message")
	if err != nil {
		return nil, err
	}
	m.Deleted = true
	m.Streaming = false
	s.changedLocked()
	s.echoLocked(m, "message_deleted")
	return map[string]any{"channel": m.Channel, "ts": m.TS}, nil
}

func (s *Server) chatPostEphemeral(r *request) (map[string]any, error) {
	ch := s.channels[r.str("channel")]
	if !seesChannel(ch, r.team.ID) {
		return nil, apiError("channel_not_found")
	}
	user := r.str("user")
	if s.users[user] == nil {
		return nil, apiError("user_not_found")
	}
	c, err := s.readContent(r, "invalid_blocks")
	if err != nil {
		return nil, err
	}
	if c.text == "" && c.markdown == "" && !c.hasBlocks && !r.has("attachments") {
		return nil, apiError("no_text")
	}
	e := &Ephemeral{
		Team: r.team.ID, Channel: ch.ID, User: user, TS: s.newTSLocked(), ThreadTS: r.str("thread_ts"),
		Text: truncateRunes(c.text, maxPostText), Markdown: c.markdown, Blocks: c.blocks, Via: r.method,
	}
	s.ephemerals[user] = cappedAppend(s, s.ephemerals[user], e)
	s.changedLocked()
	return map[string]any{"message_ts": e.TS}, nil
}

func (s *Server) chatGetPermalink(r *request) (map[string]any, error) {
	ch := s.channels[r.str("channel")]
	if !seesChannel(ch, r.team.ID) {
		return nil, apiError("channel_not_found")
	}
	ts := r.str("message_ts")
	if s.msgs[msgKey(ch.ID, ts)] == nil {
		return nil, apiError("message_not_found")
	}
	link := fmt.Sprintf("https://%s.slack.com/archives/%s/p%s", r.team.Domain, ch.ID, strings.ReplaceAll(ts, ".", ""))
	return map[string]any{"channel": ch.ID, "permalink": link}, nil
}

func (s *Server) assistantSetStatus(r *request) (map[string]any, error) {
	st := AssistantStatus{Time: time.Now(), Method: "setStatus", Team: r.team.ID, Channel: r.str("channel_id"), ThreadTS: r.str("thread_ts"), Status: r.str("status")}
	if st.Channel == "" || st.ThreadTS == "" {
		return nil, apiError("invalid_arguments")
	}
	if lm := r.str("loading_messages"); lm != "" {
		st.Loading = strings.Split(lm, ",")
		if len(st.Loading) > 10 {
			return nil, apiError("invalid_arguments")
		}
	}
	return s.addStatusLocked(r, st)
}

func (s *Server) assistantSetPrompts(r *request) (map[string]any, error) {
	st := AssistantStatus{Time: time.Now(), Method: "setSuggestedPrompts", Team: r.team.ID, Channel: r.str("channel_id"), ThreadTS: r.str("thread_ts"), Title: r.str("title")}
	p, err := r.raw("prompts")
	if err != nil || p == nil {
		return nil, apiError("invalid_arguments")
	}
	st.Prompts = p
	if s.opts.AgentView {
		var list []json.RawMessage
		if json.Unmarshal(p, &list) != nil || len(list) > 4 {
			return nil, apiError("invalid_arguments")
		}
		// "including it in a call for an agent app will cause the call to
		// silently fail"
		st.Ignored = st.ThreadTS != ""
	}
	return s.addStatusLocked(r, st)
}

func (s *Server) assistantSetTitle(r *request) (map[string]any, error) {
	st := AssistantStatus{Time: time.Now(), Method: "setTitle", Team: r.team.ID, Channel: r.str("channel_id"), ThreadTS: r.str("thread_ts"), Title: r.str("title")}
	return s.addStatusLocked(r, st)
}

func (s *Server) addStatusLocked(r *request, st AssistantStatus) (map[string]any, error) {
	if c := s.channels[st.Channel]; !seesChannel(c, r.team.ID) {
		return nil, apiError("channel_not_found")
	}
	s.statuses = cappedAppend(s, s.statuses, st)
	s.bridgeAssistantLocked(st)
	s.changedLocked()
	return map[string]any{}, nil
}

// reactionTargetLocked finds the message a reactions.* call names.
func (s *Server) reactionTargetLocked(r *request) (*Message, string, error) {
	ch := s.channels[r.str("channel")]
	if !seesChannel(ch, r.team.ID) {
		return nil, "", apiError("channel_not_found")
	}
	m := s.msgs[msgKey(ch.ID, r.str("timestamp"))]
	if m == nil || m.Deleted {
		return nil, "", apiError("message_not_found")
	}
	name := strings.Trim(r.str("name"), ":")
	if name == "" || strings.ContainsAny(name, " \t") {
		return nil, "", apiError("invalid_name")
	}
	return m, name, nil
}

func (s *Server) reactionsAdd(r *request) (map[string]any, error) {
	m, name, err := s.reactionTargetLocked(r)
	if err != nil {
		return nil, err
	}
	if slices.Contains(m.Reactions[name], r.botUser()) {
		return nil, apiError("already_reacted")
	}
	if m.Reactions == nil {
		m.Reactions = map[string][]string{}
	}
	m.Reactions[name] = append(m.Reactions[name], r.botUser())
	s.changedLocked()
	return map[string]any{}, nil
}

func (s *Server) reactionsRemove(r *request) (map[string]any, error) {
	m, name, err := s.reactionTargetLocked(r)
	if err != nil {
		return nil, err
	}
	i := slices.Index(m.Reactions[name], r.botUser())
	if i < 0 {
		return nil, apiError("no_reaction")
	}
	m.Reactions[name] = slices.Delete(m.Reactions[name], i, i+1)
	if len(m.Reactions[name]) == 0 {
		delete(m.Reactions, name)
	}
	s.changedLocked()
	return map[string]any{}, nil
}
