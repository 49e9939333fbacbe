package slackemu

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// View is a modal in a user's view stack.
type View struct {
	ID              string
	Team            string
	User            string
	Type            string
	CallbackID      string
	PrivateMetadata string
	ExternalID      string
	Hash            string
	Title           json.RawMessage
	Blocks          json.RawMessage
	// Raw is the view object as the app last sent it.
	Raw        json.RawMessage
	RootID     string
	PreviousID string
	Closed     bool
	Updates    int
	// Errors are the field errors of the last view_submission answered
	// with response_action "errors" (block_id → message), shown under
	// the inputs until the view changes or is submitted again.
	Errors map[string]string

	created time.Time
}

// maxViewBlocks is Slack's block limit for modals and Home tabs.
const maxViewBlocks = 100

type trigger struct {
	team, user string
	expires    time.Time
	used       bool
}

func (s *Server) newTriggerLocked(team, user string) string {
	id := fmt.Sprintf("%d.%d.%s", time.Now().Unix(), s.rng.Uint32(), s.newUUIDLocked()[:8])
	s.triggers[id] = &trigger{team: team, user: user, expires: time.Now().Add(s.opts.TriggerTTL)}
	s.issuedLocked()
	return id
}

// useTriggerLocked exchanges a trigger_id once.
func (s *Server) useTriggerLocked(r *request) (*trigger, error) {
	id := r.str("trigger_id")
	if id == "" {
		id = r.str("interactivity_pointer")
	}
	t := s.triggers[id]
	switch {
	case id == "" || t == nil || t.team != r.team.ID:
		return nil, apiError("invalid_trigger_id")
	case t.used:
		return nil, apiError("exchanged_trigger_id")
	case time.Now().After(t.expires):
		return nil, apiError("expired_trigger_id")
	}
	t.used = true
	return t, nil
}

type viewRequest struct {
	Type            string          `json:"type"`
	CallbackID      string          `json:"callback_id"`
	PrivateMetadata string          `json:"private_metadata"`
	ExternalID      string          `json:"external_id"`
	Title           json.RawMessage `json:"title"`
	Blocks          json.RawMessage `json:"blocks"`
}

func (s *Server) setViewContentLocked(v *View, raw json.RawMessage) error {
	var vr viewRequest
	if err := json.Unmarshal(raw, &vr); err != nil || vr.Type == "" {
		return apiError("invalid_arguments")
	}
	if string(vr.Blocks) == "null" {
		vr.Blocks = nil
	}
	// Modals and Home tabs take up to 100 blocks (messages 50).
	if _, err := parseBlocksMax(vr.Blocks, "invalid_blocks", maxViewBlocks); err != nil {
		return err
	}
	if len(raw) > 250*1024 {
		return apiError("view_too_large")
	}
	v.Type, v.CallbackID, v.PrivateMetadata, v.ExternalID = vr.Type, vr.CallbackID, vr.PrivateMetadata, vr.ExternalID
	v.Title, v.Blocks, v.Raw = vr.Title, vr.Blocks, raw
	v.Errors = nil
	v.Hash = fmt.Sprintf("%d.%s", time.Now().Unix(), s.newUUIDLocked()[:8])
	return nil
}

func (s *Server) newViewLocked(team, user string, raw json.RawMessage) (*View, error) {
	v := &View{ID: s.newIDLocked("V"), Team: team, User: user, created: time.Now()}
	if err := s.setViewContentLocked(v, raw); err != nil {
		return nil, err
	}
	v.RootID = v.ID
	s.views[v.ID] = v
	s.trimViewsLocked()
	return v, nil
}

func (s *Server) viewJSONLocked(v *View) map[string]any {
	blocks := v.Blocks
	if blocks == nil {
		blocks = json.RawMessage("[]")
	}
	out := map[string]any{
		"id": v.ID, "team_id": v.Team, "type": v.Type, "blocks": blocks,
		"private_metadata": v.PrivateMetadata, "callback_id": v.CallbackID, "external_id": v.ExternalID,
		"hash": v.Hash, "state": map[string]any{"values": map[string]any{}},
		"root_view_id": v.RootID, "previous_view_id": nilIfEmpty(v.PreviousID), "app_id": s.opts.AppID,
		"app_installed_team_id": v.Team, "clear_on_close": false, "notify_on_close": false,
	}
	if t := s.teams[v.Team]; t != nil {
		out["bot_id"] = t.BotID
	}
	if v.Title != nil {
		out["title"] = v.Title
	}
	return out
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *Server) viewArg(r *request) (json.RawMessage, error) {
	raw, err := r.raw("view")
	if err != nil || raw == nil {
		return nil, apiError("invalid_arguments")
	}
	return raw, nil
}

func (s *Server) viewsOpen(r *request) (map[string]any, error) {
	raw, err := s.viewArg(r)
	if err != nil {
		return nil, err
	}
	t, err := s.useTriggerLocked(r)
	if err != nil {
		return nil, err
	}
	v, err := s.newViewLocked(t.team, t.user, raw)
	if err != nil {
		return nil, err
	}
	key := t.team + "/" + t.user
	for _, old := range s.stacks[key] {
		old.Closed = true
	}
	s.stacks[key] = []*View{v}
	s.changedLocked()
	return map[string]any{"view": s.viewJSONLocked(v)}, nil
}

func (s *Server) viewsPush(r *request) (map[string]any, error) {
	raw, err := s.viewArg(r)
	if err != nil {
		return nil, err
	}
	t, err := s.useTriggerLocked(r)
	if err != nil {
		return nil, err
	}
	key := t.team + "/" + t.user
	stack := s.stacks[key]
	if len(stack) == 0 {
		return nil, apiError("not_found")
	}
	if len(stack) >= 3 {
		return nil, apiError("push_limit_reached")
	}
	v, err := s.newViewLocked(t.team, t.user, raw)
	if err != nil {
		return nil, err
	}
	v.RootID, v.PreviousID = stack[0].ID, stack[len(stack)-1].ID
	s.stacks[key] = append(stack, v)
	s.changedLocked()
	return map[string]any{"view": s.viewJSONLocked(v)}, nil
}

func (s *Server) viewsUpdate(r *request) (map[string]any, error) {
	raw, err := s.viewArg(r)
	if err != nil {
		return nil, err
	}
	var v *View
	if id := r.str("view_id"); id != "" {
		v = s.views[id]
	} else if ext := r.str("external_id"); ext != "" {
		for _, c := range s.views {
			if c.ExternalID == ext && !c.Closed {
				v = c
			}
		}
	} else {
		return nil, apiError("invalid_arguments")
	}
	if v == nil || v.Closed || v.Team != r.team.ID {
		return nil, apiError("not_found")
	}
	if h := r.str("hash"); h != "" && h != v.Hash {
		return nil, apiError("hash_conflict")
	}
	if err := s.setViewContentLocked(v, raw); err != nil {
		return nil, err
	}
	v.Updates++
	s.changedLocked()
	return map[string]any{"view": s.viewJSONLocked(v)}, nil
}

// Views returns user's open view stack in team, root first.
func (s *Server) Views(team, user string) []View {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []View
	for _, v := range s.stacks[team+"/"+user] {
		c := *v
		c.Raw = slices.Clone(v.Raw)
		c.Errors = maps.Clone(v.Errors)
		out = append(out, c)
	}
	return out
}

// ExpireTrigger makes a trigger_id expired now (for expired_trigger_id).
func (s *Server) ExpireTrigger(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.triggers[id]; t != nil {
		t.expires = time.Now().Add(-time.Second)
	}
}

// NewTrigger issues a fresh trigger_id for user (as an interaction would).
func (s *Server) NewTrigger(team, user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newTriggerLocked(team, user)
}
