package slackemu

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Slack's 2026 agent platform (reference: slack-agents-2026.md §1–§4):
// agent sessions (agents.sessions.setStatus / rename, the bridge from
// assistant.threads.setStatus / setTitle, sessions made by streams), the
// events of the Messages tab (app_home_opened tab "messages",
// app_context_changed), Slack's own Stop (agent_session_stopped) and
// retitles (agent_session_title_changed), and task cards built from
// task_update chunks.
//
// Unconfirmed details, chosen so a careful client works either way:
// stopStream on a stream a person stopped answers
// message_not_in_streaming_state; the 256-character limit of
// task_update / plan_update applies to the chunk's text fields together
// (title + details + output); a task's details replace (not
// concatenate); rename sends no title-changed event to the app that
// renamed.

// Session statuses (agents.sessions.setStatus, chat.stopStream
// session_status).
const (
	SessionActive     = "active"
	SessionProcessing = "processing"
	SessionSuspended  = "suspended"
	SessionClosed     = "closed"
)

func validSessionStatus(s string) bool {
	switch s {
	case SessionActive, SessionProcessing, SessionSuspended, SessionClosed:
		return true
	}
	return false
}

// AgentSession is a thread's agent session (a copy).
type AgentSession struct {
	Team, Channel, ThreadTS string
	Title                   string
	Initiator               string
	// Status is the current status; Statuses every change, in order
	// (capped by Options.VersionLimit like message history).
	Status   string
	Statuses []SessionChange
	// Titles are the titles the session had, in order ("" not kept).
	Titles                       []string
	IconEmoji, IconURL, Username string
	Created                      time.Time

	processingSince time.Time
}

// SessionChange is one status change of an agent session.
type SessionChange struct {
	Time   time.Time
	Status string
	// Via is the call or event that made it: "agents.sessions.setStatus",
	// "assistant.threads.setStatus", "chat.startStream", "chat.stopStream",
	// "stream_expired", "processing_timeout".
	Via string
}

// agentState is the agent-platform state of a Server.
type agentState struct {
	sessions map[string]*AgentSession // by channel/thread_ts
	order    []string                 // session keys, oldest first
	refused  map[string]string        // team → error code for agents.sessions.*
}

func (s *Server) agentLocked() *agentState {
	if s.agent == nil {
		s.agent = &agentState{sessions: map[string]*AgentSession{}, refused: map[string]string{}}
	}
	return s.agent
}

// processingTimeout is how long a session stays "processing" without a
// new setStatus before Slack moves it to "active" (1 h × TimeScale).
func (s *Server) processingTimeout() time.Duration {
	if s.opts.ProcessingTimeout > 0 {
		return s.opts.ProcessingTimeout
	}
	return time.Duration(float64(time.Hour) * s.opts.TimeScale)
}

// settleLocked applies the processing timeout.
func (s *Server) settleLocked(a *AgentSession) {
	if a.Status == SessionProcessing && time.Since(a.processingSince) > s.processingTimeout() {
		s.setSessionStatusLocked(a, SessionActive, "processing_timeout")
	}
}

func (s *Server) setSessionStatusLocked(a *AgentSession, status, via string) {
	a.Status = status
	if status == SessionProcessing {
		a.processingSince = time.Now()
	}
	a.Statuses = appendCapped(a.Statuses, SessionChange{Time: time.Now(), Status: status, Via: via}, s.opts.VersionLimit)
	s.changedLocked()
}

// sessionLocked returns the session of a thread, creating it when create
// is set (title and initiator apply only then).
func (s *Server) sessionLocked(team, channel, threadTS string, create bool, title, initiator string) *AgentSession {
	ag := s.agentLocked()
	key := msgKey(channel, threadTS)
	if a := ag.sessions[key]; a != nil {
		s.settleLocked(a)
		return a
	}
	if !create {
		return nil
	}
	if initiator == "" {
		if root := s.msgs[key]; root != nil {
			initiator = root.User
		}
	}
	a := &AgentSession{Team: team, Channel: channel, ThreadTS: threadTS, Title: title, Initiator: initiator, Created: time.Now()}
	if title != "" {
		a.Titles = []string{title}
	}
	ag.sessions[key] = a
	ag.order = append(ag.order, key)
	if limit := s.opts.JournalLimit; limit > 0 && len(ag.order) > limit {
		n := len(ag.order) - limit
		for _, k := range ag.order[:n] {
			delete(ag.sessions, k)
		}
		clear(ag.order[:n])
		ag.order = ag.order[n:]
	}
	return a
}

func (s *Server) retitleLocked(a *AgentSession, title string) {
	a.Title = title
	a.Titles = appendCapped(a.Titles, title, s.opts.VersionLimit)
	s.changedLocked()
}

func copySession(a *AgentSession) AgentSession {
	c := *a
	c.Statuses = slices.Clone(a.Statuses)
	c.Titles = slices.Clone(a.Titles)
	return c
}

// AgentSession returns the agent session of a thread.
func (s *Server) AgentSession(channel, threadTS string) (AgentSession, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.sessionLocked("", channel, threadTS, false, "", "")
	if a == nil {
		return AgentSession{}, false
	}
	return copySession(a), true
}

// SessionStatuses returns the statuses a thread's session went through,
// in order (nil without a session).
func (s *Server) SessionStatuses(channel, threadTS string) []string {
	a, ok := s.AgentSession(channel, threadTS)
	if !ok {
		return nil
	}
	out := make([]string, len(a.Statuses))
	for i, c := range a.Statuses {
		out[i] = c.Status
	}
	return out
}

// SetAgentSessionsRefused makes agents.sessions.* answer code for team's
// tokens (e.g. "not_allowed", "unknown_method", "feature_disabled",
// "missing_scope"); "" serves them again.
func (s *Server) SetAgentSessionsRefused(team, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == "" {
		delete(s.agentLocked().refused, team)
		return
	}
	s.agentLocked().refused[team] = code
}

func (s *Server) agentRefusalLocked(r *request) error {
	if code := s.agentLocked().refused[r.team.ID]; code != "" {
		if code == "missing_scope" {
			return &scopeError{needed: "chat:write", provided: r.tok.scopes}
		}
		return apiError(code)
	}
	return nil
}

// sessionTargetLocked checks channel_id and thread_ts of an
// agents.sessions.* call.
func (s *Server) sessionTargetLocked(r *request) (*channelState, string, error) {
	id := r.str("channel_id")
	if id == "" {
		return nil, "", apiError("channel_not_found")
	}
	c := s.channels[id]
	if !seesChannel(c, r.team.ID) {
		return nil, "", apiError("channel_not_found")
	}
	if !c.IsIM() && !c.BotMember {
		return nil, "", apiError("not_authorized")
	}
	ts := r.str("thread_ts")
	if ts == "" {
		return nil, "", apiError("thread_ts_required")
	}
	if !tsRE.MatchString(ts) {
		return nil, "", apiError("invalid_arguments")
	}
	return c, ts, nil
}

func (s *Server) agentsSessionsSetStatus(r *request) (map[string]any, error) {
	if err := s.agentRefusalLocked(r); err != nil {
		return nil, err
	}
	c, ts, err := s.sessionTargetLocked(r)
	if err != nil {
		return nil, err
	}
	status := r.str("status")
	if !validSessionStatus(status) {
		return nil, apiError("invalid_status")
	}
	title := r.str("title")
	if runes(title) > 200 {
		return nil, apiError("invalid_arguments")
	}
	initiator := r.str("initiator_user_id")
	if initiator != "" {
		if u := s.users[initiator]; u == nil || !s.seesUserLocked(r.team.ID, u) {
			return nil, apiError("user_not_found")
		}
	}
	if runes(r.str("username")) > 200 {
		return nil, apiError("invalid_arguments")
	}
	a := s.sessionLocked(r.team.ID, c.ID, ts, true, title, initiator)
	if r.has("icon_emoji") || r.has("icon_url") || r.has("username") {
		a.IconEmoji, a.IconURL, a.Username = r.str("icon_emoji"), r.str("icon_url"), r.str("username")
	}
	s.setSessionStatusLocked(a, status, r.method)
	out := map[string]any{"status": a.Status, "agent_status": a.Status, "title": a.Title}
	if s.opts.NoAgentStopSubscription {
		const w = "missing_agent_session_stopped_event_subscription"
		out["warning"] = w
		out["response_metadata"] = map[string]any{"warnings": []string{w}}
	}
	return out, nil
}

func (s *Server) agentsSessionsRename(r *request) (map[string]any, error) {
	if err := s.agentRefusalLocked(r); err != nil {
		return nil, err
	}
	c, ts, err := s.sessionTargetLocked(r)
	if err != nil {
		return nil, err
	}
	title := r.str("title")
	if n := runes(title); n < 1 || n > 200 {
		return nil, apiError("invalid_name")
	}
	a := s.sessionLocked(r.team.ID, c.ID, ts, false, "", "")
	if a == nil {
		return nil, apiError("session_not_found")
	}
	s.retitleLocked(a, title)
	return map[string]any{"title": title}, nil
}

// bridgeAssistantLocked applies assistant.threads.setStatus / setTitle to
// the thread's session, as Slack bridges them: a non-empty status means
// processing, an empty one active; a title renames.
func (s *Server) bridgeAssistantLocked(st AssistantStatus) {
	if st.Channel == "" || st.ThreadTS == "" {
		return
	}
	switch st.Method {
	case "setStatus":
		a := s.sessionLocked(st.Team, st.Channel, st.ThreadTS, true, "", "")
		status := SessionActive
		if st.Status != "" {
			status = SessionProcessing
		}
		s.setSessionStatusLocked(a, status, "assistant.threads.setStatus")
	case "setTitle":
		if st.Title != "" {
			a := s.sessionLocked(st.Team, st.Channel, st.ThreadTS, true, st.Title, "")
			if a.Title != st.Title {
				s.retitleLocked(a, st.Title)
			}
		}
	}
}

// ContextEntity is one entry of an event's context.entities: what the
// person is viewing.
type ContextEntity struct {
	// Type is "slack#/types/channel_id", "slack#/types/canvas_id",
	// "slack#/types/list_id" or "slack#/types/message_context".
	Type string
	// Value is an id, or for message_context a
	// map{"channel_id":…, "message_ts":…}.
	Value        any
	TeamID       string
	EnterpriseID string
}

// ChannelContext is the entity of a channel being viewed.
func ChannelContext(team, channel string) ContextEntity {
	return ContextEntity{Type: "slack#/types/channel_id", Value: channel, TeamID: team}
}

func contextJSON(entities []ContextEntity) map[string]any {
	if len(entities) == 0 {
		return map[string]any{}
	}
	var out []any
	for _, e := range entities {
		m := map[string]any{"type": e.Type, "value": e.Value}
		if e.TeamID != "" {
			m["team_id"] = e.TeamID
		}
		if e.EnterpriseID != "" {
			m["enterprise_id"] = e.EnterpriseID
		}
		out = append(out, m)
	}
	return map[string]any{"entities": out}
}

// OpenMessagesTab delivers app_home_opened with tab "messages", as when
// user opens the app's Messages tab under agent view (it replaces
// assistant_thread_started; the thread's root is then the person's own
// message: Message(team, p.Channel, user, text, "")). Posted.TS is
// empty; the DM is in the event's channel (DMWith). entities, when
// given, fill the event's context (the viewed channel).
func (s *Server) OpenMessagesTab(team, user string, entities ...ContextEntity) Posted {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.teams[team] == nil {
		panic(fmt.Sprintf("slackemu: OpenMessagesTab: unknown team %q", team))
	}
	ev := map[string]any{"type": "app_home_opened", "user": user, "channel": s.dmWithLocked(team, user), "tab": "messages", "event_ts": s.newTSLocked()}
	if len(entities) > 0 {
		ev["context"] = contextJSON(entities)
	}
	var p Posted
	p.Envelope, p.EventID = s.deliverEventLocked(team, ev)
	return p
}

// DMWith returns the bot's DM channel with user in team (made if none).
func (s *Server) DMWith(team, user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dmWithLocked(team, user)
}

// ChangeAppContext delivers app_context_changed: user, with the app open,
// now views what entities name (none: "context":{}).
func (s *Server) ChangeAppContext(team, user string, entities ...ContextEntity) Posted {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := map[string]any{"type": "app_context_changed", "user": user, "channel": s.dmWithLocked(team, user), "event_ts": s.newTSLocked(), "context": contextJSON(entities)}
	var p Posted
	p.Envelope, p.EventID = s.deliverEventLocked(team, ev)
	return p
}

// StoppedSession is what StopAgentSession did.
type StoppedSession struct {
	Posted
	// Streams are the ts of the app's streams Slack stopped (the event's
	// streaming_message_ts).
	Streams []string
}

// StopAgentSession is a person pressing Slack's Stop on a thread's agent
// session: the app's live streams in the thread end (appends then answer
// stopped_by_user) and agent_session_stopped is delivered with their ts.
// As in Slack, the session's status does not change.
func (s *Server) StopAgentSession(team, channel, threadTS, user string) StoppedSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, botID, _ := s.botIdentityLocked(team)
	streams := []string{}
	for _, m := range s.order[channel] {
		if m.ThreadTS == threadTS && m.Streaming && m.BotID == botID && !m.Deleted {
			s.expireStreamLocked(m)
			if m.Streaming {
				m.Streaming = false
				m.StreamEnded = "stopped_by_user"
				streams = append(streams, m.TS)
			}
		}
	}
	s.changedLocked()
	ev := map[string]any{"type": "agent_session_stopped", "channel": channel, "thread_ts": threadTS, "user": user, "streaming_message_ts": streams, "event_ts": s.newTSLocked()}
	out := StoppedSession{Streams: streams}
	out.Envelope, out.EventID = s.deliverEventLocked(team, ev)
	return out
}

// RetitleAgentSession is a person renaming a thread's session in Slack:
// the title changes and agent_session_title_changed is delivered
// (previous_title only when there was one). It makes the session if
// there is none.
func (s *Server) RetitleAgentSession(team, channel, threadTS, user, title string) Posted {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.sessionLocked(team, channel, threadTS, true, "", "")
	prev := a.Title
	s.retitleLocked(a, title)
	ev := map[string]any{"type": "agent_session_title_changed", "channel": channel, "thread_ts": threadTS, "user": user, "title": title, "team_id": team, "event_ts": s.newTSLocked()}
	if prev != "" {
		ev["previous_title"] = prev
	}
	if t := s.teams[team]; t != nil && t.EnterpriseID != "" {
		ev["enterprise_id"] = t.EnterpriseID
	}
	var p Posted
	p.Envelope, p.EventID = s.deliverEventLocked(team, ev)
	return p
}

// TaskCard is the state of one task card of a stream, folded from its
// task_update chunks.
type TaskCard struct {
	ID      string
	Title   string
	Status  string // pending, in_progress, complete, error ("" if never sent)
	Details string
	Output  string
	Sources []TaskSource
	// Statuses are the statuses the card was sent with, in order.
	Statuses []string
}

// TaskSource is a task card's source link.
type TaskSource struct {
	Type string `json:"type"`
	Text string `json:"text"`
	URL  string `json:"url"`
}

type taskChunk struct {
	ID      string       `json:"id"`
	Title   string       `json:"title"`
	Status  string       `json:"status"`
	Details string       `json:"details"`
	Output  string       `json:"output"`
	Sources []TaskSource `json:"sources"`
}

// maxTaskChunkText is Slack's 256-character limit of task_update and
// plan_update chunks (applied to their text fields together).
const maxTaskChunkText = 256

// maxTaskCards bounds the task cards kept per message.
const maxTaskCards = 200

func checkTaskChunk(raw json.RawMessage) (taskChunk, error) {
	var t taskChunk
	if json.Unmarshal(raw, &t) != nil || t.ID == "" || t.Title == "" {
		return t, apiError("invalid_chunks")
	}
	switch t.Status {
	case "", "pending", "in_progress", "complete", "error":
	default:
		return t, apiError("invalid_chunks")
	}
	if runes(t.Title)+runes(t.Details)+runes(t.Output) > maxTaskChunkText {
		return t, apiError("invalid_chunks")
	}
	for _, src := range t.Sources {
		if src.Type != "url" || src.URL == "" {
			return t, apiError("invalid_chunks")
		}
	}
	return t, nil
}

// foldChunks applies task_update and plan_update chunks to a
// message's task cards and plan title.
func foldChunks(m *Message, chunks []json.RawMessage) {
	for _, raw := range chunks {
		var c struct {
			Type  string `json:"type"`
			Title string `json:"title"`
		}
		_ = json.Unmarshal(raw, &c)
		switch c.Type {
		case "plan_update":
			m.PlanTitle = c.Title
		case "task_update":
			t, err := checkTaskChunk(raw)
			if err != nil {
				continue
			}
			i := slices.IndexFunc(m.tasks, func(tc TaskCard) bool { return tc.ID == t.ID })
			if i < 0 {
				if len(m.tasks) >= maxTaskCards {
					continue
				}
				m.tasks = append(m.tasks, TaskCard{ID: t.ID})
				i = len(m.tasks) - 1
			}
			tc := &m.tasks[i]
			tc.Title = t.Title
			if t.Status != "" {
				tc.Status = t.Status
				if len(tc.Statuses) < 20 {
					tc.Statuses = append(tc.Statuses, t.Status)
				}
			}
			if t.Details != "" {
				tc.Details = t.Details
			}
			if t.Output != "" {
				tc.Output = t.Output
			}
			if t.Sources != nil {
				tc.Sources = t.Sources
			}
		}
	}
}

// TaskCards returns the task cards of a streamed message, in the order
// their ids first appeared.
func (s *Server) TaskCards(channel, ts string) []TaskCard {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgs[msgKey(channel, ts)]
	if m == nil {
		return nil
	}
	out := make([]TaskCard, len(m.tasks))
	for i, t := range m.tasks {
		t.Statuses = slices.Clone(t.Statuses)
		t.Sources = slices.Clone(t.Sources)
		out[i] = t
	}
	return out
}

// ClickFeedback presses the 👍 (positive) or 👎 button of the
// feedback_buttons element with actionID ("" = the first one) in a
// context_actions block of the message, as user, and delivers
// block_actions with the action Slack sends: type feedback_buttons, the
// pressed button's value and text. Each press sends the same payload
// (Slack gives no toggle state).
func (s *Server) ClickFeedback(team, user, channel, messageTS, actionID string, positive bool) (*Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgs[msgKey(channel, messageTS)]
	if m == nil || m.Deleted {
		return nil, fmt.Errorf("slackemu: ClickFeedback: no message %s/%s", channel, messageTS)
	}
	bs, _ := parseBlocks(m.Blocks, "invalid_blocks")
	for _, b := range bs {
		if b.Type != "context_actions" {
			continue
		}
		for _, raw := range b.Elements {
			var fb feedbackElement
			if json.Unmarshal(raw, &fb) != nil || fb.Type != "feedback_buttons" || (actionID != "" && fb.ActionID != actionID) {
				continue
			}
			btn := fb.Negative
			if positive {
				btn = fb.Positive
			}
			if btn == nil {
				continue
			}
			action := map[string]any{
				"type": "feedback_buttons", "action_id": fb.ActionID, "block_id": b.BlockID,
				"value": btn.Value, "text": btn.Text, "action_ts": s.newTSLocked(),
			}
			return s.clickLocked(team, user, channel, messageTS, m.ThreadTS, false, s.messageJSONLocked(m), action), nil
		}
	}
	return nil, fmt.Errorf("slackemu: ClickFeedback: no feedback_buttons %q in %s/%s", actionID, channel, messageTS)
}

type feedbackButton struct {
	Text               textObject `json:"text"`
	Value              string     `json:"value"`
	AccessibilityLabel string     `json:"accessibility_label"`
}

type feedbackElement struct {
	Type     string          `json:"type"`
	ActionID string          `json:"action_id"`
	Positive *feedbackButton `json:"positive_button"`
	Negative *feedbackButton `json:"negative_button"`
	// icon_button
	Icon  string      `json:"icon"`
	Text  *textObject `json:"text"`
	Value string      `json:"value"`
}

// checkContextActions validates a context_actions block: 1–5 elements,
// feedback_buttons (both buttons, plain_text ≤ 75, value 1–2000) or
// icon_button (icon "trash", text, value ≤ 2000), action_id ≤ 255.
func checkContextActions(b block) error {
	if len(b.Elements) == 0 || len(b.Elements) > 5 {
		return apiError("invalid_blocks")
	}
	btnOK := func(f *feedbackButton) bool {
		return f != nil && f.Text.Type == "plain_text" && runes(f.Text.Text) >= 1 && runes(f.Text.Text) <= 75 &&
			len(f.Value) >= 1 && len(f.Value) <= 2000 && runes(f.AccessibilityLabel) <= 75
	}
	for _, raw := range b.Elements {
		var e feedbackElement
		if json.Unmarshal(raw, &e) != nil || len(e.ActionID) > 255 {
			return apiError("invalid_blocks")
		}
		switch e.Type {
		case "feedback_buttons":
			if !btnOK(e.Positive) || !btnOK(e.Negative) {
				return apiError("invalid_blocks")
			}
		case "icon_button":
			if e.Icon != "trash" || e.Text == nil || e.Text.Text == "" || len(e.Value) > 2000 {
				return apiError("invalid_blocks")
			}
		default:
			return apiError("invalid_blocks")
		}
	}
	return nil
}

// checkTable validates a table block: 1–100 rows of 1–20 cells
// (raw_text, rich_text, raw_number), at most 10 000 characters of cell
// text, at most 20 column settings (null, or an alignment of left, center
// or right).
func checkTable(b block, chars *int) error {
	if len(b.Rows) == 0 || len(b.Rows) > 100 || len(b.ColumnSettings) > 20 {
		return apiError("invalid_blocks")
	}
	for _, c := range b.ColumnSettings {
		if c == nil {
			continue
		}
		switch c.Align {
		case "", "left", "center", "right":
		default:
			return apiError("invalid_blocks")
		}
	}
	for _, row := range b.Rows {
		if len(row) == 0 || len(row) > 20 {
			return apiError("invalid_blocks")
		}
		for _, raw := range row {
			var c struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(raw, &c) != nil {
				return apiError("invalid_blocks")
			}
			switch c.Type {
			case "raw_text", "raw_number":
				*chars += runes(c.Text)
			case "rich_text":
				*chars += runes(string(raw))
			default:
				return apiError("invalid_blocks")
			}
		}
	}
	if *chars > 10000 {
		return apiError("invalid_blocks")
	}
	return nil
}

// validateError is blocks.validate's invalid_blocks answer with the
// errors Slack lists (a message and a JSON pointer each).
type validateError struct{ errs []any }

func (e *validateError) Error() string { return "invalid_blocks" }
func (e *validateError) fields() map[string]any {
	return map[string]any{"errors": e.errs}
}

// blocksValidate is blocks.validate: one of blocks (a message's blocks),
// message (an object with blocks) or view (a view with up to 100
// blocks), at most 100 000 characters; invalid_blocks lists the first
// bad block with its JSON pointer.
func (s *Server) blocksValidate(r *request) (map[string]any, error) {
	var raw json.RawMessage
	pointer, limit := "/blocks", maxBlocks
	for _, k := range []string{"blocks", "message", "view"} {
		v, err := r.raw(k)
		if err != nil {
			return nil, apiError("invalid_json")
		}
		if v == nil {
			continue
		}
		if len(v) > 100000 {
			return nil, apiError("invalid_arguments")
		}
		raw = v
		if k != "blocks" {
			var obj struct {
				Blocks json.RawMessage `json:"blocks"`
			}
			if json.Unmarshal(v, &obj) != nil {
				return nil, apiError("invalid_json")
			}
			raw = obj.Blocks
			if k == "view" {
				limit = maxViewBlocks
			}
		}
		break
	}
	if raw == nil {
		return nil, apiError("invalid_arguments")
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, &validateError{errs: []any{map[string]any{"message": "must be an array", "pointer": pointer}}}
	}
	if len(items) > limit {
		return nil, &validateError{errs: []any{map[string]any{"message": fmt.Sprintf("must contain at most %d items", limit), "pointer": pointer}}}
	}
	if _, err := parseBlocksMax(raw, "invalid_blocks", limit); err == nil {
		return map[string]any{}, nil
	}
	for i := range items {
		if _, err := parseBlocksMax(json.RawMessage("["+string(items[i])+"]"), "invalid_blocks", limit); err != nil {
			return nil, &validateError{errs: []any{map[string]any{"message": "invalid block", "pointer": fmt.Sprintf("%s/%d", pointer, i)}}}
		}
	}
	// Only the blocks together are too large (markdown, table text).
	return nil, &validateError{errs: []any{map[string]any{"message": "too much text", "pointer": pointer}}}
}
