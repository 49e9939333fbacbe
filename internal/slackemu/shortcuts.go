package slackemu

import (
	"fmt"
	"slices"
)

// Shortcuts: message shortcuts (message_action) and global shortcuts
// (shortcut) as interactive envelopes, acked within the deadline like any
// interaction. Slash commands and shortcuts are not shared in Slack
// Connect: only people of a workspace where the app is installed can
// invoke them.

// Shortcut is one of the app's configured shortcuts (manifest
// features.shortcuts).
type Shortcut struct {
	Name       string
	Type       string // "message" or "global"
	CallbackID string
}

// checkShortcutLocked refuses what Slack would not offer: an unknown
// callback id, or a person whose workspace has not installed the app.
func (s *Server) checkShortcutLocked(team, user, typ, callbackID string) error {
	if s.opts.Shortcuts != nil && !slices.ContainsFunc(s.opts.Shortcuts, func(sc Shortcut) bool { return sc.Type == typ && sc.CallbackID == callbackID }) {
		return fmt.Errorf("slackemu: no %s shortcut with callback_id %q", typ, callbackID)
	}
	u := s.users[user]
	if u == nil {
		return fmt.Errorf("slackemu: unknown user %q", user)
	}
	if u.TeamID != team && !s.sameOrgLocked(u.TeamID, team) {
		return fmt.Errorf("slackemu: %s is from %s: shortcuts are not shared across organisations", user, u.TeamID)
	}
	if len(s.liveInstallsLocked(team)) == 0 {
		return fmt.Errorf("slackemu: the app is not installed in %s", team)
	}
	return nil
}

func (s *Server) sameOrgLocked(a, b string) bool {
	ta, tb := s.teams[a], s.teams[b]
	return ta != nil && tb != nil && ta.EnterpriseID != "" && ta.EnterpriseID == tb.EnterpriseID
}

// MessageShortcut invokes the message shortcut callbackID on the message
// channel/messageTS as user (the "More actions" menu of a message) and
// delivers the message_action envelope, with trigger_id, response_url,
// the message, channel, team and user.
func (s *Server) MessageShortcut(team, user, channel, messageTS, callbackID string) (*Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkShortcutLocked(team, user, "message", callbackID); err != nil {
		return nil, err
	}
	c := s.channels[channel]
	m := s.msgs[msgKey(channel, messageTS)]
	if !seesChannel(c, team) || m == nil || m.Deleted {
		return nil, fmt.Errorf("slackemu: MessageShortcut: no message %s/%s in %s", channel, messageTS, team)
	}
	trig := s.newTriggerLocked(team, user)
	// Slack: a response_url cannot post back into the message's thread.
	ru := s.newResponseURLLocked(team, channel, user, "", "", false)
	chRef := map[string]any{"id": channel, "name": c.Name}
	if c.IsIM() {
		chRef["name"] = "directmessage"
	}
	p := map[string]any{
		"type": "message_action", "token": "emu-verification-token", "action_ts": s.newTSLocked(),
		"team": s.teamRefLocked(team), "user": s.userRefLocked(team, user), "channel": chRef,
		"is_enterprise_install": false, "enterprise": nil, "callback_id": callbackID, "trigger_id": trig,
		"response_url": ru, "message_ts": messageTS, "message": s.messageJSONLocked(m), "api_app_id": s.opts.AppID,
	}
	e := s.newEnvelopeLocked(TypeInteractive, team, p, false)
	s.interactions()[e.ID] = &interaction{kind: "message_action", team: team, channel: channel, user: user}
	return &Interaction{EnvelopeID: e.ID, Kind: "message_action", TriggerID: trig, ResponseURL: ru, s: s}, nil
}

// GlobalShortcut invokes the global shortcut callbackID as user (from the
// composer's shortcuts menu): a "shortcut" payload with a trigger_id and
// no channel, message or response_url.
func (s *Server) GlobalShortcut(team, user, callbackID string) (*Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkShortcutLocked(team, user, "global", callbackID); err != nil {
		return nil, err
	}
	trig := s.newTriggerLocked(team, user)
	p := map[string]any{
		"type": "shortcut", "token": "emu-verification-token", "action_ts": s.newTSLocked(),
		"team": s.teamRefLocked(team), "user": s.userRefLocked(team, user), "is_enterprise_install": false,
		"enterprise": nil, "callback_id": callbackID, "trigger_id": trig, "api_app_id": s.opts.AppID,
	}
	e := s.newEnvelopeLocked(TypeInteractive, team, p, false)
	s.interactions()[e.ID] = &interaction{kind: "shortcut", team: team, user: user}
	return &Interaction{EnvelopeID: e.ID, Kind: "shortcut", TriggerID: trig, s: s}, nil
}
