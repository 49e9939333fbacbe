package install

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

// The browser side of installing, served by cmd/bot's HTTP server under
// PUBLIC_URL: GET /slack/install sends the visitor to Slack's authorize
// page with a random single-use state, kept in Redis and in a short-lived
// cookie; GET /slack/oauth_redirect checks both, exchanges the code and
// shows a plain page. Pages escape everything, set no cookie but the
// state's, are not cached, never show the code or a token.

// Install paths, relative to PUBLIC_URL.
const (
	InstallPath  = "/slack/install"
	RedirectPath = "/slack/oauth_redirect"
)

const (
	installCookie = "bobbin_slack_install"
	// installStateTTL is how long an install may take in the browser.
	installStateTTL = 10 * time.Minute
	// installsPerMinute bounds the states visitors can make (each is a
	// Redis key for installStateTTL).
	installsPerMinute = 60
)

// Handler serves InstallPath and RedirectPath.
func (in *Installs) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+InstallPath, in.serveInstall)
	mux.HandleFunc("GET "+RedirectPath, in.serveRedirect)
	return mux
}

// cookiePath is the public path both install URLs live under, so the
// state cookie goes back only to them.
func (in *Installs) cookiePath() string {
	u, err := url.Parse(in.opts.RedirectURL)
	if err != nil || u.Path == "" {
		return "/"
	}
	return path.Dir(u.Path) + "/"
}

func (in *Installs) secureCookie() bool {
	return strings.HasPrefix(in.opts.RedirectURL, "https://")
}

func (in *Installs) serveInstall(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if ok, _, err := in.store.Take(ctx, "slack-install", installsPerMinute, installsPerMinute/2); err == nil && !ok {
		installPageOut(w, http.StatusTooManyRequests, installPage{Title: "Try again in a minute",
			Text: "Too many installs were started in the last minute."})
		return
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	state := hex.EncodeToString(raw[:])
	if err := in.store.PutInstallState(ctx, state, installStateTTL); err != nil {
		in.env.Log.Warn("bot: cannot start an install: recording its state failed", "err", err)
		installPageOut(w, http.StatusServiceUnavailable, installPage{Title: "Not available right now",
			Text: "The install could not be started. Try again in a minute."})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: installCookie, Value: state, Path: in.cookiePath(), MaxAge: int(installStateTTL.Seconds()),
		HttpOnly: true, Secure: in.secureCookie(), SameSite: http.SameSiteLaxMode,
	})
	securePageHeaders(w)
	http.Redirect(w, r, in.authorizeURL(state), http.StatusFound)
}

func (in *Installs) serveRedirect(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	// The cookie is single-use too: clear it whatever happens.
	http.SetCookie(w, &http.Cookie{Name: installCookie, Value: "", Path: in.cookiePath(), MaxAge: -1,
		HttpOnly: true, Secure: in.secureCookie(), SameSite: http.SameSiteLaxMode})
	again := installPage{Title: "This install link has expired",
		Text: "It was already used, is more than ten minutes old, or was opened in another browser.", Again: true}
	c, err := r.Cookie(installCookie)
	if err != nil || state == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(state)) != 1 {
		in.env.Log.Info("bot: install redirect refused: state missing or not this browser's")
		installPageOut(w, http.StatusBadRequest, again)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	ok, err := in.store.TakeInstallState(ctx, state)
	if err != nil {
		in.env.Log.Warn("bot: install redirect: reading its state failed", "err", err)
		installPageOut(w, http.StatusServiceUnavailable, installPage{Title: "Not available right now",
			Text: "The install could not be completed. Try again in a minute.", Again: true})
		return
	}
	if !ok {
		in.env.Log.Info("bot: install redirect refused: unknown, used or expired state")
		installPageOut(w, http.StatusBadRequest, again)
		return
	}
	if e := q.Get("error"); e != "" {
		installPageOut(w, http.StatusOK, installPage{Title: "Installation cancelled",
			Text: "Slack said: " + e + ". Nothing was installed.", Again: true})
		return
	}
	code := q.Get("code")
	if code == "" {
		installPageOut(w, http.StatusBadRequest, installPage{Title: "Installation failed",
			Text: "Slack sent no authorization code.", Again: true})
		return
	}
	inst, err := in.complete(ctx, code)
	if err != nil {
		in.env.Count("install_failed")
		var ie *Error
		switch {
		case errors.As(err, &ie) && ie.Credentials:
			in.env.Log.Error("bot: install failed: "+ie.Error(), "code", ie.Code)
			installPageOut(w, http.StatusBadGateway, installPage{Title: "Installation failed",
				Text: "Slack refused this app's credentials (" + ie.Code + "). The operator must check SLACK_CLIENT_ID, SLACK_CLIENT_SECRET and the app's Redirect URL."})
		case errors.As(err, &ie):
			in.env.Log.Warn("bot: install failed", "err", err)
			installPageOut(w, http.StatusBadRequest, installPage{Title: "Installation failed",
				Text: "Slack did not accept the authorization (" + ie.Code + ").", Again: true})
		default:
			in.env.Log.Warn("bot: install failed", "err", err)
			installPageOut(w, http.StatusBadGateway, installPage{Title: "Installation failed",
				Text: "Something went wrong while installing. Try again in a minute.", Again: true})
		}
		return
	}
	page := installPage{OK: true, Title: "Bobbin is installed",
		Text: "Bobbin is now installed in " + cmp.Or(inst.TeamName, inst.TeamID) + ". Mention it in a channel, or open it from the sidebar."}
	if inst.OrgWide {
		page.Text = "Bobbin is now installed on the organization " + cmp.Or(inst.EnterpriseName, inst.EnterpriseID) +
			". An org admin still has to add it to workspaces."
		if inst.AppID != "" {
			page.Link = "https://app.slack.com/manage/" + url.PathEscape(inst.EnterpriseID) + "/integrations/profile/" +
				url.PathEscape(inst.AppID) + "/workspaces/add"
			page.LinkText = "Add Bobbin to workspaces"
		}
	}
	installPageOut(w, http.StatusOK, page)
}

type installPage struct {
	OK             bool
	Title, Text    string
	Again          bool
	Link, LinkText string
}

func installPageOut(w http.ResponseWriter, status int, p installPage) {
	securePageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = installTmpl.Execute(w, p)
}

func securePageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
}

// html/template escapes every field; "install" is relative to
// oauth_redirect, so the link works under any PUBLIC_URL path.
var installTmpl = template.Must(template.New("install").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{.Title}}</title>
<style>body{font:16px system-ui,sans-serif;margin:4em auto;max-width:32em;padding:0 1em;color:#1d1c1d}</style></head>
<body><h1>{{.Title}}</h1><p>{{.Text}}</p>
{{if .Link}}<p><a href="{{.Link}}">{{.LinkText}}</a></p>{{end}}
{{if .OK}}<p>You can close this tab and go back to Slack.</p>{{end}}
{{if .Again}}<p><a href="install">Start the installation again</a></p>{{end}}
</body></html>
`))
