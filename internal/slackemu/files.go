package slackemu

import (
	"bytes"
	"fmt"
	"html"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Files: the file host (url_private, url_private_download, thumbnails)
// on the emulator's own scheme, host and port, Slack's file objects in
// events and Web API answers, Slack Connect stubs, and files.info.
//
// The host answers like files.slack.com: a Bearer token with files:read
// that can see the file gets the bytes with the file's Content-Type;
// anything else is redirected (302) to the sign-in page "/?redir=<path>",
// which answers 200 text/html, as Slack does (not 401/403).

// File is a file in Slack. Tests set what an uploader provides (Name,
// Content, Mimetype, …); the server fills the rest (ID when empty, Size,
// URLs, who and where).
type File struct {
	ID         string // "F…"
	Name       string
	Title      string // default Name
	Mimetype   string // default from Name's extension
	Filetype   string // Slack's type ("png", "text", "pdf", "python", …); default from the extension
	PrettyType string // default from Filetype
	// Mode is "hosted" (default), "snippet", "post" or "external".
	Mode string
	// Content is what url_private serves (hosted files and snippets).
	Content []byte
	// External files keep their master copy elsewhere: url_private is
	// ExternalURL, on any host (the emulator never serves it).
	IsExternal   bool
	ExternalType string // "gdrive", "dropbox", …
	ExternalURL  string
	// ConnectStub makes events carry Slack Connect's stub instead of the
	// file ({"id","mode":"file_access","file_access":"check_file_info",…});
	// files.info and conversations.replies give the whole object.
	ConnectStub bool
	// AccessDenied makes files.info answer access_denied (a Slack Connect
	// file the app may not open).
	AccessDenied bool
	// RedirectTo makes url_private answer 302 to this URL even for a good
	// token: a tripwire for clients that carry the token across redirects.
	RedirectTo string
	// Width and Height of an image; read from PNG, JPEG and GIF bytes when 0.
	Width, Height int

	// Filled by the server.
	Size               int
	User               string
	UserTeam           string
	Team               string // workspace it was uploaded to
	Created            time.Time
	Channels           []string // where it is shared
	URLPrivate         string
	URLPrivateDownload string
	Permalink          string
	// Evicted: its bytes were dropped to respect Options.FileBytesLimit;
	// its URLs answer 404.
	Evicted bool
}

// Download is one request to the file host.
type Download struct {
	Time      time.Time
	Path      string
	FileID    string
	Team      string // the token's workspace ("" for none or unknown)
	TokenKind string // as Call.TokenKind
	Status    int
	// Served is true when the file's bytes were sent.
	Served bool
}

// fileType is Slack's description of a kind of file.
type fileType struct{ mime, filetype, pretty string }

// fileTypes maps extensions to Slack's mimetype, filetype and pretty_type
// (filetype names from Slack's file object reference).
var fileTypes = map[string]fileType{
	"png": {"image/png", "png", "PNG"}, "jpg": {"image/jpeg", "jpg", "JPEG"}, "jpeg": {"image/jpeg", "jpg", "JPEG"},
	"gif": {"image/gif", "gif", "GIF"}, "webp": {"image/webp", "webp", "WebP"}, "pdf": {"application/pdf", "pdf", "PDF"},
	"txt": {"text/plain", "text", "Plain Text"}, "log": {"text/plain", "text", "Plain Text"},
	"md": {"text/markdown", "markdown", "Markdown (raw)"}, "csv": {"text/csv", "csv", "CSV"},
	"tsv": {"text/tab-separated-values", "tsv", "TSV"}, "json": {"application/json", "json", "JSON"},
	"yaml": {"application/x-yaml", "yaml", "YAML"}, "yml": {"application/x-yaml", "yaml", "YAML"},
	"xml": {"application/xml", "xml", "XML"}, "html": {"text/html", "html", "HTML"},
	"go": {"text/x-go", "go", "Go"}, "py": {"text/x-python", "python", "Python"},
	"js": {"text/javascript", "javascript", "JavaScript"}, "sh": {"text/x-sh", "shell", "Shell"},
	"zip": {"application/zip", "zip", "Zip"}, "gz": {"application/gzip", "gzip", "Gzip"},
	"svg": {"image/svg+xml", "svg", "SVG"},
}

var binaryType = fileType{"application/octet-stream", "binary", "Binary"}

// fileState is a stored file.
type fileState struct {
	File
	thumbKey string
	byApp    bool // uploaded by the app (Leaks searches it)
}

// prepareFileLocked fills a new file's defaults and derived fields.
func (s *Server) prepareFileLocked(f File, team, user string) (*fileState, error) {
	if f.Name == "" && f.Title == "" {
		return nil, fmt.Errorf("slackemu: a file needs a Name or Title")
	}
	ext := strings.ToLower(strings.TrimPrefix(path.Ext(f.Name), "."))
	ft, ok := fileTypes[ext]
	if !ok {
		ft = binaryType
	}
	if f.Mode == "" {
		f.Mode = "hosted"
		if f.IsExternal {
			f.Mode = "external"
		}
	}
	if f.Mode == "snippet" && !ok {
		ft = fileTypes["txt"]
	}
	if f.Filetype != "" && f.PrettyType == "" {
		for _, t := range fileTypes {
			if t.filetype == f.Filetype {
				f.PrettyType = t.pretty
			}
		}
	}
	f.Mimetype = firstNonEmpty(f.Mimetype, ft.mime)
	f.Filetype = firstNonEmpty(f.Filetype, ft.filetype)
	f.PrettyType = firstNonEmpty(f.PrettyType, ft.pretty)
	f.Title = firstNonEmpty(f.Title, f.Name)
	if f.ID == "" {
		f.ID = s.newIDLocked("F")
	}
	if s.files[f.ID] != nil {
		return nil, fmt.Errorf("slackemu: file %s exists", f.ID)
	}
	if f.IsExternal {
		if f.ExternalURL == "" {
			return nil, fmt.Errorf("slackemu: external file %s needs an ExternalURL", f.ID)
		}
		f.Content = nil
	} else {
		f.Content = slices.Clone(f.Content)
		f.Size = len(f.Content)
		if int64(f.Size) > s.opts.FileBytesLimit {
			return nil, fmt.Errorf("slackemu: file %s is %d bytes, over FileBytesLimit %d", f.ID, f.Size, s.opts.FileBytesLimit)
		}
	}
	if f.Width == 0 && f.Height == 0 && len(f.Content) > 0 {
		f.Width, f.Height = imageSize(f.Mimetype, f.Content)
	}
	f.Team, f.User = team, user
	f.UserTeam = team
	if u := s.users[user]; u != nil {
		f.UserTeam = u.TeamID
	}
	f.Created = time.Now()
	f.Channels = nil
	f.Evicted = false
	fs := &fileState{File: f, thumbKey: strings.ReplaceAll(s.newUUIDLocked(), "-", "")[:10]}
	name := url.PathEscape(firstNonEmpty(f.Name, f.ID))
	if f.IsExternal {
		fs.URLPrivate = f.ExternalURL
	} else {
		fs.URLPrivate = fmt.Sprintf("%s/files-pri/%s-%s/%s", s.base, team, f.ID, name)
		fs.URLPrivateDownload = fmt.Sprintf("%s/files-pri/%s-%s/download/%s", s.base, team, f.ID, name)
	}
	domain := team
	if t := s.teams[team]; t != nil {
		domain = t.Domain
	}
	fs.Permalink = fmt.Sprintf("https://%s.slack.com/files/%s/%s/%s", domain, user, f.ID, name)
	return fs, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// imageSize reads an image's dimensions (0, 0 when unknown).
func imageSize(mime string, b []byte) (int, int) {
	var cfg image.Config
	var err error
	switch mime {
	case "image/png":
		cfg, err = png.DecodeConfig(bytes.NewReader(b))
	case "image/jpeg":
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(b))
	case "image/gif":
		cfg, err = gif.DecodeConfig(bytes.NewReader(b))
	default:
		return 0, 0
	}
	if err != nil {
		return 0, 0
	}
	return cfg.Width, cfg.Height
}

// storeFileLocked keeps a file, dropping the bytes of the oldest files
// beyond Options.FileBytesLimit.
func (s *Server) storeFileLocked(f *fileState) {
	s.files[f.ID] = f
	s.fileOrder = append(s.fileOrder, f)
	s.fileBytes += int64(len(f.Content))
	for i := 0; s.fileBytes > s.opts.FileBytesLimit && i < len(s.fileOrder); i++ {
		old := s.fileOrder[i]
		if old == f || old.Content == nil {
			continue
		}
		s.fileBytes -= int64(len(old.Content))
		old.Content, old.Evicted = nil, true
	}
	// Forget evicted files past the first thousand so the order list stays
	// bounded; their metadata goes too.
	for len(s.fileOrder) > 1000 && s.fileOrder[0].Evicted {
		delete(s.files, s.fileOrder[0].ID)
		s.fileOrder[0] = nil
		s.fileOrder = s.fileOrder[1:]
	}
	s.changedLocked()
}

// AddFile uploads a file for user in team without sharing it anywhere
// (files.info finds it; nobody else can see it until it is shared). It
// returns the stored file.
func (s *Server) AddFile(team, user string, f File) (File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs, err := s.prepareFileLocked(f, team, user)
	if err != nil {
		return File{}, err
	}
	s.storeFileLocked(fs)
	return copyFile(fs), nil
}

// FileInfo returns a stored file (its Content included).
func (s *Server) FileInfo(id string) (File, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.files[id]
	if f == nil {
		return File{}, false
	}
	return copyFile(f), true
}

func copyFile(f *fileState) File {
	c := f.File
	c.Content = slices.Clone(f.Content)
	c.Channels = slices.Clone(f.Channels)
	return c
}

// Downloads returns every request to the file host, in order.
func (s *Server) Downloads() []Download {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.downloads)
}

// fileVisibleLocked reports whether team's app can read the file: it is
// shared in a channel the team may use and the bot is in (or a DM), or
// the team's bot uploaded it.
func (s *Server) fileVisibleLocked(f *fileState, team string) bool {
	if bot, _, _ := s.botIdentityLocked(team); bot != "" && f.User == bot && f.Team == team {
		return true
	}
	for _, id := range f.Channels {
		c := s.channels[id]
		if seesChannel(c, team) && (c.BotMember || c.IsIM()) {
			return true
		}
	}
	return false
}

// fileJSONLocked renders the full file object.
func (s *Server) fileJSONLocked(f *fileState) map[string]any {
	out := map[string]any{
		"id": f.ID, "created": f.Created.Unix(), "timestamp": f.Created.Unix(), "name": f.Name, "title": f.Title,
		"mimetype": f.Mimetype, "filetype": f.Filetype, "pretty_type": f.PrettyType, "user": f.User,
		"user_team": f.UserTeam, "editable": f.Mode == "snippet" || f.Mode == "post", "size": f.Size, "mode": f.Mode,
		"is_external": f.IsExternal, "external_type": f.ExternalType, "is_public": false, "public_url_shared": false,
		"display_as_bot": false, "username": "", "url_private": f.URLPrivate, "media_display_type": "unknown",
		"permalink": f.Permalink, "permalink_public": "https://slack-files.com/" + f.Team + "-" + f.ID + "-" + f.thumbKey,
		"has_rich_preview": false, "file_access": "visible",
	}
	if f.URLPrivateDownload != "" {
		out["url_private_download"] = f.URLPrivateDownload
	}
	if f.IsExternal {
		out["external_url"] = f.ExternalURL
		out["external_id"] = f.ID
	}
	var chans, groups, ims []string
	for _, id := range f.Channels {
		switch c := s.channels[id]; {
		case c == nil:
		case c.IsIM():
			ims = append(ims, id)
		case c.Private:
			groups = append(groups, id)
		default:
			chans = append(chans, id)
			out["is_public"] = true
		}
	}
	out["channels"], out["groups"], out["ims"] = orEmpty(chans), orEmpty(groups), orEmpty(ims)
	if f.Mode == "snippet" && f.Content != nil {
		lines := strings.Split(string(f.Content), "\n")
		out["lines"] = len(lines)
		out["lines_more"] = max(0, len(lines)-5)
		out["preview"] = strings.Join(lines[:min(5, len(lines))], "\n")
	}
	if strings.HasPrefix(f.Mimetype, "image/") && !f.IsExternal {
		s.addThumbsLocked(out, f)
	}
	return out
}

func orEmpty(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// thumbSizes are Slack's thumbnail sizes; 64, 80 and 160 are square.
var thumbSizes = []int{64, 80, 160, 360, 480, 720, 800, 960, 1024}

// addThumbsLocked adds thumb_* URLs (the host serves the original bytes
// there: the emulator does not resize).
func (s *Server) addThumbsLocked(out map[string]any, f *fileState) {
	stem := strings.TrimSuffix(firstNonEmpty(f.Name, f.ID), path.Ext(f.Name))
	base := fmt.Sprintf("%s/files-tmb/%s-%s-%s/%s", s.base, f.Team, f.ID, f.thumbKey, url.PathEscape(stem))
	longest := max(f.Width, f.Height)
	for _, n := range thumbSizes {
		if n > 360 && longest < n {
			break
		}
		k := "thumb_" + strconv.Itoa(n)
		out[k] = fmt.Sprintf("%s_%d.png", base, n)
		if n >= 360 && longest > 0 {
			scale := min(1, float64(n)/float64(longest))
			out[k+"_w"], out[k+"_h"] = int(math.Round(float64(f.Width)*scale)), int(math.Round(float64(f.Height)*scale))
		}
	}
	if f.Width > 0 {
		out["original_w"], out["original_h"] = f.Width, f.Height
	}
}

// fileEventJSONLocked renders a file as an event carries it: Slack
// Connect stubs stay stubs.
func (s *Server) fileEventJSONLocked(f *fileState) map[string]any {
	if f.ConnectStub {
		return map[string]any{"id": f.ID, "mode": "file_access", "file_access": "check_file_info", "created": 0, "timestamp": 0, "user": ""}
	}
	return s.fileJSONLocked(f)
}

// filesInfo is files.info: the whole object for a file the app can see.
func (s *Server) filesInfo(r *request) (map[string]any, error) {
	id := r.str("file")
	if id == "" {
		return nil, apiError("invalid_arguments")
	}
	f := s.files[id]
	if f == nil || !s.fileVisibleLocked(f, r.team.ID) {
		return nil, apiError("file_not_found")
	}
	if f.AccessDenied {
		return nil, apiError("access_denied")
	}
	count := 100
	if n, err := strconv.Atoi(r.str("count")); err == nil && n > 0 {
		count = n
	}
	return map[string]any{
		"file": s.fileJSONLocked(f), "comments": []any{},
		"paging":            map[string]any{"count": count, "total": 0, "page": 1, "pages": 0},
		"response_metadata": map[string]any{"next_cursor": ""},
	}, nil
}

// parseFilePath reads the file id from a file-host path:
// /files-pri/<team>-<file>/[download/]<name> or
// /files-tmb/<team>-<file>-<key>/<name>.
func parseFilePath(p string) (team, id string, download, ok bool) {
	var rest string
	var thumb bool
	switch {
	case strings.HasPrefix(p, "/files-pri/"):
		rest = strings.TrimPrefix(p, "/files-pri/")
	case strings.HasPrefix(p, "/files-tmb/"):
		rest, thumb = strings.TrimPrefix(p, "/files-tmb/"), true
	default:
		return "", "", false, false
	}
	seg, tail, found := strings.Cut(rest, "/")
	if !found || tail == "" {
		return "", "", false, false
	}
	parts := strings.Split(seg, "-")
	if len(parts) < 2 || (thumb && len(parts) != 3) || (!thumb && len(parts) != 2) || parts[0] == "" || parts[1] == "" {
		return "", "", false, false
	}
	if !thumb {
		name, isDownload := strings.CutPrefix(tail, "download/")
		if isDownload && name == "" {
			return "", "", false, false
		}
		download = isDownload
	}
	return parts[0], parts[1], download, true
}

// handleFile serves url_private, url_private_download and thumbnails.
func (s *Server) handleFile(w http.ResponseWriter, hr *http.Request) {
	if !s.enter() {
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	defer s.tasks.Done()
	p := hr.URL.Path
	token := ""
	if auth := hr.Header.Get("Authorization"); strings.HasPrefix(auth, "Bearer ") {
		token = strings.TrimSpace(strings.TrimPrefix(auth, "Bearer "))
	}
	s.mu.Lock()
	fault := s.takeFaultLocked("files.download")
	s.mu.Unlock()
	if fault != nil && fault.Latency > 0 {
		select {
		case <-time.After(fault.Latency):
		case <-hr.Context().Done():
		}
	}

	s.mu.Lock()
	d := Download{Time: time.Now(), Path: p, TokenKind: tokenKind(token)}
	var body []byte
	var f *fileState
	location := ""
	_, id, download, ok := parseFilePath(p)
	tok := s.tokens[token]
	switch {
	case fault != nil && fault.Status != 0:
		d.Status = fault.Status
	case !ok:
		d.Status = http.StatusNotFound
	case !s.fileTokenOKLocked(token, tok, s.files[id]):
		// Slack's answer to a missing, wrong or unauthorised token.
		d.Status, location = http.StatusFound, s.base+"/?redir="+url.QueryEscape(p)
	case s.files[id].Evicted || s.files[id].IsExternal:
		d.Status = http.StatusNotFound
	case s.files[id].RedirectTo != "":
		d.Status, location = http.StatusFound, s.files[id].RedirectTo
	default:
		f = s.files[id]
		d.Status, d.Served, body = http.StatusOK, true, f.Content
	}
	if tok != nil {
		d.Team = tok.team
	}
	d.FileID = id
	s.downloads = appendCapped(s.downloads, d, s.opts.JournalLimit)
	s.changedLocked()
	s.mu.Unlock()

	switch {
	case location != "":
		w.Header().Set("Location", location)
		w.WriteHeader(d.Status)
	case d.Served:
		w.Header().Set("Content-Type", f.Mimetype)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Header().Set("Cache-Control", "private, max-age=0")
		if download {
			w.Header().Set("Content-Disposition", "attachment; filename=\""+strings.NewReplacer(`"`, "", "\\", "", "\r", "", "\n", "").Replace(f.Name)+"\"")
		}
		w.WriteHeader(http.StatusOK)
		if hr.Method != http.MethodHead {
			_, _ = w.Write(body)
		}
	default:
		http.Error(w, http.StatusText(d.Status), d.Status)
	}
}

// fileTokenOKLocked reports whether a file-host request's token may read
// the file: a live bot or user token with files:read whose team sees it.
func (s *Server) fileTokenOKLocked(token string, t *tokenState, f *fileState) bool {
	if t == nil || f == nil || s.revoked[token] || t.revoked != "" || (!t.expires.IsZero() && time.Now().After(t.expires)) {
		return false
	}
	if t.scopes != nil && !slices.Contains(t.scopes, "files:read") {
		return false
	}
	team := t.team
	if team == "" { // org-wide: any workspace of the org
		for _, ts := range s.enterpriseTeamsLocked(t.enterprise) {
			if s.fileVisibleLocked(f, ts.ID) {
				return true
			}
		}
		return false
	}
	return s.fileVisibleLocked(f, team)
}

// handleSignIn is the workspace sign-in page the file host redirects to.
func (s *Server) handleSignIn(w http.ResponseWriter, hr *http.Request) {
	redir := hr.URL.Query().Get("redir")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "<!doctype html><html><head><title>Sign in | Slack</title></head><body><h1>Sign in to your workspace</h1><form method=\"post\" action=\"/?redir=%s\"><input name=\"email\" type=\"email\"><button>Sign in</button></form></body></html>\n", html.EscapeString(url.QueryEscape(redir)))
}
