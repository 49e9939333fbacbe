package slackemu

import (
	"encoding/json"
	"fmt"
)

// SubmitViewInputs submits the open view viewID as user the way Slack
// does: view.state.values holds every input block of the view, each in its
// element's shape, with what the person entered, or, for blocks values
// does not name, what the element shows pre-filled (initial_value,
// initial_option(s), initial_date; empty when none). values maps an input
// block id to:
//
//	plain_text_input, number_input, email_text_input, url_text_input: string
//	datepicker: "YYYY-MM-DD"
//	static_select, radio_buttons: the chosen option's value ("" for none)
//	multi_static_select, checkboxes: []string of option values
//
// The ack is applied as for SubmitView.
func (s *Server) SubmitViewInputs(team, user, viewID string, values map[string]any) (*Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.views[viewID]
	if v == nil || v.Closed || v.User != user {
		return nil, fmt.Errorf("slackemu: SubmitViewInputs: no open view %s for %s", viewID, user)
	}
	bs, _ := parseBlocksMax(v.Blocks, "invalid_blocks", maxViewBlocks)
	state := map[string]any{}
	for _, b := range bs {
		if b.Type != "input" || b.Element == nil {
			continue
		}
		var el inputElement
		if err := json.Unmarshal(b.Element, &el); err != nil {
			return nil, fmt.Errorf("slackemu: SubmitViewInputs: block %s: %v", b.BlockID, err)
		}
		given, ok := values[b.BlockID]
		entry, err := el.state(given, ok)
		if err != nil {
			return nil, fmt.Errorf("slackemu: SubmitViewInputs: block %s: %v", b.BlockID, err)
		}
		state[b.BlockID] = map[string]any{el.ActionID: entry}
	}
	for id := range values {
		if _, ok := state[id]; !ok {
			return nil, fmt.Errorf("slackemu: SubmitViewInputs: view %s has no input block %q", viewID, id)
		}
	}
	return s.submitStateLocked(team, user, v, state), nil
}

// inputElement is an input block's element, as far as its state needs.
type inputElement struct {
	Type           string            `json:"type"`
	ActionID       string            `json:"action_id"`
	InitialValue   string            `json:"initial_value"`
	InitialDate    string            `json:"initial_date"`
	InitialOption  json.RawMessage   `json:"initial_option"`
	InitialOptions []json.RawMessage `json:"initial_options"`
	Options        []json.RawMessage `json:"options"`
}

type optionValue struct {
	Value string `json:"value"`
}

// option finds the element's option with value v.
func (el inputElement) option(v string) (json.RawMessage, error) {
	for _, o := range el.Options {
		var ov optionValue
		if json.Unmarshal(o, &ov) == nil && ov.Value == v {
			return o, nil
		}
	}
	return nil, fmt.Errorf("no option with value %q", v)
}

// state renders the element's entry in view.state.values.
func (el inputElement) state(given any, ok bool) (map[string]any, error) {
	entry := map[string]any{"type": el.Type}
	str := func() (string, error) {
		s, isStr := given.(string)
		if !isStr {
			return "", fmt.Errorf("%s takes a string, got %T", el.Type, given)
		}
		return s, nil
	}
	list := func() ([]string, error) {
		l, isList := given.([]string)
		if !isList {
			return nil, fmt.Errorf("%s takes []string, got %T", el.Type, given)
		}
		return l, nil
	}
	switch el.Type {
	case "datepicker":
		d := el.InitialDate
		if ok {
			var err error
			if d, err = str(); err != nil {
				return nil, err
			}
		}
		entry["selected_date"] = nullable(d)
	case "static_select", "radio_buttons":
		var sel any
		if len(el.InitialOption) > 0 && string(el.InitialOption) != "null" {
			sel = el.InitialOption
		}
		if ok {
			v, err := str()
			if err != nil {
				return nil, err
			}
			sel = nil
			if v != "" {
				o, err := el.option(v)
				if err != nil {
					return nil, err
				}
				sel = o
			}
		}
		entry["selected_option"] = sel
	case "multi_static_select", "checkboxes":
		sel := []json.RawMessage{}
		sel = append(sel, el.InitialOptions...)
		if ok {
			vs, err := list()
			if err != nil {
				return nil, err
			}
			sel = sel[:0]
			for _, v := range vs {
				o, err := el.option(v)
				if err != nil {
					return nil, err
				}
				sel = append(sel, o)
			}
		}
		entry["selected_options"] = sel
	default: // plain_text_input, number_input, email_text_input, url_text_input
		val := el.InitialValue
		if ok {
			var err error
			if val, err = str(); err != nil {
				return nil, err
			}
		}
		entry["value"] = nullable(val)
	}
	return entry, nil
}

// nullable is Slack's null for an empty input.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
