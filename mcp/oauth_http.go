package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"time"

	"github.com/bobbinbot/bobbin/agent/servers"
)

// CallbackHandler serves GET /oauth/callback (the OAuth redirect URI) and
// GET /oauth/client-metadata.json (the Client ID Metadata Document) for
// the Manager; cmd/bot mounts it on its HTTP server under PUBLIC_URL. The
// callback page is minimal HTML: it escapes everything (an authorization
// server's error_description is attacker-controlled), sets no cookies, is
// not cached, and never shows the code or a token. onDone, if set, is
// called after each callback with its result (the bot updates the Connect
// prompt).
func (m *Manager) CallbackHandler(onDone func(ctx context.Context, res CallbackResult, err error)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+CallbackPath, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		res, err := m.CompleteCallback(ctx, q.Get("state"), q.Get("code"), q.Get("iss"), q.Get("error"), q.Get("error_description"))
		if onDone != nil {
			onDone(context.WithoutCancel(ctx), res, err)
		}
		page := callbackPage{Server: res.Server}
		status := http.StatusOK
		var ce *CallbackError
		switch {
		case err == nil:
			page.OK = true
		case errors.Is(err, ErrBadState):
			status, page.Error = http.StatusBadRequest, ErrBadState.Error()
		case errors.Is(err, servers.ErrOAuthUnavailable):
			status, page.Error = http.StatusNotFound, "OAuth is not configured on this bot."
		case errors.As(err, &ce):
			status, page.Error = http.StatusBadRequest, ce.Msg
		default:
			m.log.Warn("mcp oauth callback failed", "err", err)
			status, page.Error = http.StatusInternalServerError, "Something went wrong while connecting. Try Connect again."
		}
		if len(page.Error) > 500 {
			page.Error = page.Error[:500] + "…"
		}
		securePageHeaders(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		_ = callbackTmpl.Execute(w, page)
	})
	mux.HandleFunc("GET "+ClientMetadataPath, func(w http.ResponseWriter, _ *http.Request) {
		doc, ok := m.ClientMetadata()
		if !ok {
			http.NotFound(w, nil)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_ = json.NewEncoder(w).Encode(doc)
	})
	return mux
}

func securePageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
}

type callbackPage struct {
	OK     bool
	Server string
	Error  string
}

// html/template escapes Server and Error.
var callbackTmpl = template.Must(template.New("cb").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{if .OK}}Connected{{else}}Not connected{{end}}</title>
<style>body{font:16px system-ui,sans-serif;margin:4em auto;max-width:32em;padding:0 1em;color:#1d1c1d}</style></head>
<body>{{if .OK}}<h1>Connected to {{.Server}}</h1><p>You can close this tab and go back to Slack.</p>
{{else}}<h1>Could not connect{{if .Server}} to {{.Server}}{{end}}</h1><p>{{.Error}}</p><p>Go back to Slack and try Connect again.</p>{{end}}
</body></html>
`))

// ClientMetadata returns the Client ID Metadata Document (the client_id is
// its own URL), and false when there is none (no https PUBLIC_URL).
func (m *Manager) ClientMetadata() (map[string]any, bool) {
	u := m.oauth.opts.MetadataURL()
	if u == "" {
		return nil, false
	}
	redirect := m.oauth.opts.RedirectURL()
	return map[string]any{
		"client_id":                  u,
		"client_name":                m.oauth.clientName(),
		"redirect_uris":              []string{redirect},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
		"application_type":           applicationType(redirect),
	}, true
}
