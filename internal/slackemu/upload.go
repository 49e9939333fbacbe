package slackemu

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Uploads by the app (slack-go's UploadFile): files.getUploadURLExternal
// hands out an upload URL on the emulator, the bytes are POSTed there
// (multipart or raw), files.completeUploadExternal shares the file,
// posting a bot message when a channel is given.

// pendingUpload is a file between getUploadURLExternal and
// completeUploadExternal.
type pendingUpload struct {
	id, team, name, altText, snippet string
	length                           int
	content                          []byte
	uploaded                         bool
	expires                          time.Time
}

const (
	uploadTTL         = 10 * time.Minute // Slack time
	maxPendingUploads = 1000
)

func (s *Server) filesGetUploadURLExternal(r *request) (map[string]any, error) {
	name := r.str("filename")
	n, err := strconv.Atoi(r.str("length"))
	if name == "" || err != nil || n <= 0 {
		return nil, apiError("invalid_arguments")
	}
	if int64(n) > s.opts.FileBytesLimit {
		return nil, apiError("file_too_large")
	}
	now := time.Now()
	oldest := ""
	for k, u := range s.uploads {
		if now.After(u.expires) {
			delete(s.uploads, k)
		} else if oldest == "" || u.expires.Before(s.uploads[oldest].expires) {
			oldest = k
		}
	}
	// Abandoned uploads are bounded: the oldest goes past maxPendingUploads.
	if len(s.uploads) >= maxPendingUploads {
		delete(s.uploads, oldest)
	}
	ticket := strings.ReplaceAll(s.newUUIDLocked(), "-", "")
	u := &pendingUpload{id: s.newIDLocked("F"), team: r.team.ID, name: name, altText: r.str("alt_txt"), snippet: r.str("snippet_type"), length: n,
		expires: now.Add(time.Duration(float64(uploadTTL) * s.opts.TimeScale))}
	s.uploads[ticket] = u
	return map[string]any{"upload_url": s.base + "/upload/v1/" + ticket, "file_id": u.id}, nil
}

// handleUpload receives the bytes of a pending upload.
func (s *Server) handleUpload(w http.ResponseWriter, hr *http.Request) {
	if !s.enter() {
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	defer s.tasks.Done()
	ticket := strings.TrimPrefix(hr.URL.Path, "/upload/v1/")
	s.mu.Lock()
	u := s.uploads[ticket]
	s.mu.Unlock()
	if u == nil || u.uploaded {
		http.Error(w, "unknown upload", http.StatusNotFound)
		return
	}
	data, err := readUpload(hr, u.length)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		http.Error(w, err.Error(), status)
		return
	}
	s.mu.Lock()
	u.content, u.uploaded = data, true
	s.changedLocked()
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "OK - %d", len(data))
}

var errTooLarge = errors.New("upload larger than the declared length")

// readUpload reads an upload body: the "file" part of a multipart form
// (slack-go), or the raw body. It reads at most limit bytes.
func readUpload(hr *http.Request, limit int) ([]byte, error) {
	readCapped := func(r io.Reader) ([]byte, error) {
		b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
		if err != nil {
			return nil, fmt.Errorf("reading the upload: %w", err)
		}
		if len(b) > limit {
			return nil, errTooLarge
		}
		return b, nil
	}
	ct, params, _ := mime.ParseMediaType(hr.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		return readCapped(hr.Body)
	}
	mr := multipart.NewReader(io.LimitReader(hr.Body, int64(limit)+1<<20), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err != nil {
			return nil, fmt.Errorf("no file part in the upload: %w", err)
		}
		if p.FormName() == "file" || p.FileName() != "" {
			return readCapped(p)
		}
	}
}

type completeFile struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

func (s *Server) filesCompleteUploadExternal(r *request) (map[string]any, error) {
	raw := r.str("files")
	var want []completeFile
	if err := json.Unmarshal([]byte(raw), &want); err != nil || len(want) == 0 {
		return nil, apiError("invalid_arguments")
	}
	ticketOf := map[string]string{}
	for k, u := range s.uploads {
		if u.team == r.team.ID {
			ticketOf[u.id] = k
		}
	}
	for _, f := range want {
		u := s.uploads[ticketOf[f.ID]]
		if u == nil || !u.uploaded {
			return nil, apiError("file_not_found")
		}
	}
	var ch *channelState
	if r.has("channel_id") || r.has("channels") {
		key := "channel_id"
		if !r.has(key) {
			key = "channels"
		}
		var err error
		if ch, err = s.channelForPostLocked(r, key); err != nil {
			return nil, err
		}
	}
	var stored []*fileState
	out := []any{}
	for _, f := range want {
		u := s.uploads[ticketOf[f.ID]]
		file := File{ID: u.id, Name: u.name, Title: f.Title, Content: u.content}
		if u.snippet != "" {
			file.Mode, file.Filetype = "snippet", u.snippet
		}
		fs, err := s.prepareFileLocked(file, r.team.ID, r.botUser())
		if err != nil {
			return nil, apiError("invalid_arguments")
		}
		fs.byApp = true
		delete(s.uploads, ticketOf[f.ID])
		stored = append(stored, fs)
		out = append(out, map[string]any{"id": fs.ID, "title": fs.Title})
	}
	var m *Message
	if ch != nil {
		m = &Message{
			Team: r.team.ID, Channel: ch.ID, TS: s.newTSLocked(), ThreadTS: r.str("thread_ts"), User: r.botUser(), BotID: r.botID(),
			Text: r.str("initial_comment"), Via: r.method,
		}
	}
	for _, fs := range stored {
		if m != nil {
			fs.Channels = append(fs.Channels, ch.ID)
			m.Files = append(m.Files, fs.ID)
		}
		s.storeFileLocked(fs)
	}
	if m != nil {
		s.recordVersionLocked(m, r.method)
		s.putMessageLocked(m)
		s.echoLocked(m, "")
	}
	return map[string]any{"files": out}, nil
}
