package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/bobbinbot/bobbin/internal/testlog"
	"github.com/bobbinbot/bobbin/provider"
	pt "github.com/bobbinbot/bobbin/provider/providertest"
)

// pngOf is a w×h PNG.
func pngOf(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i)
	}
	img.SetRGBA(0, 0, color.RGBA{255, 0, 0, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// memLoader is a FileLoader over an in-memory map of file id → bytes that
// counts its loads, like the bot's Slack loader minus the network.
type memLoader struct {
	mu    sync.Mutex
	files map[string][]byte
	fail  error
	loads map[string]int
}

func (l *memLoader) LoadFile(ctx context.Context, ref provider.FileRef) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loads == nil {
		l.loads = map[string]int{}
	}
	l.loads[ref.ID]++
	if l.fail != nil {
		return nil, l.fail
	}
	b, ok := l.files[ref.ID]
	if !ok {
		return nil, errors.New("file_not_found")
	}
	return b, nil
}

func (l *memLoader) count(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.loads[id]
}

// imageRef is the stored form of a shared image: a reference, no bytes.
func imageRef(id string, data []byte) provider.Part {
	_, w, h, _ := provider.SniffImage(data)
	return provider.Part{Type: provider.PartImage, File: &provider.FileRef{ID: id, Name: id + ".png", MimeType: provider.MimePNG,
		Size: int64(len(data)), SHA256: sum(data), Width: w, Height: h, URL: "https://files.slack.com/files-pri/T1-" + id + "/download/x.png"}}
}

// mediaOf returns the image/document parts of the request's messages.
func mediaOf(r provider.Request) []provider.Part {
	var out []provider.Part
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			if p.IsMedia() || p.Type == provider.PartNote {
				out = append(out, p)
			}
		}
	}
	return out
}

// TestFilesLoadedPerRequest: a stored reference gets its bytes from the
// loader for every step, the same bytes each time, loaded once per process.
func TestFilesLoadedPerRequest(t *testing.T) {
	img := pngOf(t, 64, 48)
	loader := &memLoader{files: map[string][]byte{"F1": img}}
	h := []provider.Message{{Role: provider.RoleUser, Content: "what is this?", Parts: []provider.Part{imageRef("F1", img)}}}
	e := newEnv(t, Options{}, h,
		pt.ToolCalls(pt.Call("c1", "look", `{}`)),
		pt.Text("A red dot."),
		pt.Text("Still a red dot."),
	)
	tool := hinted{&fakeTool{name: "look", schema: `{"type":"object"}`}, Hints{Allowed: true}}
	turn := e.turn(h, tool)
	turn.Files = loader
	res, err := e.agent.Run(t.Context(), turn)
	if err != nil {
		t.Fatal(err)
	}
	// A second turn from the stored transcript (no bytes anywhere).
	var stored []provider.Message
	for _, m := range res.Messages {
		b, _ := json.Marshal(m)
		var back provider.Message
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, back)
	}
	turn2 := e.turn(append(stored, user("and now?")), tool)
	turn2.Files = loader
	if _, err := e.agent.Run(t.Context(), turn2); err != nil {
		t.Fatal(err)
	}
	reqs := e.p.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, r := range reqs {
		m := mediaOf(r)
		if len(m) != 1 || m[0].Type != provider.PartImage || !bytes.Equal(m[0].Data, img) || m[0].File.MimeType != provider.MimePNG {
			t.Fatalf("request %d media = %+v", i, m)
		}
	}
	if n := loader.count("F1"); n != 1 {
		t.Errorf("loaded %d times, want once (cached for the process)", n)
	}
	if h[0].Parts[0].Data != nil {
		t.Error("Run wrote bytes into the caller's history")
	}
}

// TestFilesNotes: whatever keeps an image from the model becomes a note
// naming the file, and the turn goes on.
func TestFilesNotes(t *testing.T) {
	img := pngOf(t, 16, 16)
	other := pngOf(t, 17, 16)
	tests := []struct {
		name   string
		opts   Options
		loader FileLoader
		part   provider.Part
		note   string
	}{
		{"images off", Options{NoImages: true}, &memLoader{files: map[string][]byte{"F1": img}}, imageRef("F1", img), noteImagesOff},
		{"no loader", Options{}, nil, imageRef("F1", img), noteNoLoader},
		{"load fails", Options{}, &memLoader{fail: errors.New("slack: file_deleted")}, imageRef("F1", img), noteLoadFailed},
		{"changed bytes", Options{}, &memLoader{files: map[string][]byte{"F1": other}}, imageRef("F1", img), noteChanged},
		{"not an image", Options{}, &memLoader{files: map[string][]byte{"F1": []byte("GIF89a\x01")}}, provider.Part{Type: provider.PartImage, File: &provider.FileRef{ID: "F1"}}, noteUnknownFormat},
		{"not a pdf", Options{}, &memLoader{files: map[string][]byte{"F1": img}}, provider.Part{Type: provider.PartDocument, File: &provider.FileRef{ID: "F1", Name: "x.pdf"}}, noteNotPDF},
		{"tool image not kept", Options{}, nil, provider.Part{Type: provider.PartImage, File: &provider.FileRef{Source: "tool plot", SHA256: "00"}}, noteNotKept},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := []provider.Message{{Role: provider.RoleUser, Content: "see", Parts: []provider.Part{tc.part}}}
			e := newEnv(t, tc.opts, h, pt.Text("ok"))
			turn := e.turn(h)
			turn.Files = tc.loader
			if _, err := e.agent.Run(t.Context(), turn); err != nil {
				t.Fatal(err)
			}
			m := mediaOf(e.p.Requests()[0])
			if len(m) != 1 || m[0].Type != provider.PartNote || m[0].Text != tc.note || m[0].File == nil {
				t.Errorf("parts = %+v, want a note %q", m, tc.note)
			}
		})
	}
}

// TestRequestMediaLimit: past the per-request count the oldest images
// become notes.
func TestRequestMediaLimit(t *testing.T) {
	loader := &memLoader{files: map[string][]byte{}}
	var h []provider.Message
	for _, id := range []string{"F1", "F2", "F3"} {
		img := pngOf(t, 8+len(loader.files), 8)
		loader.files[id] = img
		h = append(h, provider.Message{Role: provider.RoleUser, Content: id, Parts: []provider.Part{imageRef(id, img)}}, provider.Message{Role: provider.RoleAssistant, Content: "seen"})
	}
	h = append(h, user("compare them"))
	e := newEnv(t, Options{MaxRequestMedia: 2}, h, pt.Text("ok"))
	turn := e.turn(h)
	turn.Files = loader
	if _, err := e.agent.Run(t.Context(), turn); err != nil {
		t.Fatal(err)
	}
	m := mediaOf(e.p.Requests()[0])
	if len(m) != 3 || m[0].Type != provider.PartNote || m[0].Text != noteOverRequest || m[1].Data == nil || m[2].Data == nil {
		t.Errorf("parts = %+v", m)
	}
	if loader.count("F1") != 0 {
		t.Error("an image left out of the request was loaded anyway")
	}
}

// TestMediaRefusedRetry: an endpoint that refuses image input gets the step
// again with notes, once; the warning is logged once per process.
func TestMediaRefusedRetry(t *testing.T) {
	img := pngOf(t, 16, 16)
	var logs testlog.Buffer
	refused := &provider.APIError{Provider: "openai", Status: 400, Message: "Invalid content type. image_url is only supported by certain models.", MediaUnsupported: true}
	h := []provider.Message{{Role: provider.RoleUser, Content: "see", Parts: []provider.Part{{Type: provider.PartImage, Data: img, File: &provider.FileRef{Name: "a.png"}}}}}
	e := newEnv(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, h,
		pt.Fail(refused), pt.Text("I cannot see images, but you shared a.png."),
		pt.Fail(refused), pt.Text("again"),
	)
	for i := range 2 {
		res, err := e.agent.Run(t.Context(), e.turn(h))
		if err != nil || res.Outcome != EndTurn {
			t.Fatalf("turn %d: %v %v", i, res.Outcome, err)
		}
	}
	reqs := e.p.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, want := range []provider.PartType{provider.PartImage, provider.PartNote, provider.PartImage, provider.PartNote} {
		if m := mediaOf(reqs[i]); len(m) != 1 || m[0].Type != want {
			t.Errorf("request %d parts = %+v, want %s", i, m, want)
		}
	}
	if n := strings.Count(logs.String(), "refused image/PDF input"); n != 1 {
		t.Errorf("warning logged %d times, want once:\n%s", n, logs.String())
	}
}

// partsTool returns an image as a part.
type partsTool struct {
	*fakeTool
	img []byte
}

func (p partsTool) CallParts(ctx context.Context, input json.RawMessage) (string, []provider.Part, error) {
	return "plotted", []provider.Part{{Type: provider.PartImage, Data: p.img}, {Type: provider.PartImage, Data: []byte("junk")}}, nil
}

// TestToolImages: a PartsTool's image reaches the next request as an image
// part with its facts filled in; junk becomes a note; the stored result has
// no bytes.
func TestToolImages(t *testing.T) {
	img := pngOf(t, 30, 20)
	tool := partsTool{&fakeTool{name: "plot", schema: `{"type":"object"}`}, img}
	h := []provider.Message{user("plot it")}
	e := newEnv(t, Options{}, h, pt.ToolCalls(pt.Call("c1", "plot", `{}`)), pt.Text("Here."))
	turn := e.turn(h, tool)
	turn.Approver = always(AllowOnce)
	if _, err := e.agent.Run(t.Context(), turn); err != nil {
		t.Fatal(err)
	}
	req := e.p.Requests()[1]
	res := req.Messages[len(req.Messages)-1]
	if res.Role != provider.RoleTool || res.Content != "plotted" || len(res.Parts) != 2 {
		t.Fatalf("tool message = %+v", res)
	}
	p := res.Parts[0]
	if p.Type != provider.PartImage || !bytes.Equal(p.Data, img) || p.File.MimeType != provider.MimePNG || p.File.Width != 30 || p.File.Height != 20 ||
		p.File.SHA256 != sum(img) || p.File.Source != "tool plot" {
		t.Errorf("image part = %+v %+v", p, p.File)
	}
	if n := res.Parts[1]; n.Type != provider.PartNote || n.Text != noteUnknownFormat {
		t.Errorf("junk part = %+v", n)
	}
	stored, _ := json.Marshal(e.store.history[len(e.store.history)-2])
	if bytes.Contains(stored, []byte("iVBOR")) || len(stored) > 1024 {
		t.Errorf("stored tool result carries bytes (%d bytes): %.200s", len(stored), stored)
	}
}

// TestPartsCounted: images count by the providers' formulas, PDFs by
// pages, text files by their text; a budget with images compacts sooner.
func TestPartsCounted(t *testing.T) {
	c := newCounter("", nil)
	claude := newCounter("", nil)
	claude.claude = true
	img := provider.Part{Type: provider.PartImage, File: &provider.FileRef{Width: 1024, Height: 1024}}
	tests := []struct {
		c    *Counter
		p    provider.Part
		want int
	}{
		{c, img, 85 + 170*4},
		{claude, img, 1399}, // 1024² fits 1.15 MP: ⌈1048576/750⌉
		{c, provider.Part{Type: provider.PartImage, File: &provider.FileRef{Width: 4000, Height: 1000}}, 85 + 170*4}, // 2048×512
		{claude, provider.Part{Type: provider.PartImage, File: &provider.FileRef{Width: 4000, Height: 1000}}, 820},   // 1568×392
		{c, provider.Part{Type: provider.PartImage}, 85 + 170*8},
		{claude, provider.Part{Type: provider.PartImage}, 1533},
		{c, provider.Part{Type: provider.PartDocument, File: &provider.FileRef{Pages: 3}}, 3 * pdfPageTokens},
		{c, provider.Part{Type: provider.PartDocument, File: &provider.FileRef{Size: 250 << 10}}, 3 * pdfPageTokens},
		{c, provider.TextFilePart(provider.FileRef{Name: "a.txt"}, []byte(strings.Repeat("abcd", 100))), c.Count(provider.TextFilePart(provider.FileRef{Name: "a.txt"}, []byte(strings.Repeat("abcd", 100))).AsText())},
	}
	for i, tc := range tests {
		if got := tc.c.countPart(tc.p); got != tc.want {
			t.Errorf("case %d: countPart = %d, want %d", i, got, tc.want)
		}
	}
	plain := provider.Message{Role: provider.RoleUser, Content: "see"}
	with := plain
	with.Parts = []provider.Part{img}
	if d := c.CountMessage(with) - c.CountMessage(plain); d != 85+170*4 {
		t.Errorf("an image adds %d tokens to its message", d)
	}
}

// TestCompactionWithParts: old messages' images become notes in the
// summarizer's input (it gets no bytes), recent messages keep their parts,
// and the summary request's output cap is the turn's (none when
// MaxTokens is 0).
func TestCompactionWithParts(t *testing.T) {
	img := pngOf(t, 16, 16)
	loader := &memLoader{files: map[string][]byte{"F1": img, "F2": img}}
	var h []provider.Message
	old := imageRef("F1", img)
	old.File.Width, old.File.Height = 2000, 2000 // 1,105 tokens: the image is what fills the window
	h = append(h, provider.Message{Role: provider.RoleUser, Content: "old screenshot", Parts: []provider.Part{old,
		provider.TextFilePart(provider.FileRef{Name: "big.log"}, []byte(strings.Repeat("x", 5000)))}})
	for i := range 8 {
		h = append(h, provider.Message{Role: provider.RoleAssistant, Content: "noted"}, user("more "+string(rune('a'+i))))
	}
	h = append(h, provider.Message{Role: provider.RoleUser, Content: "new screenshot", Parts: []provider.Part{imageRef("F2", img)}})
	e := newEnv(t, Options{ContextWindow: 2048, KeepRecent: 2}, h, pt.Text("summary notes"), pt.Text("answer"))
	turn := e.turn(h)
	turn.Files = loader
	res, err := e.agent.Run(t.Context(), turn)
	if err != nil || !res.Compacted {
		t.Fatalf("compacted=%v err=%v", res.Compacted, err)
	}
	reqs := e.p.Requests()
	sum, answer := reqs[0], reqs[1]
	if sum.MaxTokens != 0 {
		t.Errorf("summary MaxTokens = %d, want 0 (Options.MaxTokens)", sum.MaxTokens)
	}
	in := sum.Messages[1].Content
	if !strings.Contains(in, "[image F1.png (image/png, ") || !strings.Contains(in, "shared here; not shown to the summarizer]") ||
		!strings.Contains(in, "[file big.log (4.9 KB)]\nxxx") || strings.Contains(in, strings.Repeat("x", 2100)) || len(mediaOf(sum)) != 0 {
		t.Errorf("summarizer input:\n%.600s", in)
	}
	m := mediaOf(answer)
	if len(m) != 1 || !bytes.Equal(m[0].Data, img) {
		t.Errorf("the kept message lost its image: %+v", m)
	}
	if loader.count("F1") != 0 {
		t.Error("the summarized image was loaded")
	}
}
