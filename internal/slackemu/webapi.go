package slackemu

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Call is one Web API call in the journal.
type Call struct {
	// Seq numbers the calls from 1 in the order they were journaled
	// (JournalSince reads on from one).
	Seq    uint64
	Time   time.Time
	Method string
	Team   string // "" when the token did not resolve
	// Params holds the arguments without the token: form values as
	// strings, JSON-in-form fields (blocks, chunks, metadata, view, …) and
	// JSON bodies decoded into Go values (map[string]any, []any, …).
	Params    map[string]any
	TokenKind string // "xoxb" (rotating xoxe.xoxb- too), "xoxp", "xapp", "" (missing) or "other"
	Status    int    // HTTP status
	OK        bool
	Error     string
}

// Fault is an injected failure or delay for a Web API method.
type Fault struct {
	// Times is how many calls it applies to (0 means 1, negative means
	// until ClearFaults).
	Times int
	// Error answers HTTP 200 {"ok":false,"error":Error}.
	Error string
	// Status answers that HTTP status (body {"ok":false,"error":Error or
	// "fatal_error"}); with 429 and RetryAfter > 0 it sets Retry-After.
	Status     int
	RetryAfter int
	// Latency delays the answer (alone: a slow but successful call).
	Latency time.Duration
}

// InjectFault queues f for method ("*" = any method). Faults of a method
// apply in the order injected, before the method-specific ones of "*".
func (s *Server) InjectFault(method string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Times == 0 {
		f.Times = 1
	}
	s.faults[method] = append(s.faults[method], &f)
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.faults)
}

// Journal returns a copy of every Web API call so far, in order.
func (s *Server) Journal() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.journal...)
}

// Calls returns the journal entries of one method.
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.journal {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// RateLimited returns the number of 429 answers per method.
func (s *Server) RateLimited() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.limited)
}

// apiError is a Slack {"ok":false,"error":…} answer.
type apiError string

func (e apiError) Error() string { return string(e) }

// request is a decoded Web API call.
type request struct {
	method string
	form   url.Values
	body   map[string]json.RawMessage // JSON body
	token  string
	tok    *tokenState // the bot or user token, once authenticated
	team   *teamState
	start  time.Time
	// HTTP Basic credentials (oauth.v2.access client authentication).
	basicUser, basicPass string
	hasBasic             bool
}

// isJSONField reports whether a form field carries JSON.
func isJSONField(k string) bool {
	switch k {
	case "blocks", "chunks", "metadata", "attachments", "view", "prompts", "unfurls", "user_auth_blocks":
		return true
	}
	return false
}

func (r *request) has(k string) bool {
	if r.body != nil {
		v, ok := r.body[k]
		return ok && string(v) != "null"
	}
	_, ok := r.form[k]
	return ok
}

// str returns a scalar argument as a string ("" when absent).
func (r *request) str(k string) string {
	if r.body != nil {
		v, ok := r.body[k]
		if !ok {
			return ""
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
		if string(v) == "null" {
			return ""
		}
		return string(v)
	}
	return r.form.Get(k)
}

// boolArg reads "true"/"1"/"false"/"0"; nil when absent.
func (r *request) boolArg(k string) *bool {
	if !r.has(k) {
		return nil
	}
	v := r.str(k)
	b := v == "true" || v == "1"
	return &b
}

// raw returns a JSON-valued argument (nil when absent or null); a form
// value must be valid JSON.
func (r *request) raw(k string) (json.RawMessage, error) {
	var v []byte
	if r.body != nil {
		v = r.body[k]
		// A JSON body may still carry the field as a JSON string.
		var s string
		if json.Unmarshal(v, &s) == nil && isJSONField(k) {
			v = []byte(s)
		}
	} else if r.form.Has(k) {
		v = []byte(r.form.Get(k))
	}
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return nil, nil
	}
	if !json.Valid(v) {
		return nil, apiError("invalid_json")
	}
	return json.RawMessage(v), nil
}

// secretParams are arguments the journal keeps only as "[redacted]"
// (OAuth client secrets and refresh credentials).
var secretParams = map[string]bool{"client_secret": true, "refresh_token": true, "code_verifier": true}

// journalParams renders the arguments for the journal, token removed and
// secrets redacted.
func (r *request) journalParams() map[string]any {
	out := map[string]any{}
	defer func() {
		for k := range out {
			if secretParams[k] {
				out[k] = "[redacted]"
			}
		}
	}()
	if r.body != nil {
		for k, v := range r.body {
			if k == "token" {
				continue
			}
			var x any
			_ = json.Unmarshal(v, &x)
			out[k] = x
		}
		return out
	}
	for k, vs := range r.form {
		if k == "token" || len(vs) == 0 {
			continue
		}
		if isJSONField(k) {
			var x any
			if json.Unmarshal([]byte(vs[0]), &x) == nil {
				out[k] = x
				continue
			}
		}
		out[k] = vs[0]
	}
	return out
}

func tokenKind(tok string) string {
	switch {
	case tok == "":
		return ""
	case strings.HasPrefix(tok, "xoxb-"), strings.HasPrefix(tok, "xoxe.xoxb-"):
		return "xoxb"
	case strings.HasPrefix(tok, "xoxp-"), strings.HasPrefix(tok, "xoxe.xoxp-"):
		return "xoxp"
	case strings.HasPrefix(tok, "xapp-"):
		return "xapp"
	}
	return "other"
}

type handlerFunc func(s *Server, r *request) (map[string]any, error)

// methods maps Web API method names to handlers (a fixed table, not state).
func methodTable() map[string]handlerFunc {
	return map[string]handlerFunc{
		"auth.test":                             (*Server).authTest,
		"apps.connections.open":                 (*Server).connectionsOpen,
		"chat.postMessage":                      (*Server).chatPostMessage,
		"chat.update":                           (*Server).chatUpdate,
		"chat.delete":                           (*Server).chatDelete,
		"chat.postEphemeral":                    (*Server).chatPostEphemeral,
		"chat.getPermalink":                     (*Server).chatGetPermalink,
		"chat.startStream":                      (*Server).chatStartStream,
		"chat.appendStream":                     (*Server).chatAppendStream,
		"chat.stopStream":                       (*Server).chatStopStream,
		"assistant.threads.setStatus":           (*Server).assistantSetStatus,
		"assistant.threads.setSuggestedPrompts": (*Server).assistantSetPrompts,
		"assistant.threads.setTitle":            (*Server).assistantSetTitle,
		"conversations.replies":                 (*Server).conversationsReplies,
		"conversations.history":                 (*Server).conversationsHistory,
		"agents.sessions.setStatus":             (*Server).agentsSessionsSetStatus,
		"agents.sessions.rename":                (*Server).agentsSessionsRename,
		"blocks.validate":                       (*Server).blocksValidate,
		"assistant.search.context":              (*Server).assistantSearchContext,
		"assistant.search.info":                 (*Server).assistantSearchInfo,
		"reactions.add":                         (*Server).reactionsAdd,
		"reactions.remove":                      (*Server).reactionsRemove,
		"conversations.info":                    (*Server).conversationsInfo,
		"users.info":                            (*Server).usersInfo,
		"team.info":                             (*Server).teamInfo,
		"views.open":                            (*Server).viewsOpen,
		"views.push":                            (*Server).viewsPush,
		"views.update":                          (*Server).viewsUpdate,
		"oauth.v2.access":                       (*Server).oauthAccess,
		"apps.event.authorizations.list":        (*Server).eventAuthorizationsList,
		"apps.uninstall":                        (*Server).appsUninstall,
		"auth.revoke":                           (*Server).authRevoke,
		"usergroups.users.list":                 (*Server).usergroupsUsersList,
		"files.info":                            (*Server).filesInfo,
		"views.publish":                         (*Server).viewsPublish,
		"files.getUploadURLExternal":            (*Server).filesGetUploadURLExternal,
		"files.completeUploadExternal":          (*Server).filesCompleteUploadExternal,
	}
}

func (s *Server) handleAPI(w http.ResponseWriter, hr *http.Request) {
	if !s.enter() {
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	defer s.tasks.Done()
	method := strings.TrimPrefix(hr.URL.Path, "/api/")
	r := &request{method: method, start: time.Now()}
	status, resp, retryAfter := s.serveAPI(hr, r)

	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(resp)
}

// serveAPI runs one call and journals it.
func (s *Server) serveAPI(hr *http.Request, r *request) (status int, resp map[string]any, retryAfter int) {
	decodeErr := s.decode(hr, r)

	s.mu.Lock()
	fault := s.takeFaultLocked(r.method)
	s.mu.Unlock()
	if fault != nil && fault.Latency > 0 {
		select {
		case <-time.After(fault.Latency):
		case <-hr.Context().Done():
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		c := Call{Time: r.start, Method: r.method, Params: r.journalParams(), TokenKind: tokenKind(r.token), Status: status}
		if r.team != nil {
			c.Team = r.team.ID
		}
		c.OK, _ = resp["ok"].(bool)
		c.Error, _ = resp["error"].(string)
		s.journalLocked(c)
		if status == http.StatusTooManyRequests {
			s.limited[r.method]++
		}
		s.log.Debug("slackemu: api call", "method", r.method, "team", c.Team, "status", status, "error", c.Error)
		s.changedLocked()
	}()
	if s.closed {
		return http.StatusServiceUnavailable, fail("service_unavailable"), 0
	}

	if fault != nil && (fault.Error != "" || fault.Status != 0) {
		st := fault.Status
		if st == 0 {
			st = http.StatusOK
		}
		e := fault.Error
		if e == "" {
			e = "fatal_error"
			if st == http.StatusTooManyRequests {
				e = "ratelimited"
			}
		}
		ra := 0
		if st == http.StatusTooManyRequests {
			ra = fault.RetryAfter
		}
		s.resolveTeamLocked(r)
		return st, fail(e), ra
	}
	if decodeErr != nil {
		return http.StatusOK, fail(decodeErr.Error()), 0
	}

	h, ok := s.methods[r.method]
	if !ok {
		s.resolveTeamLocked(r)
		return http.StatusOK, fail("unknown_method"), 0
	}
	// Slack takes GET (query arguments) as well as POST for every method;
	// slack-go uses GET only for chat.getPermalink.
	if err := s.authLocked(r); err != nil {
		return http.StatusOK, errResp(err), 0
	}
	if err := r.needScope(methodScopes[r.method]...); err != nil {
		return http.StatusOK, errResp(err), 0
	}
	if wait, limited := s.methodLimitLocked(r); limited {
		secs := max(1, int(math.Ceil(wait.Seconds())))
		return http.StatusTooManyRequests, fail("ratelimited"), secs
	}
	out, err := h(s, r)
	if err != nil {
		return http.StatusOK, errResp(err), 0
	}
	if out == nil {
		out = map[string]any{}
	}
	out["ok"] = true
	return http.StatusOK, out, 0
}

func fail(code string) map[string]any { return map[string]any{"ok": false, "error": code} }

// errResp renders a handler error, with the extra fields some errors
// carry (missing_scope: needed, provided).
func errResp(err error) map[string]any {
	resp := fail(err.Error())
	if fe, ok := err.(interface{ fields() map[string]any }); ok {
		maps.Copy(resp, fe.fields())
	}
	return resp
}

// decode reads the token and arguments from the query, form or JSON body.
func (s *Server) decode(hr *http.Request, r *request) error {
	if auth := hr.Header.Get("Authorization"); strings.HasPrefix(auth, "Bearer ") {
		r.token = strings.TrimSpace(strings.TrimPrefix(auth, "Bearer "))
	}
	r.basicUser, r.basicPass, r.hasBasic = hr.BasicAuth()
	body, err := io.ReadAll(io.LimitReader(hr.Body, 8<<20))
	if err != nil {
		return apiError("request_timeout")
	}
	ct, _, _ := mime.ParseMediaType(hr.Header.Get("Content-Type"))
	r.form = hr.URL.Query()
	switch {
	case ct == "application/json":
		if len(bytes.TrimSpace(body)) == 0 {
			r.body = map[string]json.RawMessage{}
			break
		}
		if err := json.Unmarshal(body, &r.body); err != nil {
			r.body = map[string]json.RawMessage{}
			return apiError("invalid_json")
		}
		if r.body == nil {
			r.body = map[string]json.RawMessage{}
		}
	case len(body) > 0:
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return apiError("invalid_form_data")
		}
		for k, v := range vals {
			r.form[k] = append(r.form[k], v...)
		}
	}
	if r.token == "" {
		r.token = r.str("token")
	}
	return nil
}

func (s *Server) takeFaultLocked(method string) *Fault {
	for _, key := range []string{method, "*"} {
		q := s.faults[key]
		if len(q) == 0 {
			continue
		}
		f := q[0]
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				s.faults[key] = q[1:]
			}
		}
		cp := *f
		return &cp
	}
	return nil
}
