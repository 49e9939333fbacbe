package bot_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/session"
)

// testPNG is a small real PNG (w×h, a gradient).
func testPNG(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 7), uint8(y * 5), uint8(x ^ y), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testPDF is a minimal one-page PDF.
var testPDF = []byte("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n3 0 obj << /Type /Page /Parent 2 0 R >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n")

// mediaOf returns the request's media of kind.
func mediaOf(r llmemu.Recorded, kind string) []llmemu.Media {
	var out []llmemu.Media
	for _, m := range r.Media() {
		if m.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

// TestE2EFilesOnMention: a PNG, a text file, a PDF, an oversized image and
// an unknown type shared with a mention: an image part (the same bytes,
// valid base64), the text inlined, a document/file part, and notes for the
// other two; only the three are downloaded, with the bot token.
func TestE2EFilesOnMention(t *testing.T) {
	pic := testPNG(t, 64, 48)
	eachProvider(t, func(t *testing.T, prov string) {
		h := newHarness(t, harnessOpts{provider: prov})
		p := h.post(slackemu.UserPost{User: slackemu.UserAlice, Mention: true, Text: "what does this error mean?", Files: []slackemu.File{
			{Name: "shot.png", Content: pic},
			{Name: "notes.txt", Content: []byte("step 1: restart\nstep 2: ERR_GATEWAY_502\n")},
			{Name: "spec.pdf", Content: testPDF},
			{Name: "huge.png", Content: make([]byte, 5<<20+1)},
			{Name: "bundle.zip", Content: []byte("PK\x03\x04 not really")},
		}})
		got := h.waitReply(slackemu.ChannelGen, p.TS)
		if want := h.lastAnswer(); got != want {
			t.Errorf("reply = %q, want %q", got, want)
		}
		r := h.llm.Requests()[0]
		imgs, docs := mediaOf(r, "image"), mediaOf(r, "document")
		if len(imgs) != 1 || !bytes.Equal(imgs[0].Data, pic) || imgs[0].MimeType != "image/png" || imgs[0].Err != "" {
			t.Fatalf("images = %+v, want the PNG's bytes", imgs)
		}
		if len(docs) != 1 || !bytes.Equal(docs[0].Data, testPDF) {
			t.Fatalf("documents = %d, want the PDF", len(docs))
		}
		// The base64 on the wire decodes to the same bytes (llmemu decoded
		// it; check the raw body carries the standard encoding too).
		if !bytes.Contains(r.Body, []byte(base64.StdEncoding.EncodeToString(pic))) {
			t.Error("request body lacks the PNG as standard base64")
		}
		text := userText(r)
		for _, want := range []string{
			"[file notes.txt (text/plain, 40 bytes)]\nstep 1: restart\nstep 2: ERR_GATEWAY_502",
			"[image huge.png (image/png, 5.0 MB): larger than the 5 MB limit for images]",
			"[file bundle.zip (application/zip, 15 bytes): a file type the model cannot read",
			"what does this error mean?",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("user text lacks %q:\n%s", want, text)
			}
		}
		served := map[string]bool{}
		for _, d := range h.emu.Downloads() {
			if d.TokenKind != "xoxb" {
				t.Errorf("download %s with token kind %q", d.Path, d.TokenKind)
			}
			served[d.Path[strings.LastIndexByte(d.Path, '/')+1:]] = d.Served
		}
		if len(served) != 3 || !served["shot.png"] || !served["notes.txt"] || !served["spec.pdf"] {
			t.Errorf("downloads = %v, want shot.png, notes.txt and spec.pdf only", served)
		}
		// The transcript keeps references, not bytes.
		_, msgs, err := h.store.Load(t.Context(), session.ThreadKey{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, ThreadTS: p.TS})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(msgs[0].Parts); n != 5 {
			t.Fatalf("stored message has %d parts, want 5", n)
		}
		ref := msgs[0].Parts[0].File
		if ref == nil || ref.SHA256 == "" || ref.URL == "" || ref.Width != 64 || ref.Height != 48 || len(msgs[0].Parts[0].Data) != 0 {
			t.Errorf("stored image reference = %+v", ref)
		}
	})
}

// tripwire is a server that must never be asked for anything: it records
// every request and whether it carried a token.
type tripwire struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string
}

func newTripwire(t *testing.T) *tripwire {
	tw := &tripwire{}
	tw.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw.mu.Lock()
		tw.hits = append(tw.hits, fmt.Sprintf("%s auth=%q", r.URL.Path, r.Header.Get("Authorization")))
		tw.mu.Unlock()
		_, _ = w.Write(testPDF)
	}))
	t.Cleanup(tw.Close)
	return tw
}

func (tw *tripwire) requests() []string {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return append([]string(nil), tw.hits...)
}

// TestE2EFileTokenStaysOnSlack: the bot token goes to Slack's file host
// only. A file URL on another host (same 127.0.0.1, another port) is never
// requested; a redirect from the file host to it is not followed; Slack's
// sign-in redirect is a note, not a file.
func TestE2EFileTokenStaysOnSlack(t *testing.T) {
	eachProvider(t, func(t *testing.T, prov string) {
		tw := newTripwire(t)
		h := newHarness(t, harnessOpts{provider: prov})
		// A hand-made event whose file URL is not on the file host.
		p := h.post(slackemu.UserPost{User: slackemu.UserAlice, Text: "thread for files", Silent: true})
		h.emu.DeliverEvent(slackemu.TeamID, map[string]any{
			"type": "app_mention", "user": slackemu.UserAlice, "text": "<@" + slackemu.BotUserID + "> look", "ts": "1767700000.000100",
			"thread_ts": p.TS, "channel": slackemu.ChannelGen,
			"files": []any{map[string]any{"id": "F0EVIL", "name": "evil.pdf", "mimetype": "application/pdf", "filetype": "pdf", "size": 100,
				"mode": "hosted", "url_private": tw.URL + "/files-pri/T111-F0EVIL/evil.pdf", "url_private_download": tw.URL + "/files-pri/T111-F0EVIL/download/evil.pdf"}},
		})
		h.waitReplies(slackemu.ChannelGen, p.TS, 0, 1)
		// A file on the host that redirects to the tripwire; one the bot
		// may not read (Slack's sign-in redirect).
		hidden, err := h.emu.AddFile(slackemu.TeamID, slackemu.UserBob, slackemu.File{Name: "private.pdf", Content: testPDF})
		if err != nil {
			t.Fatal(err)
		}
		h.post(slackemu.UserPost{User: slackemu.UserAlice, Mention: true, ThreadTS: p.TS, Text: "and these?", Files: []slackemu.File{
			{Name: "moved.pdf", Content: testPDF, RedirectTo: tw.URL + "/elsewhere/moved.pdf"},
		}})
		h.waitReplies(slackemu.ChannelGen, p.TS, 0, 2)
		h.emu.DeliverEvent(slackemu.TeamID, map[string]any{
			"type": "app_mention", "user": slackemu.UserAlice, "text": "<@" + slackemu.BotUserID + "> and this one", "ts": "1767700100.000100",
			"thread_ts": p.TS, "channel": slackemu.ChannelGen,
			"files": []any{map[string]any{"id": hidden.ID, "name": hidden.Name, "mimetype": hidden.Mimetype, "filetype": "pdf",
				"size": hidden.Size, "mode": "hosted", "url_private": hidden.URLPrivate, "url_private_download": hidden.URLPrivateDownload}},
		})
		h.waitReplies(slackemu.ChannelGen, p.TS, 0, 3)
		if hits := tw.requests(); len(hits) != 0 {
			t.Fatalf("the tripwire host was asked: %v", hits)
		}
		reqs := h.llm.Requests()
		for i, want := range []string{
			"[PDF evil.pdf (application/pdf, 100 bytes): not on Slack's file host, so it was not downloaded]",
			"[PDF moved.pdf (application/pdf, " + fmt.Sprint(len(testPDF)) + " bytes): not on Slack's file host, so it was not downloaded]",
			"[PDF private.pdf (application/pdf, " + fmt.Sprint(len(testPDF)) + " bytes): Slack did not let the bot download it]",
		} {
			if text := userText(reqs[i]); !strings.Contains(text, want) {
				t.Errorf("request %d lacks %q:\n%s", i+1, want, text)
			}
			if n := len(reqs[i].Media()); n != 0 {
				t.Errorf("request %d carries %d media", i+1, n)
			}
		}
	})
}

// TestE2EImagesRefused: an endpoint without vision refuses the image; the
// turn is retried once without it (a note instead) and answered.
func TestE2EImagesRefused(t *testing.T) {
	pic := testPNG(t, 32, 32)
	eachProvider(t, func(t *testing.T, prov string) {
		h := newHarness(t, harnessOpts{provider: prov, llm: llmemu.Options{Reject: llmemu.Rejects{Images: true}}})
		p := h.post(slackemu.UserPost{User: slackemu.UserAlice, Mention: true, Text: "what is in this picture?", Files: []slackemu.File{{Name: "cat.png", Content: pic}}})
		got := h.waitReply(slackemu.ChannelGen, p.TS)
		reqs := h.llm.Requests()
		if len(reqs) != 2 || reqs[0].Status != http.StatusBadRequest || reqs[1].Status != http.StatusOK || len(reqs[1].Media()) != 0 {
			t.Fatalf("requests: %d (want a refused one, then one retry without the image)", len(reqs))
		}
		if want := llmemu.AnswerFor(reqs[1].LastUserText()); got != want {
			t.Errorf("reply = %q, want %q", got, want)
		}
		if text := userText(reqs[1]); !strings.Contains(text, "[image cat.png (image/png") {
			t.Errorf("retry lacks the image note:\n%s", text)
		}
	})
}

// TestE2EImageAfterRestart: a restarted bot (a new process: empty caches)
// still gives the model the image of an earlier turn, downloading it again
// by its stored reference.
func TestE2EImageAfterRestart(t *testing.T) {
	pic := testPNG(t, 40, 30)
	eachProvider(t, func(t *testing.T, prov string) {
		h := newHarness(t, harnessOpts{provider: prov})
		p := h.post(slackemu.UserPost{User: slackemu.UserAlice, Mention: true, Text: "remember this chart", Files: []slackemu.File{{Name: "chart.png", Content: pic}}})
		h.waitReplies(slackemu.ChannelGen, p.TS, 0, 1)
		before := len(h.emu.Downloads())
		h.stop()
		h.opts.Agent = h.newAgent()
		h.start()
		h.emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "what was the highest bar?", p.TS)
		h.waitReplies(slackemu.ChannelGen, p.TS, 0, 2)
		reqs := h.llm.Requests()
		imgs := mediaOf(reqs[len(reqs)-1], "image")
		if len(imgs) != 1 || !bytes.Equal(imgs[0].Data, pic) {
			t.Fatalf("later turn's request has %d images, want the chart", len(imgs))
		}
		if after := len(h.emu.Downloads()); after != before+1 {
			t.Errorf("downloads %d → %d, want one more (fetched again by reference)", before, after)
		}
	})
}

// TestE2EFilesMore: a Slack Connect stub is opened with files.info; more
// than 8 images in one message leave the rest as notes; with image input
// off (LLM_IMAGES=false) images are references, never downloaded; a file
// in the thread's earlier messages reaches the model with the context.
func TestE2EFilesMore(t *testing.T) {
	pic := testPNG(t, 16, 16)
	t.Run("connect stub and nine images", func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		files := []slackemu.File{{Name: "shared.png", Content: pic, ConnectStub: true}}
		for i := range 9 {
			files = append(files, slackemu.File{Name: fmt.Sprintf("p%d.png", i), Content: testPNG(t, 8+i, 8)})
		}
		p := h.post(slackemu.UserPost{User: slackemu.UserAlice, Mention: true, Text: "compare these", Files: files})
		h.waitReply(slackemu.ChannelGen, p.TS)
		r := h.llm.Requests()[0]
		if n := len(mediaOf(r, "image")); n != 9 {
			t.Errorf("%d images sent, want 9 (the stub plus 8 of nine)", n)
		}
		if !bytes.Equal(mediaOf(r, "image")[0].Data, pic) {
			t.Error("the Slack Connect file's bytes are not the first image")
		}
		if text := userText(r); !strings.Contains(text, "[image p8.png (image/png, ") || !strings.Contains(text, "more than 8 images in one message") {
			t.Errorf("the ninth image is not a note:\n%s", text)
		}
		if n := len(h.emu.Calls("files.info")); n != 1 {
			t.Errorf("%d files.info calls, want 1", n)
		}
	})
	t.Run("images off", func(t *testing.T) {
		h := newHarness(t, harnessOpts{agent: func(o *agent.Options) { o.NoImages = true }})
		p := h.post(slackemu.UserPost{User: slackemu.UserAlice, Mention: true, Text: "see attached", Files: []slackemu.File{
			{Name: "a.png", Content: pic}, {Name: "b.pdf", Content: testPDF}, {Name: "c.txt", Content: []byte("plain words")},
		}})
		h.waitReply(slackemu.ChannelGen, p.TS)
		r := h.llm.Requests()[0]
		text := userText(r)
		if len(r.Media()) != 0 || !strings.Contains(text, "[image a.png (image/png, ") || !strings.Contains(text, "LLM_IMAGES=false") || !strings.Contains(text, "plain words") {
			t.Errorf("media %d, text:\n%s", len(r.Media()), text)
		}
		for _, d := range h.emu.Downloads() {
			if !strings.HasSuffix(d.Path, "/c.txt") {
				t.Errorf("downloaded %s with images off", d.Path)
			}
		}
	})
	t.Run("context files", func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		parent := h.post(slackemu.UserPost{User: slackemu.UserAlice, Text: "here are the logs", Silent: true, Files: []slackemu.File{
			{Name: "errors.log", Content: []byte("12:01 ERROR upstream timed out\n")}, {Name: "graph.png", Content: pic},
		}})
		h.post(slackemu.UserPost{User: slackemu.UserBob, Mention: true, Text: "what do the logs say?", ThreadTS: parent.TS})
		h.waitReplies(slackemu.ChannelGen, parent.TS, 0, 1)
		r := h.llm.Requests()[0]
		text := userText(r)
		if !inOrder(text, "here are the logs [files: errors.log, graph.png]", "12:01 ERROR upstream timed out", "what do the logs say?") {
			t.Errorf("context files not in the request:\n%s", text)
		}
		if imgs := mediaOf(r, "image"); len(imgs) != 1 || !bytes.Equal(imgs[0].Data, pic) {
			t.Errorf("the thread's image is not sent: %d", len(imgs))
		}
	})
}

// BenchmarkTurnImageToModel is the time from a mention reaching Slack to
// its request leaving the bot for the model (the model client's transport
// is called), without a file and with one ~1 MB PNG, for both providers:
// the difference is what the image adds before the model call (the
// download from the emulated file host, checks, the agent's preparation,
// encoding the request). B/op is the whole process's: bot, both emulators.
func BenchmarkTurnImageToModel(b *testing.B) {
	pic := noisePNG(b, 1<<20)
	for _, prov := range providers {
		for _, withImage := range []bool{false, true} {
			name := prov + "/none"
			if withImage {
				name = prov + "/1MB"
			}
			b.Run(name, func(b *testing.B) {
				sent := &sendTimes{next: http.DefaultTransport}
				h := newHarness(b, harnessOpts{provider: prov, emu: slackemu.Options{NoRateLimits: true}, bot: unlimitedEdits,
					modelClient: &http.Client{Transport: sent}})
				h.llm.SetResponder(func(llmemu.Recorded) llmemu.Reply { return llmemu.Reply{Text: "ok"} })
				var total time.Duration
				b.ResetTimer()
				for i := range b.N {
					p := slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice, Mention: true, Text: fmt.Sprintf("question %d", i)}
					if withImage {
						p.Files = []slackemu.File{{Name: "shot.png", Content: pic}}
					}
					start := time.Now()
					posted, err := h.emu.Post(p)
					if err != nil {
						b.Fatal(err)
					}
					h.waitReplyB(b, slackemu.ChannelGen, posted.TS)
					total += sent.last().Sub(start)
				}
				b.StopTimer()
				b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-model/op")
			})
		}
	}
}

// sendTimes notes when the last model request was sent.
type sendTimes struct {
	next http.RoundTripper
	mu   sync.Mutex
	at   time.Time
}

func (s *sendTimes) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.at = time.Now()
	s.mu.Unlock()
	return s.next.RoundTrip(r)
}

func (s *sendTimes) last() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at
}

// noisePNG is a PNG of about n bytes within the image limits (noise does
// not compress), so it is sent as it is.
func noisePNG(b testing.TB, n int) []byte {
	side := 1
	for side*side*3 < n { // three noise bytes a pixel (alpha is opaque)
		side++
	}
	img := image.NewNRGBA(image.Rect(0, 0, side, side))
	_, _ = rand.Read(img.Pix)
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 255
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}
