package slackemu

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Leaks reports every place where the app sent needle to Slack: Web API
// and response_url arguments (journal), every version of every message,
// ephemeral messages, views (home views included), assistant statuses,
// files the app uploaded and ack payloads. Use it
// with canary secrets; an empty result means the app never showed needle.
// (What Slack sent to the app, such as a user's modal input, is not
// searched.)
func (s *Server) Leaks(needle string) []string {
	if needle == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	has := func(v any) bool {
		switch x := v.(type) {
		case string:
			return strings.Contains(x, needle)
		case json.RawMessage:
			return strings.Contains(string(x), needle) || strings.Contains(unquoteJSON(x), needle)
		}
		b, _ := json.Marshal(v)
		return strings.Contains(string(b), needle) || strings.Contains(unquoteJSON(b), needle)
	}
	for i, c := range s.journal {
		if has(c.Params) {
			out = append(out, fmt.Sprintf("journal[%d] %s", i, c.Method))
		}
	}
	for _, ms := range s.order {
		for _, m := range ms {
			if m.Via == "user" {
				continue
			}
			for i, v := range m.History {
				if has(v.Text) || has(v.MarkdownText) || has(v.Blocks) {
					out = append(out, fmt.Sprintf("message %s/%s version %d", m.Channel, m.TS, i))
				}
			}
			if has(m.Metadata) || has(m.Chunks) {
				out = append(out, fmt.Sprintf("message %s/%s metadata/chunks", m.Channel, m.TS))
			}
		}
	}
	for user, es := range s.ephemerals {
		for _, e := range es {
			if has(e.Text) || has(e.Markdown) || has(e.Blocks) {
				out = append(out, fmt.Sprintf("ephemeral to %s %s/%s", user, e.Channel, e.TS))
			}
		}
	}
	for id, v := range s.views {
		if has(v.Raw) {
			out = append(out, "view "+id)
		}
	}
	for i, st := range s.statuses {
		if has(st.Status) || has(st.Loading) || has(st.Title) || has(st.Prompts) {
			out = append(out, fmt.Sprintf("assistant status %d", i))
		}
	}
	for _, f := range s.fileOrder {
		if f.byApp && (has(string(f.Content)) || has(f.Name) || has(f.Title)) {
			out = append(out, "file uploaded by the app "+f.ID)
		}
	}
	for _, e := range s.envOrder {
		if has(e.AckPayload) {
			out = append(out, "ack payload of "+e.ID)
		}
	}
	return out
}

// unquoteJSON undoes JSON string escaping so "<"-style escapes (\u003c)
// do not hide a needle.
func unquoteJSON(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	var sb strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			sb.WriteString(x)
			sb.WriteByte(0)
		case map[string]any:
			for k, e := range x {
				sb.WriteString(k)
				sb.WriteByte(0)
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return sb.String()
}
