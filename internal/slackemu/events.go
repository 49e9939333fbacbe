package slackemu

import (
	"fmt"
	"time"
)

// eventCallbackLocked wraps an inner event in the events_api payload:
// one authorization (the installation that sees it), the Slack Connect
// fields, and an event_context apps.event.authorizations.list reads.
func (s *Server) eventCallbackLocked(team string, event map[string]any) (map[string]any, string) {
	id := s.newIDLocked("Ev")
	channel, _ := event["channel"].(string)
	host, shared := team, false
	if c := s.channels[channel]; c != nil {
		host, shared = c.team, len(c.SharedTeams) > 0
	}
	var hostEnt any
	if t := s.teams[host]; t != nil && t.EnterpriseID != "" {
		hostEnt = t.EnterpriseID
	}
	auth := s.authorizationLocked(team)
	p := map[string]any{
		"token":                 "emu-verification-token",
		"team_id":               team,
		"api_app_id":            s.opts.AppID,
		"event":                 event,
		"type":                  "event_callback",
		"event_id":              id,
		"event_time":            time.Now().Unix(),
		"authorizations":        []any{auth},
		"is_ext_shared_channel": shared,
		"event_context":         encodeEventContext(eventContext{Team: team, Channel: channel, Event: id}),
		"context_team_id":       host,
		"context_enterprise_id": hostEnt,
	}
	if e := auth["enterprise_id"]; e != nil {
		p["enterprise_id"] = e
	}
	return p, id
}

// DeliverEvent sends an events_api envelope carrying event (the inner
// "event" object) for team, and returns the envelope and event ids.
func (s *Server) DeliverEvent(team string, event map[string]any) (envelopeID, eventID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deliverEventLocked(team, event)
}

func (s *Server) deliverEventLocked(team string, event map[string]any) (envelopeID, eventID string) {
	p, id := s.eventCallbackLocked(team, event)
	e := s.newEnvelopeLocked(TypeEventsAPI, team, p, false)
	return e.ID, id
}

func channelType(c *channelState) string {
	switch {
	case c == nil:
		return "channel"
	case c.IsIM():
		return "im"
	case c.Private:
		return "group"
	}
	return "channel"
}

// Posted identifies a user message stored and delivered by a helper.
type Posted struct {
	TS       string
	EventID  string // of the primary event (app_mention or message)
	Envelope string // its envelope id
	// MessageEventID / MessageEnvelope are set when a companion "message"
	// event was also delivered for a mention.
	MessageEventID  string
	MessageEnvelope string
	// Files are the files shared with the message (Post), as stored.
	Files []File
}

// Mention stores a message from user in channel (in the thread threadTS
// when set) and delivers an app_mention event; the text gets "<@BOT> "
// in front unless it already mentions the bot. With
// Options.MessageEventsOnMention and the bot in the channel, a "message"
// event for the same ts follows (real Slack sends both). Post does the
// same with files and more options.
func (s *Server) Mention(team, channel, user, text, threadTS string) Posted {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.teams[team] == nil {
		panic(fmt.Sprintf("slackemu: Mention: unknown team %q", team))
	}
	p, _ := s.postLocked(UserPost{Team: team, Channel: channel, User: user, Text: text, ThreadTS: threadTS, Mention: true})
	return p
}

// Message stores a plain message from user (a thread reply when threadTS
// is set, a DM when channel is a D… channel) and delivers a "message"
// event when the bot would get one: in DMs and in channels it is a member
// of. Posted.EventID is empty when no event was delivered.
func (s *Server) Message(team, channel, user, text, threadTS string) Posted {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, _ := s.postLocked(UserPost{Team: team, Channel: channel, User: user, Text: text, ThreadTS: threadTS})
	return p
}

// userEventLocked renders a message as an app_mention or message event:
// files as events carry them (Connect stubs stay stubs), user_team and
// source_team from the author's workspace.
func (s *Server) userEventLocked(m *Message, typ string) map[string]any {
	ev := map[string]any{
		"type": typ, "client_msg_id": s.newUUIDLocked(), "text": m.Text, "user": m.User, "ts": m.TS,
		"team": m.Team, "channel": m.Channel, "event_ts": m.TS, "channel_type": channelType(s.channels[m.Channel]),
	}
	if m.Blocks != nil {
		ev["blocks"] = m.Blocks
	}
	if u := s.users[m.User]; u != nil {
		ev["user_team"] = u.TeamID // differs from team for external users
		ev["source_team"] = u.TeamID
	}
	if m.sourceTeam != "" {
		ev["source_team"] = m.sourceTeam
	}
	if m.ThreadTS != "" {
		ev["thread_ts"] = m.ThreadTS
		if p := s.msgs[msgKey(m.Channel, m.ThreadTS)]; p != nil {
			ev["parent_user_id"] = p.User
		}
	}
	if m.Subtype != "" {
		ev["subtype"] = m.Subtype
	}
	s.addActionTokenLocked(m, typ, ev)
	if m.BotID != "" {
		delete(ev, "client_msg_id")
		ev["bot_id"] = m.BotID
		if m.botName != "" {
			ev["bot_profile"] = map[string]any{"id": m.BotID, "app_id": "A0" + m.BotID, "name": m.botName, "team_id": m.Team, "deleted": false}
			if m.Subtype == "bot_message" {
				ev["username"] = m.botName
			}
		}
	}
	if len(m.Files) > 0 {
		var fs []any
		for _, id := range m.Files {
			if f := s.files[id]; f != nil {
				fs = append(fs, s.fileEventJSONLocked(f))
			}
		}
		ev["files"], ev["upload"], ev["display_as_bot"] = fs, false, false
	}
	return ev
}

// AssistantThreadStarted opens an assistant thread for user in the DM
// dmChannel (contextChannel is the channel the user was viewing, may be
// ""): it stores the thread's root message and delivers
// assistant_thread_started. Follow-ups are Message(team, dmChannel, user,
// text, p.TS).
func (s *Server) AssistantThreadStarted(team, user, dmChannel, contextChannel string) Posted {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.teams[team] == nil {
		panic(fmt.Sprintf("slackemu: AssistantThreadStarted: unknown team %q", team))
	}
	bot, botID, _ := s.botIdentityLocked(team)
	root := &Message{Team: team, Channel: dmChannel, TS: s.newTSLocked(), User: bot, BotID: botID, Via: "assistant_thread"}
	s.recordVersionLocked(root, "assistant_thread")
	s.putMessageLocked(root)
	ctxObj := map[string]any{"team_id": team}
	if contextChannel != "" {
		ctxObj["channel_id"] = contextChannel
	}
	ev := map[string]any{
		"type": "assistant_thread_started",
		"assistant_thread": map[string]any{
			"user_id": user, "context": ctxObj, "channel_id": dmChannel, "thread_ts": root.TS,
		},
		"event_ts": s.newTSLocked(),
	}
	p := Posted{TS: root.TS}
	p.Envelope, p.EventID = s.deliverEventLocked(team, ev)
	return p
}

// echoLocked delivers the bot's own post back as Slack would to a
// subscribed app (Options.EchoBotMessages): subtype "" for a new post,
// "message_changed" or "message_deleted".
func (s *Server) echoLocked(m *Message, subtype string) {
	if !s.opts.EchoBotMessages {
		return
	}
	c := s.channels[m.Channel]
	if c == nil || (!c.BotMember && !c.IsIM()) {
		return
	}
	msg := s.messageJSONLocked(m)
	var ev map[string]any
	switch subtype {
	case "":
		ev = msg
		ev["channel"] = m.Channel
		ev["event_ts"] = m.TS
		ev["channel_type"] = channelType(c)
	default:
		ev = map[string]any{
			"type": "message", "subtype": subtype, "hidden": true, "channel": m.Channel,
			"ts": s.newTSLocked(), "event_ts": m.TS, "channel_type": channelType(c),
		}
		if subtype == "message_changed" {
			ev["message"] = msg
		} else {
			ev["deleted_ts"] = m.TS
		}
	}
	s.deliverEventLocked(m.Team, ev)
}
