package slackemu

import (
	"encoding/json"
	"fmt"
	"slices"
)

// App Home: views.publish (one home view per person and workspace, with
// Slack's hash guard and limits), app_home_opened events, and clicks in a
// published home view or an open modal (block_actions with
// container.type "view").

// viewsPublish is views.publish.
func (s *Server) viewsPublish(r *request) (map[string]any, error) {
	if s.opts.HomeTabDisabled {
		return nil, apiError("not_enabled")
	}
	user := r.str("user_id")
	if u := s.users[user]; u == nil || !s.seesUserLocked(r.team.ID, u) {
		return nil, apiError("user_not_found")
	}
	raw, err := s.viewArg(r)
	if err != nil {
		return nil, err
	}
	var vr viewRequest
	if json.Unmarshal(raw, &vr) != nil || vr.Type != "home" {
		return nil, apiError("invalid_arguments")
	}
	key := r.team.ID + "/" + user
	v := s.homes[key]
	if h := r.str("hash"); h != "" && (v == nil || h != v.Hash) {
		return nil, apiError("hash_conflict")
	}
	if vr.ExternalID != "" {
		for k, o := range s.homes {
			if k != key && o.Team == r.team.ID && o.ExternalID == vr.ExternalID {
				return nil, apiError("duplicate_external_id")
			}
		}
	}
	fresh := v == nil
	if fresh {
		v = &View{ID: s.newIDLocked("V"), Team: r.team.ID, User: user}
	}
	if err := s.setViewContentLocked(v, raw); err != nil {
		return nil, err
	}
	if fresh {
		v.RootID = v.ID
		s.homes[key] = v
		s.views[v.ID] = v
	} else {
		v.Updates++
	}
	s.changedLocked()
	return map[string]any{"view": s.viewJSONLocked(v)}, nil
}

// SetHomeTabEnabled switches the App Home tab at run time (see
// Options.HomeTabDisabled).
func (s *Server) SetHomeTabEnabled(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.HomeTabDisabled = !on
}

// HomeView returns the home view published for user in team.
func (s *Server) HomeView(team, user string) (View, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.homes[team+"/"+user]
	if v == nil {
		return View{}, false
	}
	c := *v
	c.Raw = slices.Clone(v.Raw)
	return c, true
}

// OpenHome delivers app_home_opened as when user opens the app's Home
// ("home") or Messages ("messages", "" = "home") tab; Slack sends it on
// every visit, with the published view once there is one.
func (s *Server) OpenHome(team, user, tab string) Posted {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tab == "" {
		tab = "home"
	}
	ev := map[string]any{"type": "app_home_opened", "user": user, "channel": s.dmWithLocked(team, user), "tab": tab, "event_ts": s.newTSLocked()}
	if v := s.homes[team+"/"+user]; v != nil {
		ev["view"] = s.viewJSONLocked(v)
	}
	var p Posted
	p.Envelope, p.EventID = s.deliverEventLocked(team, ev)
	return p
}

// dmWithLocked returns the bot's DM with user in team, making one when
// there is none.
func (s *Server) dmWithLocked(team, user string) string {
	for _, c := range s.channels {
		if c.team == team && c.IMUser == user {
			return c.ID
		}
	}
	id := s.newIDLocked("D")
	s.channels[id] = &channelState{Channel: Channel{ID: id, IMUser: user, BotMember: true}, team: team}
	return id
}

// ClickHome presses the element with actionID in user's published home
// view and delivers block_actions (container.type "view", the view with
// its state, no response_url). value overrides the element's value.
func (s *Server) ClickHome(team, user, actionID, value string) (*Interaction, error) {
	s.mu.Lock()
	v := s.homes[team+"/"+user]
	s.mu.Unlock()
	if v == nil {
		return nil, fmt.Errorf("slackemu: ClickHome: nothing published for %s in %s", user, team)
	}
	return s.ClickView(team, user, v.ID, actionID, value)
}

// ClickView presses an element in a view user sees (a published home view
// or an open modal) and delivers block_actions with container.type
// "view".
func (s *Server) ClickView(team, user, viewID, actionID, value string) (*Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.views[viewID]
	if v == nil || v.Closed || v.User != user || v.Team != team {
		return nil, fmt.Errorf("slackemu: ClickView: no view %s open for %s", viewID, user)
	}
	blockID, el, ok := findAction(v.Blocks, actionID)
	if !ok {
		return nil, fmt.Errorf("slackemu: ClickView: no element with action_id %q in view %s", actionID, viewID)
	}
	if value == "" {
		value = el.Value
	}
	trig := s.newTriggerLocked(team, user)
	p := map[string]any{
		"type": "block_actions", "user": s.userRefLocked(team, user), "api_app_id": s.opts.AppID,
		"token": "emu-verification-token", "container": map[string]any{"type": "view", "view_id": v.ID},
		"trigger_id": trig, "team": s.teamRefLocked(team), "enterprise": nil, "is_enterprise_install": false,
		"view": s.viewJSONLocked(v), "actions": []any{s.actionJSONLocked(el, blockID, value)},
	}
	e := s.newEnvelopeLocked(TypeInteractive, team, p, false)
	s.interactions()[e.ID] = &interaction{kind: "block_actions", team: team, user: user, viewID: v.ID}
	return &Interaction{EnvelopeID: e.ID, Kind: "block_actions", TriggerID: trig, URL: el.URL, s: s}, nil
}
