package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"golang.org/x/sync/singleflight"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot/internal/flight"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// slack_search: a built-in tool that searches the workspace as the person
// who asked, with Slack's Real-time Search API (assistant.search.context;
// slack-agents-2026.md §6). A bot-token call needs the action_token Slack
// puts on the person's app_mention or message event: Slack then answers
// with what that person may see, narrowed by where they asked (in a public
// channel, public channels only), so nobody is shown results they could
// not see themselves. Slack forbids storing or copying the results, so
// nothing is indexed, and a search's results are the model's for the
// turn that made them only (agent.TurnOnly): the transcript in Redis
// keeps a placeholder naming the query and the number of results, and a
// later turn searches again. The tool is read-only and trusted: like a
// read-only tool of a trusted MCP server, it runs without an approval
// prompt (and is audited like any tool, by a digest of its arguments,
// never its results). It is offered only when the event carried an
// action_token and the workspace has the API (assistant.search.info,
// asked once and remembered a while); without the API or the scope
// (search:read.public, optional in manifest.yaml) it is simply absent.

const (
	searchToolName = "slack_search"
	// searchScope is the optional bot scope slack_search needs.
	searchScope = "search:read.public"
	// searchInfoTTL is how long a workspace's answer to
	// assistant.search.info is reused; searchDownTTL how long a workspace
	// whose search failed for want of the API or scope goes without.
	searchInfoTTL = 10 * time.Minute
	searchDownTTL = time.Hour
	// searchLocalTTL is how long a replica keeps an answer it read from
	// Redis (another replica asked Slack).
	searchLocalTTL = time.Minute
	// searchWait bounds a search (budget wait and call).
	searchWait = 15 * time.Second
	// searchSnippet bounds one result's text.
	searchSnippet = 400
)

// searchUnavailable are the errors that mean the workspace (or the app's
// token) cannot search at all.
var searchUnavailable = []string{
	"feature_not_enabled", "assistant_search_context_disabled", "missing_scope",
	"not_allowed_token_type", "no_permission", "access_denied", "team_access_not_granted",
}

// searchAvail remembers, per workspace, whether the search API answers.
type searchAvail struct {
	mu sync.Mutex
	m  map[string]searchAvailEntry
	// asking makes turns starting together ask Slack once per workspace.
	asking singleflight.Group
}

type searchAvailEntry struct {
	ok    bool
	until time.Time
}

func (s *searchAvail) get(team string) (ok, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, found := s.m[team]
	if !found || time.Now().After(e.until) {
		return false, false
	}
	return e.ok, true
}

func (s *searchAvail) set(team string, ok bool, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]searchAvailEntry{}
	}
	if len(s.m) > 10000 {
		clear(s.m)
	}
	s.m[team] = searchAvailEntry{ok: ok, until: time.Now().Add(ttl)}
}

// withSlackSearch adds slack_search to a turn's tools when the person's
// event carried an action_token and the workspace has the search API.
func (b *Bot) withSlackSearch(ctx context.Context, k session.ThreadKey, who inbound, tools []agent.Tool) []agent.Tool {
	if who.ActionToken == "" || who.User == "" || !b.searchAvailable(ctx, k.Team) {
		return tools
	}
	for _, t := range tools {
		if t.Spec().Name == searchToolName {
			return tools // a server's tool of that name wins; never two
		}
	}
	return append(tools, &searchTool{b: b, team: k.Team, user: who.User, channel: k.Channel, token: who.ActionToken})
}

// searchStore shares the workspaces' answers to assistant.search.info
// between replicas (*session.Store).
type searchStore interface {
	CachedSearchInfo(ctx context.Context, team string) (enabled, known bool, err error)
	CacheSearchInfo(ctx context.Context, team string, enabled bool, ttl time.Duration) error
}

// searchAvailable asks assistant.search.info once in a while: this
// process remembers the answer, and so does Redis for every replica (a
// replica that has not asked yet reads it rather than wait for the
// method's small Tier 2 budget, which another replica just spent).
func (b *Bot) searchAvailable(ctx context.Context, team string) bool {
	if ok, known := b.search.get(team); known {
		return ok
	}
	// An installation knows its scopes: without the optional one, no
	// need to ask Slack.
	if scopes, err := b.ws.Scopes(ctx, team); err == nil {
		if len(scopes) > 0 && !slices.Contains(scopes, searchScope) {
			b.search.set(team, false, searchInfoTTL)
			return false
		}
	}
	if ok, known, err := b.store.CachedSearchInfo(ctx, team); err == nil && known {
		// Remembered here for a short while only: the shared answer
		// expires on its own clock.
		b.search.set(team, ok, searchLocalTTL)
		return ok
	}
	// Shared by the turns asking at once; each asker stops waiting at its
	// own deadline.
	ok, _ := flight.Do(ctx, &b.search.asking, team, 2*time.Second, func(ictx context.Context) (bool, error) {
		return b.askSearchInfo(ictx, team), nil
	})
	return ok
}

// askSearchInfo asks assistant.search.info and remembers the answer.
func (b *Bot) askSearchInfo(ictx context.Context, team string) bool {
	var resp struct {
		OK      bool   `json:"ok"`
		Error   string `json:"error"`
		Enabled *bool  `json:"is_ai_search_enabled"`
	}
	// Must, within ictx's bound: a lossy call would leave a token of the
	// small Tier 2 budget unspent for must-deliver calls this method
	// never has, and a second replica asking at the same moment would
	// wait a whole interval for it.
	err := b.slack.Do(ictx, slackapi.Call{Team: team, Method: slackapi.AssistantSearchInfo}, func(ctx context.Context, _ *slack.Client) error {
		return b.rawCall(ctx, team, slackapi.AssistantSearchInfo, url.Values{}, &resp)
	})
	switch {
	case err == nil && resp.OK:
		ok := resp.Enabled == nil || *resp.Enabled
		b.rememberSearch(ictx, team, ok, searchInfoTTL)
		return ok
	case err == nil && slices.Contains(searchUnavailable, resp.Error):
		b.rememberSearch(ictx, team, false, searchDownTTL)
		b.log.Info("bot: Slack search is not available in the workspace; slack_search is not offered", "team", team, "error", resp.Error)
		return false
	}
	// Unknown (a timeout, a rate limit): not offered this turn, asked again next.
	b.log.Debug("bot: cannot tell whether Slack search is available", "team", team, "err", err, "error", resp.Error)
	return false
}

// rememberSearch keeps a workspace's answer in this process and, for the
// other replicas, in Redis (without it, each replica asks Slack itself).
func (b *Bot) rememberSearch(ctx context.Context, team string, ok bool, ttl time.Duration) {
	b.search.set(team, ok, ttl)
	if err := b.store.CacheSearchInfo(context.WithoutCancel(ctx), team, ok, ttl); err != nil {
		b.log.Debug("bot: sharing whether Slack search is available failed", "team", team, "err", err)
	}
}

// rawCall posts a Web API method slack-go has no call for, with the
// workspace's token, through the governed HTTP client (ctx carries the
// governor's grant: call it inside slackapi.Client.Do).
func (b *Bot) rawCall(ctx context.Context, team, method string, form url.Values, out any) error {
	token, err := b.ws.Token(ctx, team)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.opts.APIURL+method, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := b.httpc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return &slack.RateLimitedError{RetryAfter: time.Duration(ra) * time.Second}
	}
	if resp.StatusCode != http.StatusOK {
		return slack.StatusCodeError{Code: resp.StatusCode, Status: resp.Status}
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(out); err != nil {
		return fmt.Errorf("%s: decoding the answer: %w", method, err)
	}
	return nil
}

// searchTool is slack_search for one turn: as the person whose event
// carried the action token.
type searchTool struct {
	b                          *Bot
	team, user, channel, token string
}

var searchSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"query":{"type":"string","description":"Keywords to search for (plain words, no Slack formatting)."},` +
	`"channel_types":{"type":"array","items":{"type":"string","enum":["public_channel","private_channel","mpim","im"]},` +
	`"description":"Kinds of conversations to search (default public_channel). Slack limits what is searched to what the asking person may see, and to public channels when asked in a public channel."},` +
	`"after":{"type":"string","description":"Only messages on or after this day (YYYY-MM-DD, UTC)."},` +
	`"before":{"type":"string","description":"Only messages before this day (YYYY-MM-DD, UTC)."},` +
	`"limit":{"type":"integer","minimum":1,"maximum":20,"description":"How many messages (default 10, at most 20)."}` +
	`},"required":["query"],"additionalProperties":false}`)

func (t *searchTool) Spec() provider.ToolSpec {
	return provider.ToolSpec{
		Name: searchToolName,
		Description: "Search this Slack workspace's messages as the person who asked you (only what they may see). " +
			"Returns the matching messages, newest first, each with author, channel, time and a permalink; " +
			"cite the permalinks in your answer as Markdown links.",
		InputSchema: searchSchema,
	}
}

// Hints: read-only and trusted, so it runs without a prompt unless the
// policy says otherwise.
func (t *searchTool) Hints() agent.Hints {
	return agent.Hints{Server: "slack", Tool: "search", Title: "Search Slack", ReadOnly: true, Idempotent: true, Trusted: true}
}

type searchArgs struct {
	Query        string   `json:"query"`
	ChannelTypes []string `json:"channel_types"`
	After        string   `json:"after"`
	Before       string   `json:"before"`
	Limit        int      `json:"limit"`
}

// searchQueryStrip removes Slack formatting from a query (Slack asks
// apps to send plain words).
var searchQueryStrip = strings.NewReplacer("*", " ", "_", " ", "~", " ", "`", " ", "<", " ", ">", " ")

func (t *searchTool) Call(ctx context.Context, input json.RawMessage) (string, error) {
	var a searchArgs
	if err := json.Unmarshal(input, &a); err != nil {
		return "", fmt.Errorf("slack_search: the arguments are not valid: %w", err)
	}
	q := strings.Join(strings.Fields(searchQueryStrip.Replace(a.Query)), " ")
	if q == "" {
		return "", errors.New("slack_search: query is empty")
	}
	p := slack.AssistantSearchContextParameters{Query: q, ActionToken: t.token, Limit: 10, Sort: "timestamp", SortDir: "desc"}
	if a.Limit > 0 {
		p.Limit = min(a.Limit, 20)
	}
	for _, ct := range a.ChannelTypes {
		switch ct {
		case "public_channel", "private_channel", "mpim", "im":
			if !slices.Contains(p.ChannelTypes, ct) {
				p.ChannelTypes = append(p.ChannelTypes, ct)
			}
		default:
			return "", fmt.Errorf("slack_search: unknown channel type %q (public_channel, private_channel, mpim or im)", ct)
		}
	}
	var err error
	if p.After, err = searchDay(a.After); err != nil {
		return "", err
	}
	if p.Before, err = searchDay(a.Before); err != nil {
		return "", err
	}
	sctx, cancel := context.WithTimeout(ctx, searchWait)
	defer cancel()
	var resp *slack.AssistantSearchContextResponse
	err = t.b.slack.Do(sctx, slackapi.Call{Team: t.team, Method: slackapi.AssistantSearchContext, Prio: slackapi.Lossy, Wait: searchWait / 2}, func(ctx context.Context, api *slack.Client) error {
		var err error
		resp, err = api.SearchAssistantContextContext(ctx, p)
		return err
	})
	if err != nil {
		return t.failure(err)
	}
	if n := len(resp.Results.Messages); n > 0 {
		// Slack's terms: results are not stored (slack-agents-2026.md §6).
		agent.TurnOnly(ctx, searchPlaceholder(q, n))
	}
	return t.render(q, resp.Results.Messages), nil
}

// searchPlaceholder is what the transcript keeps of a search's results.
func searchPlaceholder(q string, n int) string {
	return fmt.Sprintf("[Slack search results are not kept after the turn, per Slack's terms: %d results for %q; search again if needed]", n, q)
}

// failure is what the model is told when the search failed: plain words
// it can pass on. The workspace's lack of the API is remembered, so the
// next turns go without the tool.
func (t *searchTool) failure(err error) (string, error) {
	var se slack.SlackErrorResponse
	code := ""
	if errors.As(err, &se) {
		code = se.Err
	}
	switch {
	case slices.Contains(searchUnavailable, code):
		t.b.search.set(t.team, false, searchDownTTL)
		return "", searchFailure("Slack search is not available in this workspace (Slack's Real-time Search API is not enabled for it, " +
			"or the app was installed without the search:read.public scope), so nothing was searched. Say so plainly.")
	case code == "invalid_action_token":
		return "", searchFailure("Slack no longer accepts this search on the person's behalf (its permission from their message expired). " +
			"Nothing was searched; they can mention you again to search.")
	case slackapi.IsRateLimited(err) || slackapi.IsDropped(err):
		return "", searchFailure("Slack search is busy (rate limited); nothing was searched. Try once more later or answer without it.")
	case code != "":
		return "", searchFailure("Slack search failed: " + code)
	}
	t.b.log.Warn("bot: slack_search failed", "team", t.team, "err", err)
	return "", searchFailure("Slack search failed (Slack did not answer); nothing was searched")
}

// searchFailure is a failed search in words for the model (who passes
// them on), not a Go error message.
type searchFailure string

func (f searchFailure) Error() string { return string(f) }

// render lists results as compact, citable snippets.
func (t *searchTool) render(q string, msgs []slack.AssistantSearchContextMessage) string {
	var s strings.Builder
	if len(msgs) == 0 {
		fmt.Fprintf(&s, "No Slack messages found for %q (searched as <@%s>, only what they can see).", q, t.user)
		return s.String()
	}
	fmt.Fprintf(&s, "%d Slack messages for %q, newest first (searched as <@%s>, only what they can see). Cite them by permalink.\n", len(msgs), q, t.user)
	for i, m := range msgs {
		who := oneLineName(cmp0(m.AuthorName, m.AuthorUserID, "someone"))
		if m.AuthorUserID != "" && m.AuthorName != "" {
			who += " (" + m.AuthorUserID + ")"
		}
		if m.IsAuthorBot {
			who += " [app]"
		}
		where := m.ChannelID
		if m.ChannelName != "" {
			where = "#" + oneLineName(m.ChannelName)
		}
		when := ""
		if tm := tsTime(m.MessageTS); !tm.IsZero() {
			when = tm.UTC().Format("2006-01-02 15:04 UTC")
		}
		text := strings.Join(strings.Fields(slackText(m.Content)), " ")
		if r := []rune(text); len(r) > searchSnippet {
			text = string(r[:searchSnippet]) + "…"
		}
		fmt.Fprintf(&s, "%d. %s · %s · %s · %s\n   %s\n", i+1, where, who, when, m.Permalink, text)
	}
	return strings.TrimRight(s.String(), "\n")
}

// searchDay reads a YYYY-MM-DD day (or UNIX seconds) as UNIX seconds.
func searchDay(v string) (int64, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
		return n, nil
	}
	for _, layout := range []string{"2006-01-02", time.RFC3339} {
		if tm, err := time.Parse(layout, v); err == nil {
			return tm.Unix(), nil
		}
	}
	return 0, fmt.Errorf("slack_search: %q is not a day (YYYY-MM-DD)", v)
}
