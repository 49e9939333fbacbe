package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"net/http"
	"strings"
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

// attachments is a user message with one of each part.
func attachments(t testing.TB) provider.Message {
	return provider.Message{Role: provider.RoleUser, UserName: "Ann", UserID: "U1", Content: "what does this error mean?", Parts: []provider.Part{
		{Type: provider.PartImage, File: &provider.FileRef{ID: "F1", Name: "shot.png", MimeType: provider.MimePNG}, Data: testPNG(t, 64, 32)},
		{Type: provider.PartDocument, File: &provider.FileRef{ID: "F2", Name: "spec/v2.pdf", MimeType: provider.MimePDF}, Data: testPDF},
		provider.TextFilePart(provider.FileRef{ID: "F3", Name: "app.log", MimeType: "text/plain"}, []byte("panic: nil map\n")),
		provider.NotePart(provider.FileRef{Name: "build.zip", MimeType: "application/zip", Size: 2048}, "unsupported file type"),
	}}
}

func newEmuOpts(t *testing.T, eo llmemu.Options, o Options) (*llmemu.Server, *Client) {
	t.Helper()
	eo.APIKey = testKey
	emu := llmemu.New(eo)
	t.Cleanup(emu.Close)
	o.BaseURL, o.APIKey = emu.URL()+"/v1", testKey
	return emu, New(o)
}

// TestPartsAgainstEmulator: an image becomes an image_url data URL whose
// base64 is exactly the bytes, a PDF a file part with its name, text files
// and notes text parts, in order.
func TestPartsAgainstEmulator(t *testing.T) {
	emu, c := newEmuOpts(t, llmemu.Options{}, Options{})
	m := attachments(t)
	if _, err := collect(t, c, provider.Request{Model: "gpt-4o", Messages: []provider.Message{m}}); err != nil {
		t.Fatal(err)
	}
	rec := emu.Requests()[0]
	media := rec.Media()
	if len(media) != 2 || !bytes.Equal(media[0].Data, m.Parts[0].Data) || media[0].MimeType != "image/png" ||
		!bytes.Equal(media[1].Data, testPDF) || media[1].MimeType != "application/pdf" || media[1].Filename != "spec_v2.pdf" {
		t.Fatalf("media = %+v", media)
	}
	var body struct {
		Messages []struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(rec.Body, &body); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, p := range body.Messages[0].Content {
		types = append(types, p.Type)
	}
	if d := cmp.Diff([]string{"text", "image_url", "file", "text", "text"}, types); d != "" {
		t.Errorf("content part types (-want +got):\n%s", d)
	}
	parts := body.Messages[0].Content
	if parts[0].Text != "[Ann (U1)] what does this error mean?" || parts[3].Text != "[file app.log (text/plain, 15 bytes)]\npanic: nil map\n" ||
		parts[4].Text != "[file build.zip (application/zip, 2.0 KB): unsupported file type]" {
		t.Errorf("text parts = %+v", parts)
	}
}

// TestTextOnlyPartsAreAString: without images or PDFs the content stays a
// string, which every compatible server takes.
func TestTextOnlyPartsAreAString(t *testing.T) {
	m := attachments(t)
	m.Parts = m.Parts[2:]
	got := bodyOf(t, Options{}, provider.Request{Model: "m", Messages: []provider.Message{m}})
	want := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":` +
		`"[Ann (U1)] what does this error mean?\n\n[file app.log (text/plain, 15 bytes)]\npanic: nil map\n\n\n[file build.zip (application/zip, 2.0 KB): unsupported file type]"}]}`
	if d := cmp.Diff(j(t, want), any(got)); d != "" {
		t.Errorf("body (-want +got):\n%s", d)
	}
}

// TestToolImagesAreNotes: a Chat Completions tool message is text, so a
// tool's image is a note there.
func TestToolImagesAreNotes(t *testing.T) {
	req := provider.Request{Model: "m", Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "chart?"},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "c1", Name: "plot", Arguments: "{}"}}},
		provider.ToolResult{CallID: "c1", Name: "plot", Content: "done", Parts: []provider.Part{{Type: provider.PartImage,
			File: &provider.FileRef{MimeType: "image/png", Width: 64, Height: 32, Source: "tool plot"}, Data: testPNG(t, 64, 32)}}}.Message(),
	}}
	got := bodyOf(t, Options{}, req)
	msgs := got["messages"].([]any)
	tool := msgs[2].(map[string]any)
	want := "done\n\n[image (unnamed) (image/png, 64×32, from tool plot): returned by the tool; this model API takes tool results as text, so the image is not shown]"
	if tool["content"] != want {
		t.Errorf("tool content = %q", tool["content"])
	}
}

// TestMediaRefusedIsTyped: the real refusal texts come back as
// ErrMediaUnsupported, for images and for PDFs, and a request without media
// is never so classified.
func TestMediaRefusedIsTyped(t *testing.T) {
	for _, rj := range []llmemu.Rejects{{Images: true}, {Documents: true}} {
		emu, c := newEmuOpts(t, llmemu.Options{Reject: rj}, Options{})
		_, err := collect(t, c, provider.Request{Model: "gpt-4o", Messages: []provider.Message{attachments(t)}})
		if !errors.Is(err, provider.ErrMediaUnsupported) {
			t.Errorf("%+v: err = %v, want ErrMediaUnsupported", rj, err)
		}
		if n := len(emu.Requests()); n != 1 {
			t.Errorf("%+v: %d requests; a refusal is the agent's to retry", rj, n)
		}
	}
	emu, c := newEmuOpts(t, llmemu.Options{}, Options{})
	emu.FailNext(1, llmemu.ErrorReply{Status: http.StatusBadRequest, Message: "Invalid image detail"})
	_, err := collect(t, c, provider.Request{Model: "gpt-4o", Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}})
	if err == nil || errors.Is(err, provider.ErrMediaUnsupported) {
		t.Errorf("text-only request: err = %v", err)
	}
}

// TestTokenParamFallback: auto mode picks max_completion_tokens for the
// reasoning families, retries once with the other form on the real
// "unsupported parameter" 400 and remembers it; explicit modes never retry.
func TestTokenParamFallback(t *testing.T) {
	tests := []struct {
		name  string
		mode  string
		model string
		rj    llmemu.Rejects
		sent  []string // token parameter of each request, over two calls
		fails bool
	}{
		{"auto, gpt-4o takes max_tokens", "", "gpt-4o", llmemu.Rejects{}, []string{"max_tokens", "max_tokens"}, false},
		{"auto, o3-mini gets max_completion_tokens", "", "o3-mini", llmemu.Rejects{MaxTokens: true}, []string{"max_completion_tokens", "max_completion_tokens"}, false},
		{"auto, gpt-5 via a router", "auto", "openai/gpt-5-mini", llmemu.Rejects{MaxTokens: true}, []string{"max_completion_tokens", "max_completion_tokens"}, false},
		{"auto learns max_completion_tokens", "", "my-reasoner", llmemu.Rejects{MaxTokens: true}, []string{"max_tokens", "max_completion_tokens", "max_completion_tokens"}, false},
		{"auto learns max_tokens", "", "o1-compatible-local", llmemu.Rejects{MaxCompletionTokens: true}, []string{"max_completion_tokens", "max_tokens", "max_tokens"}, false},
		{"explicit max_tokens fails", TokenParamMaxTokens, "o3", llmemu.Rejects{MaxTokens: true}, []string{"max_tokens"}, true},
		{"both refused: one retry only", "", "gpt-4o", llmemu.Rejects{MaxTokens: true, MaxCompletionTokens: true}, []string{"max_tokens", "max_completion_tokens"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			emu, c := newEmuOpts(t, llmemu.Options{Reject: tc.rj}, Options{TokenParam: tc.mode})
			req := provider.Request{Model: tc.model, MaxTokens: 100, Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}}
			_, err := collect(t, c, req)
			if (err != nil) != tc.fails {
				t.Fatalf("first call: err = %v", err)
			}
			if !tc.fails {
				if _, err := collect(t, c, req); err != nil {
					t.Fatalf("second call: %v", err)
				}
			}
			var sent []string
			for _, r := range emu.Requests() {
				for _, k := range []string{"max_tokens", "max_completion_tokens"} {
					if _, ok := r.JSON[k]; ok {
						sent = append(sent, k)
					}
				}
			}
			if d := cmp.Diff(tc.sent, sent); d != "" {
				t.Errorf("token parameters sent (-want +got):\n%s", d)
			}
		})
	}
}

// TestStreamOptionsFallback: a server refusing stream_options is retried
// once without it and never asked again; usage is then unknown.
func TestStreamOptionsFallback(t *testing.T) {
	emu, c := newEmuOpts(t, llmemu.Options{Reject: llmemu.Rejects{StreamOptions: true}}, Options{})
	req := provider.Request{Model: "local", Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}}
	for i := range 2 {
		evs, err := collect(t, c, req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if done := evs[len(evs)-1]; done.Type != provider.EventDone || done.Usage.Known {
			t.Errorf("call %d: done = %+v, want unknown usage", i, done)
		}
	}
	var with []bool
	for _, r := range emu.Requests() {
		_, ok := r.JSON["stream_options"]
		with = append(with, ok)
	}
	if d := cmp.Diff([]bool{true, false, false}, with); d != "" {
		t.Errorf("stream_options sent (-want +got):\n%s", d)
	}
}

// TestPartsPrefixStable: the same conversation with an image, extended by
// a step, repeats its earlier messages byte for byte (base64 included).
func TestPartsPrefixStable(t *testing.T) {
	emu, c := newEmuOpts(t, llmemu.Options{}, Options{})
	msgs := []provider.Message{{Role: provider.RoleSystem, Content: "Be brief."}, attachments(t)}
	if _, err := collect(t, c, provider.Request{Model: "gpt-4o", Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Content: "A nil map."}, provider.Message{Role: provider.RoleUser, Content: "fix?"})
	if _, err := collect(t, c, provider.Request{Model: "gpt-4o", Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	reqs := emu.Requests()
	a, b := rawMessages(t, reqs[0].Body), rawMessages(t, reqs[1].Body)
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Errorf("message %d differs between steps:\n%.200s\n%.200s", i, a[i], b[i])
		}
	}
	if !strings.Contains(string(a[1]), `"url":"data:image/png;base64,`) {
		t.Errorf("no data URL in %.300s", a[1])
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
