package slackemu_test

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// pngBytes is a real w×h PNG.
func pngBytes(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// noRedirects is an HTTP client that shows redirects instead of following.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, c *http.Client, u, token string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestFilesOnMentionAndMessageEvents(t *testing.T) {
	opts := fastOpts()
	opts.MessageEventsOnMention = true
	emu := newEmu(t, opts)
	c := startSocket(t, emu, true)
	c.next(t, socketmode.EventTypeHello)
	img := pngBytes(t, 700, 300)
	p, err := emu.Post(slackemu.UserPost{
		Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice, Text: "what does this error mean?", Mention: true,
		Files: []slackemu.File{
			{Name: "error.png", Content: img},
			{Name: "notes.txt", Content: []byte("line one\nline two\n")},
			{Name: "snippet", Title: "main.go", Mode: "snippet", Filetype: "go", Content: []byte("package main\n")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Files) != 3 || p.Files[0].ID == "" || p.Files[0].Width != 700 || p.Files[0].Height != 300 {
		t.Fatalf("Posted.Files = %+v", p.Files)
	}
	for range 2 {
		api := c.next(t, socketmode.EventTypeEventsAPI).Data.(slackevents.EventsAPIEvent)
		var files []slack.File
		switch ev := api.InnerEvent.Data.(type) {
		case *slackevents.AppMentionEvent:
			files = ev.Files
		case *slackevents.MessageEvent:
			if ev.SubType != "file_share" {
				t.Errorf("message subtype %q, want file_share", ev.SubType)
			}
			files = ev.Message.Files
		default:
			t.Fatalf("event %T", ev)
		}
		if len(files) != 3 {
			t.Fatalf("%s: %d files", api.InnerEvent.Type, len(files))
		}
		f := files[0]
		if f.ID != p.Files[0].ID || f.Name != "error.png" || f.Mimetype != "image/png" || f.Filetype != "png" || f.PrettyType != "PNG" ||
			f.Size != len(img) || f.Mode != "hosted" || f.User != slackemu.UserAlice || f.UserTeam != slackemu.TeamID ||
			f.OriginalW != 700 || f.Thumb360 == "" || f.Thumb480 == "" || f.Thumb1024 != "" || f.Thumb360W != 360 ||
			!strings.HasPrefix(f.URLPrivate, emu.URL()+"/files-pri/"+slackemu.TeamID+"-"+f.ID+"/") ||
			!strings.Contains(f.URLPrivateDownload, "/download/") {
			t.Errorf("%s: image file = %+v", api.InnerEvent.Type, f)
		}
		if s := files[2]; s.Mode != "snippet" || s.Filetype != "go" || s.PrettyType != "Go" || s.Mimetype != "text/plain" || !s.Editable {
			t.Errorf("snippet = %+v", s)
		}
		if tf := files[1]; tf.Mimetype != "text/plain" || tf.Filetype != "text" || tf.PrettyType != "Plain Text" {
			t.Errorf("text file = %+v", tf)
		}
	}
}

func TestFileHostAuthAndSignInRedirect(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	img := pngBytes(t, 10, 10)
	p, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice, Text: "x",
		Files: []slackemu.File{{Name: "shot one.png", Content: img}}})
	if err != nil {
		t.Fatal(err)
	}
	f := p.Files[0]

	// The real client downloads with the bot token, from either URL.
	api := botClient(emu)
	for _, u := range []string{f.URLPrivateDownload, f.URLPrivate} {
		var got bytes.Buffer
		if err := api.GetFile(u, &got); err != nil {
			t.Fatalf("GetFile(%s): %v", u, err)
		}
		if !bytes.Equal(got.Bytes(), img) {
			t.Errorf("GetFile(%s): %d bytes, want the %d uploaded", u, got.Len(), len(img))
		}
	}
	resp, _ := get(t, noRedirects, f.URLPrivateDownload, slackemu.BotToken)
	if ct := resp.Header.Get("Content-Type"); ct != "image/png" || !strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("download headers %v", resp.Header)
	}

	// Without access: 302 to the sign-in page, which answers 200 HTML.
	path := f.URLPrivate[len(emu.URL()):]
	unescaped, _ := url.PathUnescape(path)
	for _, tc := range []struct{ name, token string }{
		{"no token", ""}, {"unknown token", "xoxb-nope"}, {"other workspace's token", slackemu.BotToken2}, {"app token", slackemu.AppToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := get(t, noRedirects, f.URLPrivate, tc.token)
			loc, _ := url.Parse(resp.Header.Get("Location"))
			if resp.StatusCode != http.StatusFound || loc == nil || loc.Path != "/" || loc.Query().Get("redir") != unescaped {
				t.Fatalf("HTTP %d Location %q, want 302 to /?redir=%s", resp.StatusCode, resp.Header.Get("Location"), unescaped)
			}
			resp, body := get(t, http.DefaultClient, f.URLPrivate, tc.token)
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || bytes.Contains(body, img) {
				t.Errorf("after the redirect: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
		})
	}
	// slack-go recognises the sign-in page and says so.
	other := slack.New(slackemu.BotToken2, slack.OptionAPIURL(emu.APIURL()))
	if err := other.GetFile(f.URLPrivate, io.Discard); err == nil || !strings.Contains(err.Error(), "sign-in") {
		t.Errorf("GetFile with another workspace's token: %v, want the sign-in error", err)
	}
	var served int
	for _, d := range emu.Downloads() {
		if d.Served {
			served++
			if d.Team != slackemu.TeamID || d.FileID != f.ID {
				t.Errorf("download record %+v", d)
			}
		}
	}
	if served != 3 {
		t.Errorf("%d downloads served, want 3", served)
	}
}

func TestFileHostNeedsFilesReadAndVisibility(t *testing.T) {
	teams := slackemu.DefaultTeams()
	teams[0].Scopes = []string{"chat:write", "channels:history"} // no files:read
	teams[1].Scopes = []string{"files:read"}
	emu := newEmu(t, slackemu.Options{Teams: teams})
	p, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice,
		Files: []slackemu.File{{Name: "a.txt", Content: []byte("secret")}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, noRedirects, p.Files[0].URLPrivate, slackemu.BotToken); resp.StatusCode != http.StatusFound {
		t.Errorf("token without files:read: HTTP %d, want 302", resp.StatusCode)
	}
	if _, _, _, err := botClient(emu).GetFileInfo(p.Files[0].ID, 0, 0); err == nil || err.Error() != "missing_scope" {
		t.Errorf("files.info without files:read: %v", err)
	}
	// A file shared only where the bot is not.
	q, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID2, Channel: slackemu.ChannelT2, User: slackemu.UserT2, Silent: true,
		Files: []slackemu.File{{Name: "b.txt", Content: []byte("b")}}})
	if err != nil {
		t.Fatal(err)
	}
	emu.SetBotMember(slackemu.ChannelT2, false)
	if resp, _ := get(t, noRedirects, q.Files[0].URLPrivate, slackemu.BotToken2); resp.StatusCode != http.StatusFound {
		t.Errorf("file in a channel the bot left: HTTP %d, want 302", resp.StatusCode)
	}
	emu.SetBotMember(slackemu.ChannelT2, true)
	if resp, body := get(t, noRedirects, q.Files[0].URLPrivate, slackemu.BotToken2); resp.StatusCode != http.StatusOK || string(body) != "b" {
		t.Errorf("visible again: HTTP %d %q", resp.StatusCode, body)
	}
}

func TestSlackConnectStubsAndFilesInfo(t *testing.T) {
	emu := newEmu(t, fastOpts())
	c := startSocket(t, emu, true)
	c.next(t, socketmode.EventTypeHello)
	p, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserStranger, Text: "from outside", Mention: true,
		Files: []slackemu.File{{Name: "report.pdf", Content: []byte("%PDF-1.4 x"), ConnectStub: true}, {Name: "denied.txt", Content: []byte("no"), ConnectStub: true, AccessDenied: true}}})
	if err != nil {
		t.Fatal(err)
	}
	ev := c.next(t, socketmode.EventTypeEventsAPI)
	inner := ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AppMentionEvent)
	if inner.UserTeam != "T999" || inner.SourceTeam != "T999" {
		t.Errorf("external user's event: user_team %q source_team %q, want T999", inner.UserTeam, inner.SourceTeam)
	}
	stub := inner.Files[0]
	if stub.ID != p.Files[0].ID || stub.Mode != "file_access" || stub.FileAccess != "check_file_info" || stub.URLPrivate != "" || stub.Name != "" {
		t.Errorf("stub = %+v", stub)
	}
	api := botClient(emu)
	f, _, paging, err := api.GetFileInfo(stub.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "report.pdf" || f.Mimetype != "application/pdf" || f.Filetype != "pdf" || f.URLPrivateDownload == "" || paging == nil || f.UserTeam != "T999" {
		t.Errorf("files.info = %+v", f)
	}
	var got bytes.Buffer
	if err := api.GetFile(f.URLPrivateDownload, &got); err != nil || got.String() != "%PDF-1.4 x" {
		t.Errorf("download after files.info: %q, %v", got.String(), err)
	}
	if _, _, _, err := api.GetFileInfo(p.Files[1].ID, 0, 0); err == nil || err.Error() != "access_denied" {
		t.Errorf("files.info on a denied Connect file: %v, want access_denied", err)
	}
	if _, _, _, err := api.GetFileInfo("FNOPE", 0, 0); err == nil || err.Error() != "file_not_found" {
		t.Errorf("files.info on an unknown file: %v", err)
	}
	if _, _, _, err := slack.New(slackemu.BotToken2, slack.OptionAPIURL(emu.APIURL())).GetFileInfo(stub.ID, 0, 0); err == nil || err.Error() != "file_not_found" {
		t.Errorf("files.info from another workspace: %v, want file_not_found", err)
	}
	// conversations.replies carries the whole file, not the stub.
	msgs, _, _, err := api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: p.TS})
	if err != nil || len(msgs) != 1 || len(msgs[0].Files) != 2 || msgs[0].Files[0].Name != "report.pdf" || msgs[0].Files[0].URLPrivate == "" {
		t.Errorf("replies = %+v, %v", msgs, err)
	}
}

func TestExternalAndRedirectingFiles(t *testing.T) {
	tripwire := "http://127.0.0.1:1/tripwire/doc"
	emu := newEmu(t, slackemu.Options{})
	p, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice, Silent: true,
		Files: []slackemu.File{
			{Name: "Plan", IsExternal: true, ExternalType: "gdrive", ExternalURL: "https://docs.example.com/d/1"},
			{Name: "moved.png", Content: pngBytes(t, 2, 2), RedirectTo: tripwire},
		}})
	if err != nil {
		t.Fatal(err)
	}
	ext := p.Files[0]
	if !ext.IsExternal || ext.Mode != "external" || ext.URLPrivate != "https://docs.example.com/d/1" || ext.URLPrivateDownload != "" {
		t.Errorf("external file = %+v", ext)
	}
	// slack-go itself refuses to send the token to a foreign host.
	if err := botClient(emu).GetFile(ext.URLPrivate, io.Discard); err == nil {
		t.Error("GetFile on an external URL: no error")
	}
	resp, _ := get(t, noRedirects, p.Files[1].URLPrivate, slackemu.BotToken)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != tripwire {
		t.Errorf("RedirectTo file: HTTP %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, d := range emu.Downloads() {
		if strings.Contains(d.Path, ext.ID) {
			t.Errorf("the external file was requested from the emulator: %+v", d)
		}
	}
}

func TestFileBytesLimitEvictsOldest(t *testing.T) {
	emu := newEmu(t, slackemu.Options{FileBytesLimit: 10})
	post := func(name, content string) slackemu.File {
		t.Helper()
		p, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice, Silent: true,
			Files: []slackemu.File{{Name: name, Content: []byte(content)}}})
		if err != nil {
			t.Fatal(err)
		}
		return p.Files[0]
	}
	a := post("a.txt", "123456")
	b := post("b.txt", "7890ab")
	if resp, _ := get(t, noRedirects, a.URLPrivate, slackemu.BotToken); resp.StatusCode != http.StatusNotFound {
		t.Errorf("evicted file: HTTP %d, want 404", resp.StatusCode)
	}
	if resp, body := get(t, noRedirects, b.URLPrivate, slackemu.BotToken); resp.StatusCode != http.StatusOK || string(body) != "7890ab" {
		t.Errorf("newest file: HTTP %d %q", resp.StatusCode, body)
	}
	if f, _ := emu.FileInfo(a.ID); !f.Evicted || f.Content != nil {
		t.Errorf("FileInfo(evicted) = %+v", f)
	}
	if _, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice,
		Files: []slackemu.File{{Name: "big.bin", Content: make([]byte, 11)}}}); err == nil {
		t.Error("a file over FileBytesLimit was accepted")
	}
}

func TestFileDownloadFault(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	p, _ := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice, Silent: true,
		Files: []slackemu.File{{Name: "a.txt", Content: []byte("a")}}})
	emu.InjectFault("files.download", slackemu.Fault{Status: http.StatusInternalServerError})
	if err := botClient(emu).GetFile(p.Files[0].URLPrivate, io.Discard); err == nil {
		t.Error("injected 500: no error")
	}
	if err := botClient(emu).GetFile(p.Files[0].URLPrivate, io.Discard); err != nil {
		t.Errorf("after the fault: %v", err)
	}
}

// TestFileShareEventCarriesSlackFields compares a message event with files
// with the one bolt-python's tests recorded from Slack.
func TestFileShareEventCarriesSlackFields(t *testing.T) {
	var fixture struct {
		EventPayload map[string]any `json:"event_payload"`
	}
	readJSON(t, "testdata/events-message-file-share.json", &fixture)
	emu := newEmu(t, fastOpts())
	ws := dialRaw(t, emu)
	readFrame(t, ws) // hello
	if _, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice, Text: "Hi there!",
		Files: []slackemu.File{{Name: "file.png", Content: pngBytes(t, 1134, 362)}}}); err != nil {
		t.Fatal(err)
	}
	got := readFrame(t, ws)["payload"].(map[string]any)
	// thumb_tiny (an inline JPEG preview) is not emulated.
	for _, m := range missingKeys(fixture.EventPayload, got, "") {
		if m != "event.files.thumb_tiny" {
			t.Errorf("field %s missing", m)
		}
	}
	ev := got["event"].(map[string]any)
	f := ev["files"].([]any)[0].(map[string]any)
	for k, want := range map[string]any{"thumb_360_w": 360.0, "thumb_360_h": 115.0, "thumb_1024_w": 1024.0, "thumb_1024_h": 327.0, "original_w": 1134.0} {
		if f[k] != want {
			t.Errorf("%s = %v, want %v", k, f[k], want)
		}
	}
	b, _ := json.Marshal(ev["subtype"])
	if string(b) != `"file_share"` || !slices.Contains([]string{"channel"}, ev["channel_type"].(string)) {
		t.Errorf("subtype %s channel_type %v", b, ev["channel_type"])
	}
}

func TestUploadFileWithSlackGo(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)
	parent := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "give me the log", "")
	content := "line 1\nline 2\n"
	sum, err := api.UploadFile(slack.UploadFileParameters{Filename: "out.log", FileSize: len(content), Content: content, Title: "Tool output",
		Channel: slackemu.ChannelGen, ThreadTimestamp: parent.TS, InitialComment: "Here it is"})
	if err != nil {
		t.Fatal(err)
	}
	f, ok := emu.FileInfo(sum.ID)
	if !ok || string(f.Content) != content || f.Title != "Tool output" || f.User != slackemu.BotUserID || !slices.Equal(f.Channels, []string{slackemu.ChannelGen}) {
		t.Fatalf("uploaded file = %+v", f)
	}
	replies := emu.BotReplies(slackemu.ChannelGen, parent.TS)
	if len(replies) != 1 || replies[0].Text != "Here it is" || !slices.Equal(replies[0].Files, []string{sum.ID}) {
		t.Errorf("bot reply = %+v", replies)
	}
	var got bytes.Buffer
	if err := api.GetFile(f.URLPrivateDownload, &got); err != nil || got.String() != content {
		t.Errorf("download of the upload: %q, %v", got.String(), err)
	}
	// Declared length is a cap.
	if _, err := api.UploadFile(slack.UploadFileParameters{Filename: "x.txt", FileSize: 2, Content: "toolong", Channel: slackemu.ChannelGen}); err == nil {
		t.Error("upload longer than declared: no error")
	}
	if _, err := api.CompleteUploadExternalContext(t.Context(), slack.CompleteUploadExternalParameters{Files: []slack.FileSummary{{ID: "FNOPE"}}}); errString(err) != "file_not_found" {
		t.Errorf("completing an unknown upload: %v", err)
	}
}

func TestLeaksFindsUploadedContent(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	const canary = "sk-canary-123"
	if _, err := botClient(emu).UploadFile(slack.UploadFileParameters{Filename: "out.txt", FileSize: 20, Content: "token=" + canary, Channel: slackemu.ChannelGen}); err != nil {
		t.Fatal(err)
	}
	if leaks := emu.Leaks(canary); !slices.ContainsFunc(leaks, func(l string) bool { return strings.HasPrefix(l, "file uploaded by the app") }) {
		t.Errorf("Leaks = %v, want the uploaded file", leaks)
	}
	// A person's file is not the app's leak.
	_, _ = emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice, Silent: true,
		Files: []slackemu.File{{Name: "x.txt", Content: []byte("other-canary")}}})
	if leaks := emu.Leaks("other-canary"); len(leaks) != 0 {
		t.Errorf("Leaks of a person's file = %v", leaks)
	}
}
