package slackemu

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Slack as context (reference: slack-agents-2026.md §6 and §9): the
// Real-time Search API (assistant.search.context with action tokens and
// per-person visibility, assistant.search.info), conversations.history,
// and the non-Marketplace history limits per workspace.
//
// Unconfirmed details, chosen so a careful client works either way:
// an action_token lives Options.ActionTokenTTL (default 5 min × TimeScale)
// and is good for the person and workspace of its event only; a missing
// action_token on a bot-token call answers invalid_action_token; limit
// above 20 answers invalid_arguments; a query over 500 characters
// answers query_too_long; matching is case-insensitive on every word of
// the query (no semantic search); "score" sorts like "timestamp"
// (newest first); only message results are produced (files, channels,
// users come back empty).

// searchState is the Slack-as-context state of a Server.
type searchState struct {
	tokens    map[string]*actionToken
	order     []string          // token values, oldest first
	disabled  map[string]string // team → error code
	nonMarket map[string]bool   // team → non-Marketplace limits
	log       []Search
}

type actionToken struct {
	team, user, channel, eventTS string
	expires                      time.Time
}

// maxActionTokens bounds the action tokens remembered (oldest forgotten).
const maxActionTokens = 10000

func (s *Server) searchLocked() *searchState {
	if s.search == nil {
		s.search = &searchState{tokens: map[string]*actionToken{}, disabled: map[string]string{}, nonMarket: map[string]bool{}}
	}
	return s.search
}

// actionTokenLocked issues the action_token of an event by user in
// channel.
func (s *Server) actionTokenLocked(team, user, channel, eventTS string) string {
	st := s.searchLocked()
	// Shaped like Slack's ("10647138185092.960436384805.afce3599").
	v := fmt.Sprintf("%d.%d.%08x", 1e13+s.rng.Int64N(9e13), 1e11+s.rng.Int64N(9e11), s.rng.Uint32())
	st.tokens[v] = &actionToken{team: team, user: user, channel: channel, eventTS: eventTS, expires: time.Now().Add(s.opts.ActionTokenTTL)}
	st.order = append(st.order, v)
	if len(st.order) > maxActionTokens {
		n := len(st.order) - maxActionTokens
		for _, k := range st.order[:n] {
			delete(st.tokens, k)
		}
		clear(st.order[:n])
		st.order = st.order[n:]
	}
	return v
}

// addActionTokenLocked puts an action_token on a person's app_mention or
// message event where Slack does: app_mention, and message events in
// DMs, group DMs and private channels, or in public channels when the
// message mentions the bot. A DM thread reply also carries it as
// assistant_thread.action_token, as older payloads do (Slack's Bolt
// fixtures); the top-level field is the documented one.
func (s *Server) addActionTokenLocked(m *Message, typ string, ev map[string]any) {
	if m.BotID != "" || m.User == "" {
		return
	}
	c := s.channels[m.Channel]
	if typ == "message" && c != nil && !c.IsIM() && !c.Private {
		bot, _, _ := s.botIdentityLocked(m.Team)
		if !strings.Contains(m.Text, "<@"+bot+">") {
			return
		}
	}
	tok := s.actionTokenLocked(m.Team, m.User, m.Channel, m.TS)
	ev["action_token"] = tok
	if typ == "message" && c != nil && c.IsIM() && m.ThreadTS != "" {
		ev["assistant_thread"] = map[string]any{"action_token": tok}
	}
}

// ExpireActionToken makes an action token answer invalid_action_token.
func (s *Server) ExpireActionToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.searchLocked().tokens[token]; t != nil {
		t.expires = time.Time{}
	}
}

// SetSearchDisabled makes assistant.search.context answer code for
// team's tokens, as in a workspace without the Real-time Search API
// (e.g. "feature_not_enabled", "assistant_search_context_disabled");
// assistant.search.info then says is_ai_search_enabled false. "" turns
// it back on.
func (s *Server) SetSearchDisabled(team, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == "" {
		delete(s.searchLocked().disabled, team)
		return
	}
	s.searchLocked().disabled[team] = code
}

// SetNonMarketplaceTeam applies (or lifts) the non-Marketplace history
// limits for one workspace (Options.NonMarketplace applies them to all).
func (s *Server) SetNonMarketplaceTeam(team string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.searchLocked().nonMarket[team] = on
}

func (s *Server) nonMarketplaceLocked(r *request) bool {
	if s.opts.NonMarketplace {
		return true
	}
	return r.team != nil && s.search != nil && s.search.nonMarket[r.team.ID]
}

// Search is one assistant.search.context call that succeeded.
type Search struct {
	Time        time.Time
	Team        string
	User        string // the person searched as
	ActionToken string // "" with a user token
	Query       string
	// Channels are the channels of the results returned, in order.
	Channels []string
	// Results is the number of messages returned.
	Results int
}

// Searches returns the successful searches (capped by JournalLimit).
func (s *Server) Searches() []Search {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.search == nil {
		return nil
	}
	return slices.Clone(s.search.log)
}

// personSeesLocked reports whether user can read channel c: a DM with
// them, a private channel they are a member of, or a public channel of
// their workspace (guests: only channels they are a member of).
func (s *Server) personSeesLocked(user string, c *channelState) bool {
	if c.IsIM() {
		return c.IMUser == user
	}
	if slices.Contains(c.Members, user) {
		return true
	}
	if c.Private {
		return false
	}
	u := s.users[user]
	if u == nil || u.IsRestricted || u.IsUltraRestricted || u.Deleted {
		return false
	}
	return u.TeamID == c.team || s.rosters[c.team][user] && !u.IsStranger
}

// searchChannelType names a channel's kind as channel_types does.
func searchChannelType(c *channelState) string {
	switch {
	case c.IsIM():
		return "im"
	case c.Private:
		return "private_channel"
	}
	return "public_channel"
}

func (s *Server) assistantSearchContext(r *request) (map[string]any, error) {
	st := s.searchLocked()
	if code := st.disabled[r.team.ID]; code != "" {
		return nil, apiError(code)
	}
	query := strings.TrimSpace(r.str("query"))
	if query == "" {
		return nil, apiError("missing_query")
	}
	if runes(query) > 500 {
		return nil, apiError("query_too_long")
	}
	// Who searches, and from where.
	var person, origin, atok string
	if r.tok != nil && r.tok.kind == "user" {
		person = r.tok.user
	} else {
		atok = r.str("action_token")
		t := st.tokens[atok]
		if t == nil || t.team != r.team.ID || time.Now().After(t.expires) {
			return nil, apiError("invalid_action_token")
		}
		person, origin = t.user, t.channel
	}
	types, err := stringList(r, "channel_types")
	if err != nil {
		return nil, apiError("invalid_arguments")
	}
	if len(types) == 0 {
		types = []string{"public_channel"}
	}
	for _, t := range types {
		switch t {
		case "public_channel":
		case "private_channel", "mpim", "im":
			if r.tok != nil && r.tok.kind == "user" {
				if err := r.needScope(searchScopes[t]); err != nil {
					return nil, err
				}
			}
		default:
			return nil, apiError("invalid_arguments")
		}
	}
	if cc := r.str("context_channel_id"); cc != "" && !seesChannel(s.channels[cc], r.team.ID) {
		return nil, apiError("context_channel_not_found")
	}
	limit := 20
	if v := r.str("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 20 {
			return nil, apiError("invalid_arguments")
		}
		limit = n
	}
	after, before := int64(0), int64(0)
	if v := r.str("after"); v != "" {
		after, _ = strconv.ParseInt(v, 10, 64)
	}
	if v := r.str("before"); v != "" {
		before, _ = strconv.ParseInt(v, 10, 64)
	}
	offset := 0
	if c := r.str("cursor"); c != "" {
		b, decErr := base64.StdEncoding.DecodeString(c)
		n, ok := strings.CutPrefix(string(b), "offset:")
		var err error
		if offset, err = strconv.Atoi(n); decErr != nil || err != nil || !ok || offset < 0 {
			return nil, apiError("invalid_cursor")
		}
	}
	includeBots := false
	if b := r.boolArg("include_bots"); b != nil {
		includeBots = *b
	}

	// Channels searched: those the person sees, of the requested types,
	// narrowed by where a bot-token call was invoked.
	var oc *channelState
	if origin != "" {
		oc = s.channels[origin]
	}
	allowed := func(c *channelState) bool {
		if !seesChannel(c, r.team.ID) || !s.personSeesLocked(person, c) || !slices.Contains(types, searchChannelType(c)) {
			return false
		}
		if oc == nil {
			return true
		}
		if len(oc.SharedTeams) > 0 {
			return c.ID == oc.ID // Slack Connect: that channel only
		}
		if searchChannelType(oc) == "public_channel" {
			return searchChannelType(c) == "public_channel"
		}
		return c.ID == oc.ID || searchChannelType(c) == "public_channel"
	}
	words := strings.Fields(strings.ToLower(query))
	var hits []*Message
	for id, c := range s.channels {
		if !allowed(c) {
			continue
		}
		for _, m := range s.order[id] {
			if m.Deleted || (m.BotID != "" && !includeBots) {
				continue
			}
			sec, _ := strconv.ParseInt(strings.SplitN(m.TS, ".", 2)[0], 10, 64)
			if (after > 0 && sec < after) || (before > 0 && sec >= before) {
				continue
			}
			text := strings.ToLower(m.Visible())
			if !allWords(text, words) {
				continue
			}
			hits = append(hits, m)
		}
	}
	asc := r.str("sort_dir") == "asc"
	slices.SortFunc(hits, func(a, b *Message) int {
		c := strings.Compare(a.TS, b.TS)
		if len(a.TS) != len(b.TS) {
			c = len(a.TS) - len(b.TS)
		}
		if asc {
			return c
		}
		return -c
	})
	end := min(offset+limit, len(hits))
	offset = min(offset, end)
	msgs := []any{}
	rec := Search{Time: time.Now(), Team: r.team.ID, User: person, ActionToken: atok, Query: query}
	for _, m := range hits[offset:end] {
		c := s.channels[m.Channel]
		res := map[string]any{
			"author_user_id": m.User, "team_id": m.Team, "channel_id": m.Channel, "channel_name": c.Name,
			"message_ts": m.TS, "content": m.Visible(), "is_author_bot": m.BotID != "",
			"permalink": fmt.Sprintf("https://%s.slack.com/archives/%s/p%s", s.teams[c.team].Domain, m.Channel, strings.ReplaceAll(m.TS, ".", "")),
		}
		if u := s.users[m.User]; u != nil {
			res["author_name"] = u.RealName
		}
		if m.ThreadTS != "" {
			res["thread_ts"] = m.ThreadTS
		}
		if b := r.boolArg("include_message_blocks"); b != nil && *b && m.Blocks != nil {
			res["blocks"] = m.Blocks
		}
		msgs = append(msgs, res)
		rec.Channels = append(rec.Channels, m.Channel)
	}
	rec.Results = len(msgs)
	st.log = appendCapped(st.log, rec, s.opts.JournalLimit)
	next := ""
	if end < len(hits) {
		next = base64.StdEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(end)))
	}
	return map[string]any{
		"results":           map[string]any{"messages": msgs, "files": []any{}, "channels": []any{}, "users": []any{}},
		"response_metadata": map[string]any{"next_cursor": next},
	}, nil
}

// searchScopes are the user-token scopes of the private channel types.
var searchScopes = map[string]string{"private_channel": "search:read.private", "mpim": "search:read.mpim", "im": "search:read.im"}

func allWords(text string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(text, strings.Trim(w, `"'.,;:!?()`)) {
			return false
		}
	}
	return true
}

// stringList reads an argument that is a JSON array or a comma-separated
// list.
func stringList(r *request, k string) ([]string, error) {
	if r.body != nil {
		raw, ok := r.body[k]
		if !ok || string(raw) == "null" {
			return nil, nil
		}
		var list []string
		if json.Unmarshal(raw, &list) == nil {
			return list, nil
		}
	}
	v := r.str(k)
	if v == "" {
		return nil, nil
	}
	if strings.HasPrefix(v, "[") {
		var list []string
		err := json.Unmarshal([]byte(v), &list)
		return list, err
	}
	return strings.Split(v, ","), nil
}

func (s *Server) assistantSearchInfo(r *request) (map[string]any, error) {
	return map[string]any{"is_ai_search_enabled": s.searchLocked().disabled[r.team.ID] == ""}, nil
}

// conversationsHistory: a channel's top-level messages, newest first, with
// Slack's cursors, limit (default 100, max 1000; 15 and 15 for
// non-Marketplace apps), oldest/latest/inclusive and has_more.
func (s *Server) conversationsHistory(r *request) (map[string]any, error) {
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
	maxLimit, limit := 1000, 100
	if s.nonMarketplaceLocked(r) {
		maxLimit, limit = nonMarketplaceRepliesPage, nonMarketplaceRepliesPage
	}
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
	var list []*Message
	ord := s.order[ch.ID]
	for i := len(ord) - 1; i >= 0; i-- {
		m := ord[i]
		if m.Deleted || (m.ThreadTS != "" && m.ThreadTS != m.TS) {
			continue
		}
		if !inRange(m.TS, oldest, latest, inclusive) {
			continue
		}
		if start != "" && tsLess(start, m.TS) {
			continue // newer than the cursor
		}
		list = append(list, m)
	}
	end := min(limit, len(list))
	page := make([]any, 0, end)
	for _, m := range list[:end] {
		page = append(page, s.replyJSONLocked(m, r))
	}
	next := ""
	if end < len(list) {
		next = repliesCursor(list[end].TS)
	}
	return map[string]any{"messages": page, "has_more": next != "", "pin_count": 0, "response_metadata": map[string]any{"next_cursor": next}}, nil
}
