package slackemu

import (
	"encoding/json"
	"time"
)

type chunk struct {
	Type   string          `json:"type"`
	Text   string          `json:"text"`
	Blocks json.RawMessage `json:"blocks"`
}

// readChunks decodes the chunks argument: the markdown text it carries and
// the other chunks (task_update, plan_update, blocks).
func readChunks(r *request) (text string, others []json.RawMessage, present bool, err error) {
	raw, err := r.raw("chunks")
	if err != nil {
		return "", nil, false, apiError("invalid_chunks")
	}
	if raw == nil {
		return "", nil, false, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return "", nil, false, apiError("invalid_chunks")
	}
	for _, it := range items {
		var c chunk
		if json.Unmarshal(it, &c) != nil {
			return "", nil, false, apiError("invalid_chunks")
		}
		switch c.Type {
		case "markdown_text":
			text += c.Text
		case "task_update":
			if _, err := checkTaskChunk(it); err != nil {
				return "", nil, false, err
			}
			others = append(others, it)
		case "plan_update":
			if c.Text != "" || runes(planTitle(it)) == 0 || runes(planTitle(it)) > maxTaskChunkText {
				return "", nil, false, apiError("invalid_chunks")
			}
			others = append(others, it)
		case "blocks":
			if _, err := parseBlocks(c.Blocks, "invalid_blocks"); err != nil {
				return "", nil, false, apiError("invalid_chunks")
			}
			others = append(others, it)
		default:
			return "", nil, false, apiError("invalid_chunks")
		}
	}
	return text, others, true, nil
}

func planTitle(raw json.RawMessage) string {
	var p struct {
		Title string `json:"title"`
	}
	_ = json.Unmarshal(raw, &p)
	return p.Title
}

// expireStreamLocked ends a stream past its lifetime.
func (s *Server) expireStreamLocked(m *Message) {
	if m.Streaming && time.Since(m.streamStart) >= s.opts.StreamLifetime {
		s.endExpiredLocked(m)
	}
}

// endExpiredLocked times a stream out: its session becomes active, as
// Slack does for a timed-out stream.
func (s *Server) endExpiredLocked(m *Message) {
	m.Streaming = false
	m.StreamEnded = "expired"
	if m.ThreadTS != "" {
		if a := s.sessionLocked(m.Team, m.Channel, m.ThreadTS, false, "", ""); a != nil {
			s.setSessionStatusLocked(a, SessionActive, "stream_expired")
		}
	}
	s.changedLocked()
}

// ExpireStream ends a stream now, as if its lifetime had passed.
func (s *Server) ExpireStream(channel, ts string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.msgs[msgKey(channel, ts)]; m != nil && m.Streaming {
		s.endExpiredLocked(m)
	}
}

func (s *Server) chatStartStream(r *request) (map[string]any, error) {
	ch, err := s.channelForPostLocked(r, "channel")
	if err != nil {
		return nil, err
	}
	if !ch.IsIM() {
		if r.str("recipient_team_id") == "" {
			return nil, apiError("missing_recipient_team_id")
		}
		if r.str("recipient_user_id") == "" {
			return nil, apiError("missing_recipient_user_id")
		}
	}
	md := r.str("markdown_text")
	if runes(md) > maxMarkdownText {
		return nil, apiError("msg_too_long")
	}
	ctext, others, _, err := readChunks(r)
	if err != nil {
		return nil, err
	}
	mode := r.str("task_display_mode")
	if mode != "" && mode != "timeline" && mode != "plan" {
		return nil, apiError("invalid_arguments")
	}
	m := &Message{
		Team: r.team.ID, Channel: ch.ID, TS: s.newTSLocked(), ThreadTS: r.str("thread_ts"), TaskDisplayMode: mode,
		User: r.botUser(), BotID: r.botID(), MarkdownText: md + ctext, Chunks: others,
		Streaming: true, streamStart: time.Now(), Via: "chat.startStream",
		RecipientTeam: r.str("recipient_team_id"), RecipientUser: r.str("recipient_user_id"),
		UnfurlLinks: r.boolArg("unfurl_links"), UnfurlMedia: r.boolArg("unfurl_media"),
	}
	foldChunks(m, others)
	s.recordVersionLocked(m, r.method)
	s.putMessageLocked(m)
	if m.ThreadTS != "" {
		// A stream makes the thread's session (initiator: the root's
		// author) and sets it processing.
		a := s.sessionLocked(m.Team, ch.ID, m.ThreadTS, true, "", "")
		s.setSessionStatusLocked(a, SessionProcessing, r.method)
	}
	s.afterLocked(s.opts.StreamLifetime, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if m.Streaming {
			s.endExpiredLocked(m)
		}
	})
	return map[string]any{"channel": ch.ID, "ts": m.TS}, nil
}

// streamLocked finds a live stream owned by this app.
func (s *Server) streamLocked(r *request) (*Message, error) {
	m, err := s.ownMessageLocked(r, "message_not_owned_by_app")
	if err != nil {
		return nil, err
	}
	s.expireStreamLocked(m)
	if !m.Streaming {
		if m.StreamEnded == "stopped_by_user" && r.method == "chat.appendStream" {
			return nil, apiError("stopped_by_user")
		}
		return nil, apiError("message_not_in_streaming_state")
	}
	return m, nil
}

func (s *Server) chatAppendStream(r *request) (map[string]any, error) {
	m, err := s.streamLocked(r)
	if err != nil {
		return nil, err
	}
	md := r.str("markdown_text")
	ctext, others, hasChunks, err := readChunks(r)
	if err != nil {
		return nil, err
	}
	if md == "" && !hasChunks {
		return nil, apiError("invalid_arguments")
	}
	if runes(md) > maxMarkdownText {
		return nil, apiError("msg_too_long")
	}
	m.MarkdownText += md + ctext
	m.Chunks = append(m.Chunks, others...)
	foldChunks(m, others)
	s.recordVersionLocked(m, r.method)
	return map[string]any{"channel": m.Channel, "ts": m.TS}, nil
}

func (s *Server) chatStopStream(r *request) (map[string]any, error) {
	m, err := s.streamLocked(r)
	if err != nil {
		return nil, err
	}
	md := r.str("markdown_text")
	if runes(md) > maxMarkdownText {
		return nil, apiError("msg_too_long")
	}
	ctext, others, _, err := readChunks(r)
	if err != nil {
		return nil, err
	}
	blocks, err := r.raw("blocks")
	if err != nil {
		return nil, apiError("invalid_blocks_format")
	}
	if _, err := parseBlocks(blocks, "msg_blocks_too_many"); err != nil {
		return nil, err
	}
	meta, err := r.raw("metadata")
	if err != nil {
		return nil, apiError("invalid_metadata_format")
	}
	status := r.str("session_status")
	if status == "" {
		status = SessionActive
	}
	if !validSessionStatus(status) {
		return nil, apiError("invalid_arguments")
	}
	m.MarkdownText += md + ctext
	m.Chunks = append(m.Chunks, others...)
	foldChunks(m, others)
	if m.ThreadTS != "" {
		a := s.sessionLocked(m.Team, m.Channel, m.ThreadTS, true, "", "")
		s.setSessionStatusLocked(a, status, r.method)
	}
	if blocks != nil {
		m.Blocks = blocks
	}
	if meta != nil {
		m.Metadata = meta
	}
	m.Streaming = false
	m.StreamEnded = "stopped"
	s.recordVersionLocked(m, r.method)
	return map[string]any{"channel": m.Channel, "ts": m.TS, "message": s.messageJSONLocked(m)}, nil
}
