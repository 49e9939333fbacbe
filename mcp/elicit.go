package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/agent/access"
)

// Elicitation (issue 14): a server asks the person behind a tool call for
// input, either with a JSON-RPC elicitation/create request (2025-11-25)
// or, on 2026-07-28 servers, with an input_required result that go-sdk's
// multi-round-trip middleware (on by default) fulfils through the same
// handler and re-sends with the echoed requestState and a new JSON-RPC id.
// Both reach the Elicitor seam, which the bot implements with Slack
// modals, shaped like agent.Approver: it blocks until the person answers,
// ctx ends (Stop) or its timeout passes.

// Elicitation modes.
const (
	ElicitForm = "form"
	ElicitURL  = "url"
)

// Elicitation actions.
const (
	ActionAccept  = "accept"
	ActionDecline = "decline"
	ActionCancel  = "cancel"
)

// Elicitation is one question from a server to the person who asked for a
// tool call.
type Elicitation struct {
	Caller access.Caller
	Server string
	// Mode is ElicitForm or ElicitURL.
	Mode    string
	Message string
	// Schema is the form's fields (form mode).
	Schema *ElicitSchema
	// URL is the page to open (URL mode); show it in full, host first.
	URL string
	// ElicitationID is the server's id of a URL elicitation (2025-11-25).
	ElicitationID string
}

// ElicitAnswer is the person's answer. Content (form accept only) maps
// field names to string, float64/int64, bool or []string values.
type ElicitAnswer struct {
	Action  string
	Content map[string]any
}

// Elicitor asks a person and waits for the answer. A returned error (ctx
// ended, timeout) answers the server "cancel".
type Elicitor interface {
	Elicit(ctx context.Context, q Elicitation) (ElicitAnswer, error)
}

// ElicitTimeout caps one question when the Elicitor sets no timeout of its
// own.
const ElicitTimeout = 15 * time.Minute

// callSet tracks a connection's calls in flight, so a 2025-11-25
// elicitation/create (which go-sdk hands us with the connection's context,
// not the call's) can be attributed to the person whose call it is.
type callSet struct {
	mu   sync.Mutex
	next int
	m    map[int]callInfo
}

type callInfo struct {
	requester access.Caller
	known     bool
	done      <-chan struct{}
	clock     *callClock
}

func (s *callSet) add(ctx context.Context) func() {
	r, ok := access.CallerFrom(ctx)
	clock, _ := ctx.Value(clockKey{}).(*callClock)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[int]callInfo{}
	}
	id := s.next
	s.next++
	s.m[id] = callInfo{requester: r, known: ok, done: ctx.Done(), clock: clock}
	return func() {
		s.mu.Lock()
		delete(s.m, id)
		s.mu.Unlock()
	}
}

// attribute returns the one person all calls in flight belong to (their
// calls' clocks and done channels with it); ok is false when there is no
// call, or calls of several people, or a call without a requester — then
// nobody is asked (a question must never reach the wrong person).
func (s *callSet) attribute() (access.Caller, []callInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var who access.Caller
	var infos []callInfo
	for _, ci := range s.m {
		if !ci.known || (len(infos) > 0 && ci.requester.User != who.User) {
			return access.Caller{}, nil, false
		}
		who = ci.requester
		infos = append(infos, ci)
	}
	return who, infos, len(infos) > 0
}

// elicitHandler returns the go-sdk ElicitationHandler of the mount's
// connections (nil without an Elicitor: the capability is then not
// declared and go-sdk answers servers that ask anyway with an error).
func (mt *mount) elicitHandler() func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	el := mt.m.opts.Elicitor
	if el == nil {
		return nil
	}
	return func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		p := req.Params
		if p == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
		}
		mode := p.Mode
		if mode == "" {
			mode = ElicitForm
		}
		q := Elicitation{Server: mt.cfg.Name, Mode: mode, Message: p.Message, URL: p.URL, ElicitationID: p.ElicitationID}
		switch mode {
		case ElicitForm:
			schema, err := ParseElicitSchema(p.RequestedSchema)
			if err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestedSchema: " + err.Error()}
			}
			q.Schema = schema
		case ElicitURL:
			if err := checkElicitURL(p.URL); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
			}
		default:
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unsupported elicitation mode " + mode}
		}
		// Who asked: the call's context (multi-round-trip results are
		// answered inside CallTool), else the connection's calls in flight.
		ectx := ctx
		if r, ok := access.CallerFrom(ctx); ok {
			q.Caller = r
			defer pauseClock(ctx)()
		} else {
			c := mt.connFor(req.Session)
			if c == nil {
				return &mcp.ElicitResult{Action: ActionCancel}, nil
			}
			r, infos, ok := c.calls.attribute()
			if !ok {
				mt.m.log.Warn("mcp elicitation cancelled: it cannot be attributed to one person's call",
					"team", mt.team, "server", mt.cfg.Name)
				return &mcp.ElicitResult{Action: ActionCancel}, nil
			}
			q.Caller = r
			var cancel context.CancelFunc
			ectx, cancel = context.WithCancel(ctx)
			defer cancel()
			for _, ci := range infos {
				if ci.clock != nil {
					ci.clock.pause()
					defer ci.clock.resume()
				}
				stop := context.AfterFunc(doneCtx(ci.done), cancel)
				defer stop()
			}
		}
		ectx, cancel := context.WithTimeout(ectx, ElicitTimeout)
		defer cancel()
		ans, err := el.Elicit(ectx, q)
		if err != nil {
			mt.m.log.Info("mcp elicitation not answered", "team", mt.team, "server", mt.cfg.Name, "err", err)
			return &mcp.ElicitResult{Action: ActionCancel}, nil
		}
		switch ans.Action {
		case ActionAccept:
			if mode == ElicitForm {
				if errs := ValidateElicitContent(q.Schema, ans.Content); len(errs) > 0 {
					return &mcp.ElicitResult{Action: ActionCancel}, nil
				}
				return &mcp.ElicitResult{Action: ActionAccept, Content: ans.Content}, nil
			}
			return &mcp.ElicitResult{Action: ActionAccept}, nil
		case ActionDecline:
			return &mcp.ElicitResult{Action: ActionDecline}, nil
		default:
			return &mcp.ElicitResult{Action: ActionCancel}, nil
		}
	}
}

// doneCtx adapts a done channel to a context for context.AfterFunc.
type doneOnly struct {
	context.Context
	done <-chan struct{}
}

func (d doneOnly) Done() <-chan struct{} { return d.done }
func (d doneOnly) Err() error {
	select {
	case <-d.done:
		return context.Canceled
	default:
		return nil
	}
}

func doneCtx(done <-chan struct{}) context.Context {
	return doneOnly{Context: context.Background(), done: done}
}

// connFor finds the live connection of a session among the mount's own
// and its per-person mounts'.
func (mt *mount) connFor(cs *mcp.ClientSession) *conn {
	for _, x := range append([]*mount{mt}, mt.subMounts()...) {
		x.mu.Lock()
		c := x.conn
		x.mu.Unlock()
		if c != nil && c.cs == cs {
			return c
		}
	}
	return nil
}

// urlElicitations returns the URL elicitations of a -32042
// URLElicitationRequired error (2025-11-25), or ok false.
func urlElicitations(err error) ([]*mcp.ElicitParams, bool) {
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != mcp.CodeURLElicitationRequired {
		return nil, false
	}
	var data struct {
		Elicitations []*mcp.ElicitParams `json:"elicitations"`
	}
	if len(je.Data) == 0 || json.Unmarshal(je.Data, &data) != nil || len(data.Elicitations) == 0 {
		return nil, false
	}
	return data.Elicitations, true
}

// answerURLRequired asks the person to open each URL of a -32042 error;
// true means all were accepted and the call may be sent again.
func (mt *mount) answerURLRequired(ctx context.Context, els []*mcp.ElicitParams) (bool, error) {
	el := mt.m.opts.Elicitor
	r, ok := access.CallerFrom(ctx)
	if el == nil || !ok {
		return false, nil
	}
	defer pauseClock(ctx)()
	for _, p := range els {
		if p == nil || (p.Mode != "" && p.Mode != ElicitURL) || checkElicitURL(p.URL) != nil {
			return false, fmt.Errorf("%s asked to open an invalid URL", mt.cfg.Name)
		}
		ectx, cancel := context.WithTimeout(ctx, ElicitTimeout)
		ans, err := el.Elicit(ectx, Elicitation{Caller: r, Server: mt.cfg.Name, Mode: ElicitURL,
			Message: p.Message, URL: p.URL, ElicitationID: p.ElicitationID})
		cancel()
		if err != nil || ans.Action != ActionAccept {
			return false, nil
		}
	}
	return true, nil
}

func isURLRequired(err error) bool {
	_, ok := urlElicitations(err)
	return ok
}
