package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"net/http"
	"testing"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/google/go-cmp/cmp"
)

func testPNG(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var testPDF = []byte("%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n")

func attachments(t testing.TB) provider.Message {
	return provider.Message{Role: provider.RoleUser, UserName: "Ann", UserID: "U1", Content: "what does this error mean?", Parts: []provider.Part{
		{Type: provider.PartImage, File: &provider.FileRef{ID: "F1", Name: "shot.png", MimeType: provider.MimePNG}, Data: testPNG(t, 64, 32)},
		{Type: provider.PartDocument, File: &provider.FileRef{ID: "F2", Name: "spec.pdf", MimeType: provider.MimePDF}, Data: testPDF},
		provider.TextFilePart(provider.FileRef{ID: "F3", Name: "app.log", MimeType: "text/plain"}, []byte("panic: nil map\n")),
		provider.NotePart(provider.FileRef{Name: "build.zip", MimeType: "application/zip", Size: 2048}, "unsupported file type"),
		{Type: provider.PartImage, File: &provider.FileRef{ID: "F5", Name: "gone.png", MimeType: provider.MimePNG}}, // no bytes: a note
	}}
}

func newEmu(t *testing.T, eo llmemu.Options) (*llmemu.Server, *Client) {
	t.Helper()
	eo.APIKey = testKey
	emu := llmemu.New(eo)
	t.Cleanup(emu.Close)
	return emu, New(Options{ClientOptions: provider.ClientOptions{BaseURL: emu.URL(), APIKey: testKey}})
}

type sentBlock struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Title  string `json:"title"`
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      []byte `json:"data"` // base64 in JSON
	} `json:"source"`
	Content []sentBlock `json:"content"`
}

func blocksOf(t *testing.T, body []byte) [][]sentBlock {
	t.Helper()
	var v struct {
		Messages []struct {
			Content []sentBlock `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	var out [][]sentBlock
	for _, m := range v.Messages {
		out = append(out, m.Content)
	}
	return out
}

// TestPartsAgainstEmulator: images and PDFs become base64 image and
// document blocks (bytes exact, before the text), text files and notes
// text blocks after it.
func TestPartsAgainstEmulator(t *testing.T) {
	emu, c := newEmu(t, llmemu.Options{})
	m := attachments(t)
	if _, err := collect(c.Stream(t.Context(), provider.Request{Model: "claude-sonnet-4-5", Messages: []provider.Message{m}})); err != nil {
		t.Fatal(err)
	}
	rec := emu.Requests()[0]
	if media := rec.Media(); len(media) != 2 || !bytes.Equal(media[0].Data, m.Parts[0].Data) || !bytes.Equal(media[1].Data, testPDF) || media[1].Filename != "spec.pdf" {
		t.Fatalf("media = %+v", media)
	}
	blocks := blocksOf(t, rec.Body)[0]
	var got []string
	for _, b := range blocks {
		got = append(got, b.Type)
	}
	if d := cmp.Diff([]string{"image", "document", "text", "text", "text", "text"}, got); d != "" {
		t.Fatalf("block types (-want +got):\n%s", d)
	}
	if s := blocks[0].Source; s.Type != "base64" || s.MediaType != "image/png" || !bytes.Equal(s.Data, m.Parts[0].Data) {
		t.Errorf("image block = %+v", s)
	}
	if s := blocks[1].Source; s.MediaType != "application/pdf" || blocks[1].Title != "spec.pdf" {
		t.Errorf("document block = %+v %q", s, blocks[1].Title)
	}
	wantTexts := []string{"[Ann (U1)] what does this error mean?", "[file app.log (text/plain, 15 bytes)]\npanic: nil map\n",
		"[file build.zip (application/zip, 2.0 KB): unsupported file type]", "[image gone.png (image/png): not available]"}
	for i, w := range wantTexts {
		if blocks[2+i].Text != w {
			t.Errorf("text block %d = %q, want %q", i, blocks[2+i].Text, w)
		}
	}
}

// TestToolResultImages: the Messages API takes images inside tool_result,
// so a tool's image goes there as an image block.
func TestToolResultImages(t *testing.T) {
	emu, c := newEmu(t, llmemu.Options{})
	img := testPNG(t, 64, 32)
	req := provider.Request{Model: "claude-sonnet-4-5", Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "chart?"},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "toolu_1", Name: "plot", Arguments: "{}"}}},
		provider.ToolResult{CallID: "toolu_1", Name: "plot", Content: "done", Parts: []provider.Part{
			{Type: provider.PartImage, File: &provider.FileRef{MimeType: "image/png", Source: "tool plot"}, Data: img},
			{Type: provider.PartImage, File: &provider.FileRef{MimeType: "image/png", Source: "tool plot"}},
		}}.Message(),
	}}
	if _, err := collect(c.Stream(t.Context(), req)); err != nil {
		t.Fatal(err)
	}
	rec := emu.Requests()[0]
	tool := rec.Messages[len(rec.Messages)-1]
	if tool.Role != "tool" || len(tool.Media) != 1 || !bytes.Equal(tool.Media[0].Data, img) {
		t.Fatalf("tool message = %+v", tool)
	}
	res := blocksOf(t, rec.Body)[2][0]
	if res.Type != "tool_result" || len(res.Content) != 3 || res.Content[0].Text != "done" || res.Content[1].Type != "image" ||
		res.Content[2].Text != "[image (unnamed) (image/png, from tool plot): not available]" {
		t.Errorf("tool_result = %+v", res)
	}
}

// TestMediaRefusedIsTyped: "Could not process image" / "…PDF" on a request
// with media is ErrMediaUnsupported; on a text request it is not.
func TestMediaRefusedIsTyped(t *testing.T) {
	for _, rj := range []llmemu.Rejects{{Images: true}, {Documents: true}} {
		_, c := newEmu(t, llmemu.Options{Reject: rj})
		_, err := collect(c.Stream(t.Context(), provider.Request{Model: "claude-sonnet-4-5", Messages: []provider.Message{attachments(t)}}))
		if !errors.Is(err, provider.ErrMediaUnsupported) {
			t.Errorf("%+v: err = %v", rj, err)
		}
	}
	emu, c := newEmu(t, llmemu.Options{})
	emu.FailNext(1, llmemu.ErrorReply{Status: http.StatusBadRequest, Message: "Could not process image"})
	_, err := collect(c.Stream(t.Context(), hello))
	if err == nil || errors.Is(err, provider.ErrMediaUnsupported) {
		t.Errorf("text-only request: err = %v", err)
	}
}

// TestPartsPrefixStable: the next step repeats the earlier messages byte
// for byte, image bytes included; only the moving cache breakpoint differs.
func TestPartsPrefixStable(t *testing.T) {
	emu, c := newEmu(t, llmemu.Options{})
	msgs := []provider.Message{{Role: provider.RoleSystem, Content: "Be brief."}, attachments(t)}
	if _, err := collect(c.Stream(t.Context(), provider.Request{Model: "claude-sonnet-4-5", Messages: msgs})); err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Content: "A nil map."}, provider.Message{Role: provider.RoleUser, Content: "fix?"})
	if _, err := collect(c.Stream(t.Context(), provider.Request{Model: "claude-sonnet-4-5", Messages: msgs})); err != nil {
		t.Fatal(err)
	}
	reqs := emu.Requests()
	a, b := rawMessages(t, reqs[0].Body), rawMessages(t, reqs[1].Body)
	first := bytes.ReplaceAll(a[0], []byte(`,"cache_control":{"type":"ephemeral"}`), nil)
	if !bytes.Equal(first, b[0]) {
		t.Errorf("the user message with attachments changed between steps:\n%.300s\n%.300s", first, b[0])
	}
}

func rawMessages(t *testing.T, body []byte) []json.RawMessage {
	t.Helper()
	var v struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	return v.Messages
}
