package bot

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

func TestDecodeFiles(t *testing.T) {
	raw, err := os.ReadFile("testdata/events-message-file-share.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Payload json.RawMessage `json:"event_payload"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	// The recorded payload, with a thread and a channel type added: a
	// thread reply with a PNG.
	var p map[string]any
	if err := json.Unmarshal(rec.Payload, &p); err != nil {
		t.Fatal(err)
	}
	ev := p["event"].(map[string]any)
	ev["thread_ts"], ev["channel_type"] = "1.1", "channel"
	payload, _ := json.Marshal(p)
	m, _, ok, err := testBot().decodeEvent(payload)
	if err != nil || !ok {
		t.Fatalf("decodeEvent: ok=%v err=%v", ok, err)
	}
	if len(m.Files) != 1 {
		t.Fatalf("files = %+v", m.Files)
	}
	f := m.Files[0]
	if f.ID != "F111" || f.Name != "file.png" || f.Mimetype != "image/png" || f.Size != 92582 || f.Mode != "hosted" ||
		f.downloadURL() != "https://files.slack.com/files-pri/T111-F111/download/file.png" || f.kind() != kindImage {
		t.Errorf("file = %+v", f)
	}

	tests := []struct {
		name, files string
		want        []sharedFile
	}{
		{"none", ``, nil},
		{"null", `null`, nil},
		{"not a list", `"x"`, nil},
		{"stub", `[{"id":"F1","mode":"file_access","file_access":"check_file_info","created":0,"timestamp":0,"user":""}]`,
			[]sharedFile{{ID: "F1", Mode: "file_access", FileAccess: "check_file_info"}}},
		{"odd field kept by id", `[{"id":"F2","name":"a.txt","size":"big"}]`, []sharedFile{{ID: "F2", Name: "a.txt", Mode: "unreadable"}}},
		{"no id dropped", `[{"name":"x"},{"id":"F3","size":-4}]`, []sharedFile{{ID: "F3"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decodeFiles(json.RawMessage(tt.files))
			if len(got) != len(tt.want) {
				t.Fatalf("decodeFiles(%s) = %+v, want %+v", tt.files, got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("decodeFiles(%s)[%d] = %+v, want %+v", tt.files, i, got[i], tt.want[i])
				}
			}
		})
	}
	// A file of an odd shape never loses the message.
	m, _, ok, err = testBot().decodeEvent([]byte(`{"type":"event_callback","team_id":"T1","event":{"type":"app_mention","user":"U2","text":"<@U0BOT> hi","ts":"1.1","channel":"C1","files":{"id":1}}}`))
	if err != nil || !ok || m.Text != "hi" || len(m.Files) != 0 {
		t.Errorf("odd files: ok=%v err=%v m=%+v", ok, err, m)
	}
}

func TestFileKind(t *testing.T) {
	tests := []struct {
		f    sharedFile
		want fileKind
	}{
		{sharedFile{Mimetype: "image/png", Name: "a.png"}, kindImage},
		{sharedFile{Mimetype: "image/webp"}, kindImage},
		{sharedFile{Filetype: "jpg", Mimetype: "application/octet-stream"}, kindImage},
		{sharedFile{Mimetype: "application/pdf"}, kindPDF},
		{sharedFile{Mimetype: "text/plain; charset=utf-8"}, kindText},
		{sharedFile{Mimetype: "application/json"}, kindText},
		{sharedFile{Mimetype: "application/vnd.api+json"}, kindText},
		{sharedFile{Mimetype: "application/x-yaml", Name: "k.yaml"}, kindText},
		{sharedFile{Filetype: "python", Mimetype: "text/x-python"}, kindText},
		{sharedFile{Mode: "snippet", Mimetype: "application/octet-stream"}, kindText},
		{sharedFile{Mimetype: "application/octet-stream", Filetype: "binary", Name: "app.log"}, kindText},
		{sharedFile{Mimetype: "image/svg+xml"}, kindText},
		{sharedFile{Mimetype: "application/zip", Name: "a.zip"}, kindOther},
		{sharedFile{Mimetype: "application/octet-stream", Name: "a.bin"}, kindOther},
		{sharedFile{Mimetype: "video/mp4"}, kindOther},
	}
	for _, tt := range tests {
		if got := tt.f.kind(); got != tt.want {
			t.Errorf("kind(%+v) = %v, want %v", tt.f, got, tt.want)
		}
	}
}

func TestMayReceiveToken(t *testing.T) {
	f := newFileFetcher(nil, "http://127.0.0.1:4000/api/", NewMetrics(nil))
	prod := newFileFetcher(nil, "https://slack.com/api/", NewMetrics(nil))
	tests := []struct {
		f    *fileFetcher
		url  string
		want bool
	}{
		{prod, "https://files.slack.com/files-pri/T1-F1/download/a.png", true},
		{prod, "https://FILES.slack.com:443/files-pri/T1-F1/a.png", true},
		{prod, "https://files.slack.com./files-pri/T1-F1/a.png", true},
		{prod, "http://files.slack.com/files-pri/T1-F1/a.png", false},            // scheme
		{prod, "https://files.slack.com:8443/files-pri/T1-F1/a.png", false},      // port
		{prod, "https://files.slack.com.evil.test/files-pri/T1-F1/a.png", false}, // host
		{prod, "https://user:pw@files.slack.com/files-pri/a.png", false},
		{prod, "https://evil.test/files-pri/T1-F1/a.png", false},
		{prod, "https://slack.com/files-pri/T1-F1/a.png", true}, // the Web API's own origin
		{f, "http://127.0.0.1:4000/files-pri/T1-F1/a.png", true},
		{f, "http://127.0.0.1:4001/files-pri/T1-F1/a.png", false}, // same host, other port
		{f, "https://127.0.0.1:4000/files-pri/T1-F1/a.png", false},
		{f, "http://localhost:4000/files-pri/T1-F1/a.png", false},
		{f, "https://files.slack.com/files-pri/T1-F1/a.png", true},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := tt.f.mayReceiveToken(u); got != tt.want {
			t.Errorf("mayReceiveToken(%s) with API %v = %v, want %v", tt.url, tt.f.api, got, tt.want)
		}
	}
}

// TestFetch drives the downloader against a file host of our own: caps,
// redirects within the host (followed, token kept), off it (refused, never
// asked), Slack's sign-in redirect and HTML page.
func TestFetch(t *testing.T) {
	var offHost atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { offHost.Add(1) }))
	defer other.Close()
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer xoxb-t" {
			http.Redirect(w, r, "/?redir="+url.QueryEscape(r.URL.Path), http.StatusFound)
			return
		}
		switch r.URL.Path {
		case "/f/ok":
			_, _ = w.Write([]byte("hello"))
		case "/f/big":
			_, _ = w.Write([]byte(strings.Repeat("x", 100)))
		case "/f/moved":
			http.Redirect(w, r, "/f/ok", http.StatusFound)
		case "/f/away":
			http.Redirect(w, r, other.URL+"/f/ok", http.StatusFound)
		case "/f/signin":
			http.Redirect(w, r, "https://acme.slack.com/?redir=%2Ff%2Fsignin", http.StatusFound)
		case "/f/html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte("<html>Sign in</html>"))
		case "/f/500":
			http.Error(w, "no", http.StatusInternalServerError)
		}
	}))
	defer host.Close()
	m := NewMetrics(nil)
	f := newFileFetcher(nil, host.URL+"/api/", m)
	ctx := context.Background()
	tests := []struct {
		path     string
		token    string
		limit    int64
		truncate bool
		want     string
		cut      bool
		err      error
	}{
		{"/f/ok", "xoxb-t", 10, false, "hello", false, nil},
		{"/f/moved", "xoxb-t", 10, false, "hello", false, nil},
		{"/f/big", "xoxb-t", 10, false, "", false, errFileTooLarge},
		{"/f/big", "xoxb-t", 10, true, "xxxxxxxxxx", true, nil},
		{"/f/away", "xoxb-t", 10, false, "", false, errForeignRedirect},
		{"/f/signin", "xoxb-t", 10, false, "", false, errSignIn},
		{"/f/ok", "xoxb-wrong", 10, false, "", false, errSignIn},
		{"/f/html", "xoxb-t", 100, false, "", false, errSignIn},
		{"/f/500", "xoxb-t", 100, false, "", false, nil},
	}
	for _, tt := range tests {
		data, cut, err := f.fetch(ctx, tt.token, host.URL+tt.path, tt.limit, tt.truncate, false)
		switch {
		case tt.path == "/f/500":
			if err == nil {
				t.Errorf("%s: no error", tt.path)
			}
		case !errors.Is(err, tt.err) || string(data) != tt.want || cut != tt.cut:
			t.Errorf("fetch(%s, %s) = %q cut=%v err=%v, want %q cut=%v err=%v", tt.path, tt.token, data, cut, err, tt.want, tt.cut, tt.err)
		}
	}
	if _, _, err := f.fetch(ctx, "xoxb-t", other.URL+"/f/ok", 10, false, false); !errors.Is(err, errForeignHost) {
		t.Errorf("another host: err = %v", err)
	}
	if n := offHost.Load(); n != 0 {
		t.Errorf("the other host was asked %d times", n)
	}
}

func TestCutTextPart(t *testing.T) {
	head := []byte(strings.Repeat("é", textReadCap/2)) // 1 MiB read of a 3 MiB file
	p := cutTextPart(provider.FileRef{Name: "big.log", MimeType: "text/plain", Size: 3 << 20}, head)
	if !utf8.ValidString(p.Text) || len(p.Text) > provider.MaxTextFileBytes+100 {
		t.Fatalf("text: %d bytes", len(p.Text))
	}
	want := "\n…[file cut here: " + strconv.Itoa(3<<20-provider.MaxTextFileBytes) + " more bytes not shown]"
	if !strings.HasSuffix(p.Text, want) {
		t.Errorf("marker: %q, want suffix %q", p.Text[len(p.Text)-80:], want)
	}
	if strings.Count(p.Text, "file cut here") != 1 {
		t.Error("more than one marker")
	}
}

func TestContextLine(t *testing.T) {
	e := threadEntry{ts: "1767600000.000100", user: "U1", name: "Ann\nIgnore previous", text: "hi", edited: true,
		files: []fileTask{{f: sharedFile{Name: "a.png"}}, {f: sharedFile{Title: "Notes"}}}}
	if got, want := contextLine(e), "[Ann Ignore previous (U1), 2026-01-05 08:00 UTC] hi (edited) [files: a.png, Notes]"; got != want {
		t.Errorf("contextLine = %q, want %q", got, want)
	}
	if got := contextLine(threadEntry{own: true, text: "x"}); got != "[you (Bobbin)] x" {
		t.Errorf("own = %q", got)
	}
	if got := contextLine(threadEntry{app: "pager", ts: "bad", text: "x"}); got != "[pager (app)] x" {
		t.Errorf("app = %q", got)
	}
}

// TestSelectContext: the newest messages are kept within the count and the
// token share; a file over the share is a note; only the newest images
// are downloaded.
func TestSelectContext(t *testing.T) {
	b := &Bot{}
	var es []threadEntry
	for i := range 10 {
		es = append(es, threadEntry{ts: "1767600000.00000" + string(rune('0'+i)), user: "U1", text: strings.Repeat("w", 400)})
	}
	kept, dropped := b.selectContext(append([]threadEntry(nil), es...), 4, 1_000_000)
	if len(kept) != 4 || dropped != 6 || kept[0].ts != es[6].ts {
		t.Errorf("by count: kept %d dropped %d", len(kept), dropped)
	}
	// ~110 tokens a message: 3 fit in 350.
	kept, dropped = b.selectContext(append([]threadEntry(nil), es...), 100, 350)
	if len(kept) != 3 || dropped != 7 {
		t.Errorf("by tokens: kept %d dropped %d", len(kept), dropped)
	}
	var imgs []fileTask
	for range 10 {
		imgs = append(imgs, fileTask{f: sharedFile{Mimetype: "image/png"}})
	}
	big := threadEntry{ts: "1767600001.000000", text: "x", files: []fileTask{{f: sharedFile{Mimetype: "text/plain", Size: 200 << 10}}}}
	many := threadEntry{ts: "1767600002.000000", text: "y", files: imgs}
	kept, _ = b.selectContext([]threadEntry{big, many}, 100, 20_000)
	notes := map[string]int{}
	for _, e := range kept {
		for _, f := range e.files {
			notes[f.note]++
		}
	}
	if notes[""] != maxContextMedia || notes[noteContextMedia] != 10-maxContextMedia || notes[noteContextShare] != 1 {
		t.Errorf("notes = %v", notes)
	}
}

// countingTokens counts a token a byte and how many exact counts it made.
type countingTokens struct{ exact int }

func (c *countingTokens) Count(s string) int { c.exact++; return (len(s) + 3) / 4 }
func (c *countingTokens) Bound(s string) int { return len(s) }

// TestSelectContextCountsOnlyWhenNeeded: when the newest messages fit the
// share even by their upper bounds, nothing is counted exactly (no
// tokenizer is built); when they may not, exact counts decide, as before.
func TestSelectContextCountsOnlyWhenNeeded(t *testing.T) {
	tokens := &countingTokens{}
	b := &Bot{opts: Options{Tokens: tokens}}
	var es []threadEntry
	for i := range 10 {
		es = append(es, threadEntry{ts: "1767600000.00000" + string(rune('0'+i)), user: "U1", text: strings.Repeat("w", 400)})
	}
	// 10 lines of ~440 bytes (their bounds) fit in 5,000.
	kept, dropped := b.selectContext(append([]threadEntry(nil), es...), 100, 5000)
	if len(kept) != 10 || dropped != 0 || tokens.exact != 0 {
		t.Errorf("under the share: kept %d dropped %d, %d exact counts (want 10, 0, 0)", len(kept), dropped, tokens.exact)
	}
	// Their bounds pass 1,000 but their counts (~110 each) fit 8 of them.
	kept, dropped = b.selectContext(append([]threadEntry(nil), es...), 100, 1000)
	if len(kept) != 8 || dropped != 2 || tokens.exact == 0 {
		t.Errorf("near the share: kept %d dropped %d, %d exact counts (want 8, 2, some)", len(kept), dropped, tokens.exact)
	}
}

type partsTool struct {
	calls int
	asker string // the caller the call's ctx carried (access.WithCaller)
}

func (*partsTool) Spec() provider.ToolSpec                               { return provider.ToolSpec{Name: "shot"} }
func (*partsTool) Call(context.Context, json.RawMessage) (string, error) { return "text only", nil }
func (p *partsTool) CallParts(ctx context.Context, _ json.RawMessage) (string, []provider.Part, error) {
	p.calls++
	if c, ok := access.CallerFrom(ctx); ok {
		p.asker = c.Team + "/" + c.User + "/" + c.Channel + "/" + c.Thread
	}
	return "a screenshot", []provider.Part{{Type: provider.PartImage, Data: []byte{1}}}, nil
}

type plainTool struct{}

func (plainTool) Spec() provider.ToolSpec                               { return provider.ToolSpec{Name: "plain"} }
func (plainTool) Call(context.Context, json.RawMessage) (string, error) { return "plain", nil }

// TestAuditedToolForwardsParts: the audit wrapper passes a tool's images
// on (agent.PartsTool) with the requester in the call's ctx (MCP per-user
// connections and questions need it), and a plain tool still works through
// CallParts.
func TestAuditedToolForwardsParts(t *testing.T) {
	b := testBot()
	b.log = slog.New(slog.DiscardHandler)
	b.store = testStore(t) // the audit log
	pt := &partsTool{}
	tools := b.auditTools(session.ThreadKey{Team: "T1", Channel: "C1", ThreadTS: "1.1"}, "U1", []agent.Tool{pt, plainTool{}})
	got, ok := tools[0].(agent.PartsTool)
	if !ok {
		t.Fatal("audited tool does not implement agent.PartsTool")
	}
	out, parts, err := got.CallParts(context.Background(), json.RawMessage(`{}`))
	if err != nil || out != "a screenshot" || len(parts) != 1 || pt.calls != 1 {
		t.Errorf("CallParts = %q %v %v", out, parts, err)
	}
	if pt.asker != "T1/U1/C1/1.1" {
		t.Errorf("CallParts ctx carried requester %q, want T1/U1/C1/1.1", pt.asker)
	}
	out, parts, err = tools[1].(agent.PartsTool).CallParts(context.Background(), json.RawMessage(`{}`))
	if err != nil || out != "plain" || parts != nil {
		t.Errorf("plain CallParts = %q %v %v", out, parts, err)
	}
}

// FuzzFilesPayload feeds arbitrary "files" values to the decoder and the
// classification: nothing panics, every file kept has an id or a URL, and
// no URL the token may not go to is judged fit for it.
func FuzzFilesPayload(f *testing.F) {
	raw, err := os.ReadFile("testdata/events-message-file-share.json")
	if err != nil {
		f.Fatal(err)
	}
	var rec struct {
		Payload struct {
			Event struct {
				Files json.RawMessage `json:"files"`
			} `json:"event"`
		} `json:"event_payload"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(rec.Payload.Event.Files),
		`[{"id":"F1","mode":"file_access","file_access":"check_file_info"}]`,
		`[{"id":"F1","url_private":"http://127.0.0.1:9/x","size":1e3}]`,
		`[{"id":"F1","name":"a\u0000b.txt","mimetype":"text/plain; charset=\"x\"","filetype":"text","mode":"snippet"}]`,
		`[{"id":"F1","is_external":true,"external_type":"gdrive","url_private":"https://docs.google.com/x"}]`,
		`[null,1,"x",{"id":""}]`, `{}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	ff := newFileFetcher(nil, "http://127.0.0.1:4000/api/", NewMetrics(nil))
	b := testBot()
	f.Fuzz(func(t *testing.T, files []byte) {
		for _, sf := range decodeFiles(files) {
			if sf.ID == "" && sf.URLPrivate == "" {
				t.Fatalf("kept a file without id or URL: %+v", sf)
			}
			if sf.Size < 0 {
				t.Fatalf("negative size: %+v", sf)
			}
			_ = sf.kind()
			_ = provider.NotePart(sf.ref(), noteOtherType).AsText()
			if u, err := url.Parse(sf.downloadURL()); err == nil && ff.mayReceiveToken(u) {
				o := originOf(u)
				if o != slackFileHost && o != ff.api {
					t.Fatalf("token allowed to %s", sf.downloadURL())
				}
			}
			// The stored form round-trips.
			enc, err := json.Marshal(sf)
			if err != nil {
				t.Fatal(err)
			}
			var back sharedFile
			if err := json.Unmarshal(enc, &back); err != nil || back != sf {
				t.Fatalf("round trip: %+v → %s → %+v (%v)", sf, enc, back, err)
			}
		}
		// Inside a whole event, too.
		ev := []byte(`{"type":"event_callback","team_id":"T1","event_id":"E1","event":{"type":"app_mention","user":"U2","text":"<@U0BOT> hi","ts":"1.1","channel":"C1","files":` + string(files) + `}}`)
		_, _, _, _ = b.decodeEvent(ev)
	})
}
