package slackemu

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Interaction is a slash command, button click or view submission sent to
// the app. Wait for its ack with Wait.
type Interaction struct {
	EnvelopeID string
	// Kind: "slash_command", "block_actions", "view_submission",
	// "message_action" or "shortcut".
	Kind        string
	TriggerID   string
	ResponseURL string
	// URL is the link a URL button opened in the person's browser (Slack
	// still sends block_actions, which must be acked).
	URL string
	s   *Server
}

// AckResult is an interaction's ack, decoded.
type AckResult struct {
	Envelope Envelope
	// Slash command replies.
	ResponseType string // "ephemeral" (default when text/blocks) or "in_channel"
	Text         string
	Blocks       json.RawMessage
	// view_submission answers.
	ResponseAction string            // "", "errors", "update", "push", "clear"
	Errors         map[string]string // response_action errors
	View           json.RawMessage   // response_action update/push
}

// Wait blocks until the interaction is acked (its payload decoded) or Slack
// gave up (the person saw an error: an error is returned), or ctx ends.
func (i *Interaction) Wait(ctx context.Context) (AckResult, error) {
	e, err := i.s.WaitAck(ctx, i.EnvelopeID)
	if err != nil {
		return AckResult{Envelope: e}, err
	}
	res := AckResult{Envelope: e}
	if len(e.AckPayload) > 0 {
		var p ackPayload
		_ = json.Unmarshal(e.AckPayload, &p)
		res.ResponseType, res.Text, res.Blocks = p.ResponseType, p.Text, p.Blocks
		res.ResponseAction, res.Errors, res.View = p.ResponseAction, p.Errors, p.View
		if res.ResponseType == "" && (p.Text != "" || len(p.Blocks) > 0) {
			res.ResponseType = "ephemeral"
		}
	}
	return res, nil
}

type ackPayload struct {
	ResponseType   string            `json:"response_type"`
	Text           string            `json:"text"`
	Blocks         json.RawMessage   `json:"blocks"`
	ThreadTS       string            `json:"thread_ts"`
	ResponseAction string            `json:"response_action"`
	Errors         map[string]string `json:"errors"`
	View           json.RawMessage   `json:"view"`
}

// interaction is what the server remembers to apply an ack.
type interaction struct {
	kind    string
	team    string
	channel string
	user    string
	viewID  string
}

// userRefLocked renders {"id","username","name","team_id"}.
func (s *Server) userRefLocked(team, user string) map[string]any {
	u := s.users[user]
	ref := map[string]any{"id": user, "team_id": team}
	if u != nil {
		ref["username"], ref["name"], ref["team_id"] = u.Name, u.Name, u.TeamID
	}
	return ref
}

func (s *Server) teamRefLocked(team string) map[string]any {
	ref := map[string]any{"id": team}
	if t := s.teams[team]; t != nil {
		ref["domain"] = t.Domain
	}
	return ref
}

// SlashCommand invokes command (e.g. "/bobbin") with text as user in
// channel and delivers the slash_commands envelope. The ack payload, when
// it has text or blocks, is shown: ephemeral to the user (Ephemerals) or,
// with response_type in_channel, posted in the channel.
func (s *Server) SlashCommand(team, channel, user, command, text string) *Interaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	trig := s.newTriggerLocked(team, user)
	ru := s.newResponseURLLocked(team, channel, user, "", "", false)
	p := map[string]any{
		"token": "emu-verification-token", "team_id": team, "channel_id": channel, "user_id": user,
		"command": command, "text": text, "api_app_id": s.opts.AppID,
		"response_url": ru, "trigger_id": trig,
	}
	if t := s.teams[team]; t != nil {
		p["team_domain"] = t.Domain
	}
	if c := s.channels[channel]; c != nil {
		p["channel_name"] = c.Name
		if c.IsIM() {
			p["channel_name"] = "directmessage"
		}
	}
	if u := s.users[user]; u != nil {
		p["user_name"] = u.Name
	}
	// Slack sends is_enterprise_install as a bool, a string or not at all.
	switch s.idSeq % 3 {
	case 0:
		p["is_enterprise_install"] = false
	case 1:
		p["is_enterprise_install"] = "false"
	}
	e := s.newEnvelopeLocked(TypeSlashCommands, team, p, true)
	s.interactions()[e.ID] = &interaction{kind: "slash_command", team: team, channel: channel, user: user}
	return &Interaction{EnvelopeID: e.ID, Kind: "slash_command", TriggerID: trig, ResponseURL: ru, s: s}
}

func (s *Server) interactions() map[string]*interaction {
	if s.inter == nil {
		s.inter = map[string]*interaction{}
	}
	return s.inter
}

// element is an interactive Block Kit element.
type element struct {
	Type     string          `json:"type"`
	ActionID string          `json:"action_id"`
	Value    string          `json:"value"`
	Text     json.RawMessage `json:"text"`
	URL      string          `json:"url"`
	Style    string          `json:"style"`
}

// actionJSONLocked renders the action of a click on el.
func (s *Server) actionJSONLocked(el element, blockID, value string) map[string]any {
	action := map[string]any{"type": el.Type, "action_id": el.ActionID, "block_id": blockID, "value": value, "action_ts": s.newTSLocked()}
	if el.Text != nil {
		action["text"] = el.Text
	}
	if el.URL != "" {
		action["url"] = el.URL
	}
	if el.Style != "" {
		action["style"] = el.Style
	}
	return action
}

// findAction looks for the element with actionID in blocks.
func findAction(raw json.RawMessage, actionID string) (blockID string, el element, ok bool) {
	bs, _ := parseBlocksMax(raw, "invalid_blocks", maxViewBlocks)
	for _, b := range bs {
		cands := append([]json.RawMessage(nil), b.Elements...)
		if b.Accessory != nil {
			cands = append(cands, b.Accessory)
		}
		if b.Element != nil {
			cands = append(cands, b.Element)
		}
		for _, c := range cands {
			var e element
			if json.Unmarshal(c, &e) == nil && e.ActionID == actionID {
				return b.BlockID, e, true
			}
		}
	}
	return "", element{}, false
}

// Click presses the element with actionID in the blocks of the message
// channel/messageTS (a channel message or one of user's ephemerals) as
// user, and delivers the block_actions envelope. value overrides the
// element's value when not "". Forged clicks: ClickRaw.
func (s *Server) Click(team, user, channel, messageTS, actionID, value string) (*Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var blocks json.RawMessage
	var msg map[string]any
	ephemeral := false
	threadTS := ""
	if m := s.msgs[msgKey(channel, messageTS)]; m != nil && !m.Deleted {
		blocks, msg, threadTS = m.Blocks, s.messageJSONLocked(m), m.ThreadTS
	} else {
		for _, e := range s.ephemerals[user] {
			if e.Channel == channel && e.TS == messageTS && !e.Deleted {
				blocks, ephemeral, threadTS = e.Blocks, true, e.ThreadTS
			}
		}
		if blocks == nil {
			return nil, fmt.Errorf("slackemu: Click: no message %s/%s visible to %s", channel, messageTS, user)
		}
	}
	blockID, el, ok := findAction(blocks, actionID)
	if !ok {
		return nil, fmt.Errorf("slackemu: Click: no element with action_id %q in %s/%s", actionID, channel, messageTS)
	}
	if value == "" {
		value = el.Value
	}
	in := s.clickLocked(team, user, channel, messageTS, threadTS, ephemeral, msg, s.actionJSONLocked(el, blockID, value))
	in.URL = el.URL
	return in, nil
}

// ClickRaw delivers a block_actions envelope for any action object (for
// forged or replayed clicks); the message need not exist.
func (s *Server) ClickRaw(team, user, channel, messageTS string, action map[string]any) *Interaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	var msg map[string]any
	threadTS := ""
	if m := s.msgs[msgKey(channel, messageTS)]; m != nil {
		msg, threadTS = s.messageJSONLocked(m), m.ThreadTS
	}
	if _, ok := action["action_ts"]; !ok {
		action["action_ts"] = s.newTSLocked()
	}
	return s.clickLocked(team, user, channel, messageTS, threadTS, false, msg, action)
}

func (s *Server) clickLocked(team, user, channel, messageTS, threadTS string, ephemeral bool, msg, action map[string]any) *Interaction {
	trig := s.newTriggerLocked(team, user)
	ru := s.newResponseURLLocked(team, channel, user, messageTS, threadTS, ephemeral)
	container := map[string]any{"type": "message", "message_ts": messageTS, "channel_id": channel, "is_ephemeral": ephemeral}
	if threadTS != "" {
		container["thread_ts"] = threadTS
	}
	chRef := map[string]any{"id": channel}
	if c := s.channels[channel]; c != nil {
		chRef["name"] = c.Name
	}
	p := map[string]any{
		"type": "block_actions", "user": s.userRefLocked(team, user), "api_app_id": s.opts.AppID,
		"token": "emu-verification-token", "container": container, "trigger_id": trig,
		"team": s.teamRefLocked(team), "enterprise": nil, "is_enterprise_install": false,
		"channel": chRef, "response_url": ru, "actions": []any{action},
	}
	if msg != nil {
		p["message"] = msg
	}
	e := s.newEnvelopeLocked(TypeInteractive, team, p, false)
	s.interactions()[e.ID] = &interaction{kind: "block_actions", team: team, channel: channel, user: user}
	return &Interaction{EnvelopeID: e.ID, Kind: "block_actions", TriggerID: trig, ResponseURL: ru, s: s}
}

// SubmitView submits the open view viewID as user with the given input
// values (values[block_id][action_id] = text) and delivers the
// view_submission envelope. The ack is applied to the user's view stack:
// errors keep it, update replaces it, push adds one, clear closes all, an
// empty ack closes the submitted view.
func (s *Server) SubmitView(team, user, viewID string, values map[string]map[string]string) (*Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.views[viewID]
	if v == nil || v.Closed || v.User != user {
		return nil, fmt.Errorf("slackemu: SubmitView: no open view %s for %s", viewID, user)
	}
	state := map[string]any{}
	for blockID, acts := range values {
		m := map[string]any{}
		for actionID, val := range acts {
			m[actionID] = map[string]any{"type": "plain_text_input", "value": val}
		}
		state[blockID] = m
	}
	return s.submitStateLocked(team, user, v, state), nil
}

// submitStateLocked delivers the view_submission of v with state.values.
func (s *Server) submitStateLocked(team, user string, v *View, state map[string]any) *Interaction {
	viewID := v.ID
	vj := s.viewJSONLocked(v)
	vj["state"] = map[string]any{"values": state}
	trig := s.newTriggerLocked(team, user)
	p := map[string]any{
		"type": "view_submission", "team": s.teamRefLocked(team), "user": s.userRefLocked(team, user),
		"api_app_id": s.opts.AppID, "token": "emu-verification-token", "trigger_id": trig,
		"view": vj, "response_urls": []any{}, "is_enterprise_install": false, "enterprise": nil,
	}
	e := s.newEnvelopeLocked(TypeInteractive, team, p, true)
	s.interactions()[e.ID] = &interaction{kind: "view_submission", team: team, user: user, viewID: viewID}
	return &Interaction{EnvelopeID: e.ID, Kind: "view_submission", TriggerID: trig, s: s}
}

// applyAckPayloadLocked makes an ack's payload visible.
func (s *Server) applyAckPayloadLocked(e *Envelope, raw json.RawMessage) {
	in := s.inter[e.ID]
	if in == nil {
		return
	}
	var p ackPayload
	if len(raw) > 0 && json.Unmarshal(raw, &p) != nil {
		return
	}
	switch in.kind {
	case "slash_command":
		if p.Text == "" && len(p.Blocks) == 0 {
			return
		}
		s.showReplyLocked(in.team, in.channel, in.user, p.ThreadTS, p.ResponseType, p.Text, p.Blocks, "slash_ack")
	case "view_submission":
		key := in.team + "/" + in.user
		stack := s.stacks[key]
		switch p.ResponseAction {
		case "errors":
			// The view stays open with the errors shown under its inputs.
			if v := s.views[in.viewID]; v != nil {
				v.Errors = p.Errors
			}
		case "update":
			if v := s.views[in.viewID]; v != nil && len(p.View) > 0 {
				_ = s.setViewContentLocked(v, p.View)
			}
		case "push":
			if len(stack) < 3 && len(p.View) > 0 {
				if v, err := s.newViewLocked(in.team, in.user, p.View); err == nil {
					if len(stack) > 0 {
						v.RootID, v.PreviousID = stack[0].ID, stack[len(stack)-1].ID
					}
					s.stacks[key] = append(stack, v)
				}
			}
		case "clear":
			for _, v := range stack {
				v.Closed = true
			}
			delete(s.stacks, key)
		default:
			// An empty ack closes the submitted view (the top one).
			for i, v := range stack {
				if v.ID == in.viewID {
					for _, w := range stack[i:] {
						w.Closed = true
					}
					s.stacks[key] = stack[:i]
					break
				}
			}
		}
	}
	s.changedLocked()
}

// showReplyLocked shows a slash/response_url reply: in_channel posts as the
// bot, anything else is ephemeral to user.
func (s *Server) showReplyLocked(team, channel, user, threadTS, responseType, text string, blocks json.RawMessage, via string) {
	if responseType == "in_channel" {
		m := &Message{Team: team, Channel: channel, TS: s.newTSLocked(), ThreadTS: threadTS, Text: text, Blocks: blocks, Via: via}
		m.User, m.BotID, _ = s.botIdentityLocked(team)
		s.recordVersionLocked(m, via)
		s.putMessageLocked(m)
		return
	}
	s.ephemerals[user] = cappedAppend(s, s.ephemerals[user], &Ephemeral{
		Team: team, Channel: channel, User: user, TS: s.newTSLocked(), ThreadTS: threadTS, Text: text, Blocks: blocks, Via: via,
	})
}

// responseURL is a response_url the app may use five times.
type responseURL struct {
	team, channel, user string
	messageTS, threadTS string
	ephemeral           bool
	expires             time.Time
	uses                int
}

func (s *Server) newResponseURLLocked(team, channel, user, messageTS, threadTS string, ephemeral bool) string {
	id := s.newUUIDLocked()
	s.issuedLocked()
	s.responses[id] = &responseURL{team: team, channel: channel, user: user, messageTS: messageTS, threadTS: threadTS, ephemeral: ephemeral, expires: time.Now().Add(s.opts.ResponseURLTTL)}
	return s.base + "/hooks/" + team + "/" + id
}

func (s *Server) handleResponseURL(w http.ResponseWriter, hr *http.Request) {
	if !s.enter() {
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	defer s.tasks.Done()
	parts := strings.Split(strings.TrimPrefix(hr.URL.Path, "/hooks/"), "/")
	id := parts[len(parts)-1]
	body, _ := io.ReadAll(io.LimitReader(hr.Body, 8<<20))
	var p struct {
		ackPayload
		MarkdownText    string `json:"markdown_text"`
		ReplaceOriginal bool   `json:"replace_original"`
		DeleteOriginal  bool   `json:"delete_original"`
	}
	status, code := http.StatusOK, ""
	s.mu.Lock()
	ru := s.responses[id]
	switch {
	case ru == nil:
		status, code = http.StatusNotFound, "no_service"
	case time.Now().After(ru.expires):
		code = "expired_url"
	case ru.uses >= 5:
		code = "used_url"
	case json.Unmarshal(body, &p) != nil:
		code = "invalid_payload"
	default:
		ru.uses++
		code = s.applyResponseLocked(ru, p.ackPayload, p.MarkdownText, p.ReplaceOriginal, p.DeleteOriginal)
	}
	var params map[string]any
	_ = json.Unmarshal(body, &params)
	c := Call{Time: time.Now(), Method: "response_url", Params: params, Status: status, OK: code == "", Error: code}
	if ru != nil {
		c.Team = ru.team
	}
	s.journalLocked(c)
	s.changedLocked()
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if code != "" {
		_ = json.NewEncoder(w).Encode(fail(code))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true})
}

func (s *Server) applyResponseLocked(ru *responseURL, p ackPayload, md string, replace, del bool) string {
	text := p.Text
	if md != "" {
		text = md
	}
	switch {
	case (replace || del) && ru.messageTS != "" && ru.ephemeral:
		for _, e := range s.ephemerals[ru.user] {
			if e.Channel == ru.channel && e.TS == ru.messageTS {
				if del {
					e.Deleted = true
				} else {
					e.Text, e.Blocks, e.Replaced, e.Via = text, p.Blocks, true, "response_url"
				}
				return ""
			}
		}
		return "message_not_found"
	case (replace || del) && ru.messageTS != "":
		m := s.msgs[msgKey(ru.channel, ru.messageTS)]
		if m == nil || m.Deleted {
			return "message_not_found"
		}
		if del {
			m.Deleted = true
			return ""
		}
		m.Text, m.MarkdownText, m.Blocks, m.Edited = p.Text, md, p.Blocks, true
		s.recordVersionLocked(m, "response_url")
		return ""
	case del:
		return "message_not_found"
	}
	thread := p.ThreadTS
	if thread == "" {
		thread = ru.threadTS
	}
	s.showReplyLocked(ru.team, ru.channel, ru.user, thread, p.ResponseType, text, p.Blocks, "response_url")
	return ""
}

// enter registers a handler run; false after Close.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.tasks.Add(1)
	return true
}
