package playground

import (
	"cmp"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
)

//go:embed web
var webFiles embed.FS

// ModelInfo describes the model answering in the playground, for the
// page's label.
type ModelInfo struct {
	// Demo is true for the scripted demo model.
	Demo bool `json:"demo"`
	// Name is the model name sent with every request (LLM_MODEL).
	Name string `json:"name"`
	// Endpoint names where it runs, e.g. "openai-compatible at
	// http://localhost:11434/v1" (never a key).
	Endpoint string `json:"endpoint"`
}

// Options configure a Server.
type Options struct {
	Slack     Slack
	Workspace Workspace
	Model     ModelInfo
	// MCP summarizes the mounted MCP servers for the page ("" = none),
	// e.g. "memory (stdio)".
	MCP string
	// LoopbackOnly refuses requests whose Host is not a loopback name or
	// address (DNS rebinding): set when listening on loopback.
	LoopbackOnly bool
	Logger       *slog.Logger
}

// Server serves the playground page and its API. Build it with New; it is
// an http.Handler. Close ends the live-update streams (call it before
// shutting the HTTP server down, which would wait for them).
type Server struct {
	opts  Options
	slack Slack
	ws    Workspace
	log   *slog.Logger
	mux   *http.ServeMux
	names Names

	done      chan struct{}
	closeOnce sync.Once
	streams   chan struct{} // slots for live-update streams
}

// maxStreams bounds the live-update streams served at once.
const maxStreams = 32

// New builds a Server.
func New(opts Options) *Server {
	s := &Server{
		opts: opts, slack: opts.Slack, ws: opts.Workspace,
		log:     cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)),
		mux:     http.NewServeMux(),
		done:    make(chan struct{}),
		streams: make(chan struct{}, maxStreams),
	}
	s.names = Names{User: s.userName, Channel: s.channelName}
	static, _ := fs.Sub(webFiles, "web")
	files := http.FileServerFS(static)
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", files))
	s.mux.HandleFunc("GET /api/state", s.handleState)
	s.mux.HandleFunc("GET /api/view", s.handleView)
	s.mux.HandleFunc("GET /api/files/{id}", s.handleFile)
	s.mux.HandleFunc("GET /api/events", s.handleEvents)
	s.mux.HandleFunc("POST /api/post", s.handlePost)
	s.mux.HandleFunc("POST /api/click", s.handleClick)
	s.mux.HandleFunc("POST /api/submit", s.handleSubmit)
	s.mux.HandleFunc("POST /api/close", s.handleClose)
	s.mux.HandleFunc("POST /api/react", s.handleReact)
	s.mux.HandleFunc("POST /api/assistant", s.handleAssistant)
	return s
}

// Close ends the live-update streams. It is safe to call twice.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.done) }) }

// contentSecurityPolicy allows the page's own script, style and
// same-origin requests, and nothing else: no inline script or style, no
// eval, no frames, no plugins, no form posts, no images from elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; " +
	"connect-src 'self'; font-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// csrfHeader must be on every state-changing request: a cross-site page
// cannot add it without a CORS preflight, which this server never
// grants.
const csrfHeader = "X-Bobbin-Playground"

// ServeHTTP sets the security headers and checks Host and, for POSTs,
// the CSRF header before routing.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if s.opts.LoopbackOnly && !loopbackHost(r.Host) {
		http.Error(w, "this playground answers only on a loopback address (Host refused)", http.StatusMisdirectedRequest)
		return
	}
	if r.Method == http.MethodPost {
		if r.Header.Get(csrfHeader) != "1" || r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			http.Error(w, "cross-site request refused", http.StatusForbidden)
			return
		}
		ct := r.Header.Get("Content-Type")
		if !strings.HasPrefix(ct, "application/json") {
			http.Error(w, "JSON bodies only", http.StatusUnsupportedMediaType)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// loopbackHost reports whether a Host header names this machine's
// loopback: localhost, 127.0.0.0/8 or ::1, with any port.
func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// maxBody bounds request bodies (five files of up to 2 MiB, base64).
const maxBody = 16 << 20

// decode reads a JSON request body into v.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpError(w, http.StatusRequestEntityTooLarge, "the request is too large (16 MiB at most)")
			return false
		}
		httpError(w, http.StatusBadRequest, "malformed request: "+err.Error())
		return false
	}
	return true
}

// writeJSON answers v as JSON (with <, > and & escaped, as
// encoding/json does by default).
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// httpError answers {"error": msg} with status.
func httpError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// userName resolves a user id for mentions: the person's handle or the
// bot's name.
func (s *Server) userName(id string) string {
	if id == s.ws.BotUser {
		return s.ws.BotName
	}
	if p, ok := s.ws.person(id); ok {
		return p.Name
	}
	return ""
}

func (s *Server) channelName(id string) string {
	for _, r := range s.ws.Rooms {
		if r.ID == id {
			return r.Name
		}
	}
	return ""
}
