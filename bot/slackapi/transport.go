package slackapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// The one path of every Web API call: Client.Do asks the governor for
// budget, then runs the call with the workspace's client; the transport
// under every client records the outcome (status, 429s) and governs any
// request that reached it without a grant.

// Live-reply pools: a streaming reply shows partial text only while it
// holds a slot, and a slot is given only when the budget of the reply's
// final call (cover) has room for it (session.SlotRequest).
const (
	PoolEdit   = "live"        // edit mode: the final edit is a chat.update
	PoolNative = "live-native" // native streams end with chat.stopStream
)

var LivePools = [...]struct{ Pool, Cover string }{
	{PoolEdit, "chat.update"},
	{PoolNative, "chat.stopStream"},
}

// IsRateLimited reports whether err is Slack's rate limit (429 with or
// without Retry-After, or a "ratelimited" error code).
func IsRateLimited(err error) bool {
	if err == nil {
		return false
	}
	var rl *slack.RateLimitedError
	var sc slack.StatusCodeError
	var se slack.SlackErrorResponse
	return errors.As(err, &rl) || errors.As(err, &sc) && sc.Code == http.StatusTooManyRequests ||
		errors.As(err, &se) && se.Err == "ratelimited"
}

// IsDropped reports whether err is the governor declining a lossy call.
func IsDropped(err error) bool {
	return errors.Is(err, ErrDropped) || errors.Is(err, ErrMerged) || errors.Is(err, ErrNoSlot)
}

// Transport is the HTTP transport of every Slack client.
type Transport struct {
	next http.RoundTripper
	gov  *Governor
	m    *Metrics
}

// NewTransport is the transport of every Slack client: it sends through
// next, records each call's outcome in m and governs through gov any
// request that reached it without a grant (slack-go's own calls).
func NewTransport(next http.RoundTripper, gov *Governor, m *Metrics) Transport {
	return Transport{next: next, gov: gov, m: m}
}

// RoundTrip sends r and records its outcome.
func (t Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	method := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	if strings.Contains(r.URL.Path, "/upload/") {
		// An upload URL ends in its ticket, not a method name.
		method = FilesUploadBytes
	}
	g, _ := r.Context().Value(grantKey{}).(*Grant)
	team, channel := AppScope, ""
	if g != nil {
		team, channel = g.team, g.channel
	}
	if !g.take(method) {
		// Not paid for by Client.Do: slack-go's own calls
		// (apps.connections.open) and auth.test at start-up.
		t.gov.noteUngoverned(method)
		if channel == "" {
			channel = formChannel(r)
		}
		own, err := t.gov.Acquire(r.Context(), Call{Team: team, Method: method, Channel: channel, Prio: Must})
		if err != nil {
			return nil, err
		}
		g = own
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		t.m.SlackCalls.WithLabelValues(method, "error").Inc()
		return nil, err
	}
	// Slack's answer is the latest the request can have reached it: the
	// call's lateness (governor_lag.go). A request with no answer stays
	// followed: it may still arrive.
	t.gov.answered(g, time.Now())
	status := responseStatus(resp)
	t.m.SlackCalls.WithLabelValues(method, status).Inc()
	if status == "ratelimited" {
		t.m.RateLimited.WithLabelValues(method).Inc()
		t.gov.throttled(r.Context(), team, method, channel, retryAfter(resp))
	}
	return resp, nil
}

// responseStatus is "ok" or Slack's error code ("ratelimited" for a 429,
// "http_NNN" for another HTTP failure). It reads the JSON body and puts it
// back for slack-go.
func responseStatus(resp *http.Response) string {
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusTooManyRequests:
		return "ratelimited"
	default:
		return "http_" + strconv.Itoa(resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return "ok"
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if err != nil {
		return "error"
	}
	var body struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &body) != nil {
		return "bad_json"
	}
	if body.OK {
		return "ok"
	}
	return errorLabel(body.Error)
}

// errorLabel keeps the status label a Slack error code (snake case, short)
// so the label set stays small.
func errorLabel(code string) string {
	if code == "" || len(code) > 48 {
		return "other"
	}
	for i := 0; i < len(code); i++ {
		if c := code[i]; !(c >= 'a' && c <= 'z' || c == '_' || c >= '0' && c <= '9') {
			return "other"
		}
	}
	return code
}

// retryAfter reads Retry-After (seconds); without it Slack still means
// "not now": wait a second.
func retryAfter(resp *http.Response) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return time.Second
}

// formChannel reads the channel argument of a form-encoded request
// without consuming its body (GetBody gives a fresh copy).
func formChannel(r *http.Request) string {
	if r.GetBody == nil || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return ""
	}
	body, err := r.GetBody()
	if err != nil {
		return ""
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, 1<<20))
	if err != nil {
		return ""
	}
	v, err := url.ParseQuery(string(data))
	if err != nil {
		return ""
	}
	return v.Get("channel")
}
