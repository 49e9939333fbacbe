package slackemu

import (
	"encoding/base64"
	"strconv"
	"strings"
)

// conversations.replies: a thread, parent first, with Slack's cursor
// pagination (cursor, limit, has_more, response_metadata.next_cursor),
// oldest/latest/inclusive, history scopes per channel type, and the
// non-Marketplace limits (Options.NonMarketplace: 15 messages a page).
//
// Unverified details, chosen so a careful client works either way: the
// parent comes first on the first page only; oldest/latest filter the
// replies, never the parent; a deleted parent with replies is Slack's
// tombstone.

// repliesCursor encodes where the next page starts, the way Slack's
// cursors look ("bmV4dF90czo…" = base64 "next_ts:<ts>").
func repliesCursor(ts string) string {
	return base64.StdEncoding.EncodeToString([]byte("next_ts:" + ts))
}

func parseRepliesCursor(c string) (string, bool) {
	b, err := base64.StdEncoding.DecodeString(c)
	if err != nil {
		return "", false
	}
	ts, ok := strings.CutPrefix(string(b), "next_ts:")
	return ts, ok && tsRE.MatchString(ts)
}

func (s *Server) conversationsReplies(r *request) (map[string]any, error) {
	ch := s.channelOfLocked(r, "channel")
	if ch == nil {
		return nil, apiError("channel_not_found")
	}
	if err := r.needScope(historyScope(ch)); err != nil {
		return nil, err
	}
	if !ch.IsIM() && !ch.BotMember && r.tok != nil && r.tok.kind == "bot" {
		return nil, apiError("not_in_channel")
	}
	ts := r.str("ts")
	if ts == "" {
		return nil, apiError("invalid_arguments")
	}
	if m := s.msgs[msgKey(ch.ID, ts)]; m != nil && m.ThreadTS != "" && m.ThreadTS != ts {
		ts = m.ThreadTS // any reply's ts names its thread
	}
	oldest, latest := r.str("oldest"), r.str("latest")
	if oldest != "" && !tsArg(oldest) {
		return nil, apiError("invalid_ts_oldest")
	}
	if latest != "" && !tsArg(latest) {
		return nil, apiError("invalid_ts_latest")
	}
	inclusive := false
	if b := r.boolArg("inclusive"); b != nil {
		inclusive = *b
	}
	maxLimit := 1000
	if s.nonMarketplaceLocked(r) {
		maxLimit = nonMarketplaceRepliesPage
	}
	limit := maxLimit
	if n, err := strconv.Atoi(r.str("limit")); err == nil && n > 0 {
		limit = min(n, maxLimit)
	}
	start := ""
	if c := r.str("cursor"); c != "" {
		var ok bool
		if start, ok = parseRepliesCursor(c); !ok {
			return nil, apiError("invalid_cursor")
		}
	}

	parent := s.msgs[msgKey(ch.ID, ts)]
	var thread []map[string]any
	var tss []string
	replies := 0
	for _, m := range s.order[ch.ID] {
		if m.Deleted || m.ThreadTS != ts || m.TS == ts {
			continue
		}
		replies++
		if !inRange(m.TS, oldest, latest, inclusive) {
			continue
		}
		thread = append(thread, s.replyJSONLocked(m, r))
		tss = append(tss, m.TS)
	}
	switch {
	case parent == nil || (parent.Deleted && replies == 0):
		return nil, apiError("thread_not_found")
	case parent.Deleted:
		thread = append([]map[string]any{tombstone(parent, replies)}, thread...)
	default:
		thread = append([]map[string]any{s.replyJSONLocked(parent, r)}, thread...)
	}
	tss = append([]string{parent.TS}, tss...)

	from := 0
	if start != "" {
		from = len(tss)
		for i, t := range tss {
			if !tsLess(t, start) {
				from = i
				break
			}
		}
	}
	end := min(from+limit, len(thread))
	page := make([]any, 0, end-from)
	for _, m := range thread[from:end] {
		page = append(page, m)
	}
	next := ""
	if end < len(thread) {
		next = repliesCursor(tss[end])
	}
	return map[string]any{"messages": page, "has_more": next != "", "response_metadata": map[string]any{"next_cursor": next}}, nil
}

// tsArg accepts Slack's timestamp arguments: "1700000000.000100" or whole
// seconds.
func tsArg(v string) bool {
	if tsRE.MatchString(v) {
		return true
	}
	_, err := strconv.ParseInt(v, 10, 64)
	return err == nil
}

// normTS writes a timestamp argument as "%d.%06d" for comparisons.
func normTS(v string) string {
	if strings.Contains(v, ".") {
		return v
	}
	return v + ".000000"
}

func inRange(ts, oldest, latest string, inclusive bool) bool {
	if oldest != "" {
		o := normTS(oldest)
		if tsLess(ts, o) || (ts == o && !inclusive) {
			return false
		}
	}
	if latest != "" {
		l := normTS(latest)
		if tsLess(l, ts) || (ts == l && !inclusive) {
			return false
		}
	}
	return true
}

// replyJSONLocked is a message as conversations.replies shows it:
// metadata only with include_all_metadata.
func (s *Server) replyJSONLocked(m *Message, r *request) map[string]any {
	out := s.messageJSONLocked(m)
	if b := r.boolArg("include_all_metadata"); b == nil || !*b {
		delete(out, "metadata")
	}
	return out
}

// tombstone is what Slack shows for a deleted parent that has replies.
func tombstone(m *Message, replies int) map[string]any {
	return map[string]any{
		"type": "message", "subtype": "tombstone", "hidden": true, "text": "This message was deleted.",
		"user": "USLACKBOT", "ts": m.TS, "thread_ts": m.TS, "reply_count": replies,
	}
}
