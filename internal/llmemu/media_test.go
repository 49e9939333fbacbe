package llmemu

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"
)

func testPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestMediaRecorded: images and documents of both protocols are decoded
// into Recorded.Media, and counted by size formula, not by base64 length.
func TestMediaRecorded(t *testing.T) {
	img := testPNG(t, 1024, 1024)
	pdf := []byte("%PDF-1.4 fake")
	b64 := base64.StdEncoding.EncodeToString
	tests := []struct {
		p        Protocol
		messages []any
		tokens   int // media tokens
	}{
		{OpenAI, []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "look"},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + b64(img)}},
			map[string]any{"type": "file", "file": map[string]any{"filename": "a.pdf", "file_data": "data:application/pdf;base64," + b64(pdf)}},
		}}}, 85 + 170*4 + 2000},
		{Anthropic, []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": b64(img)}},
			map[string]any{"type": "document", "title": "a.pdf", "source": map[string]any{"type": "base64", "media_type": "application/pdf", "data": b64(pdf)}},
			map[string]any{"type": "text", "text": "look"},
		}}}, 1024*1024/750 + 2000},
	}
	for _, tc := range tests {
		t.Run(string(tc.p), func(t *testing.T) {
			s := newServer(t, Options{})
			body := requestBody(tc.p, "", map[string]any{"messages": tc.messages})
			resp := post(t.Context(), t, newClient(t), s, tc.p, body)
			_, _ = io.Copy(io.Discard, resp.Body)
			rec := s.Requests()[0]
			media := rec.Media()
			if len(media) != 2 || media[0].Kind != "image" || media[1].Kind != "document" {
				t.Fatalf("media = %+v", media)
			}
			if !bytes.Equal(media[0].Data, img) || media[0].MimeType != "image/png" || !bytes.Equal(media[1].Data, pdf) || media[1].Filename != "a.pdf" {
				t.Errorf("decoded media differ: %+v", media)
			}
			if rec.LastUserText() != "look" {
				t.Errorf("text = %q", rec.LastUserText())
			}
			base := len(body) - len(b64(img)) - len(b64(pdf))
			if tc.p == OpenAI {
				base -= len("data:image/png;base64,") + len("data:application/pdf;base64,")
			}
			if got, want := rec.InputTokens(), (base+3)/4+tc.tokens; got != want {
				t.Errorf("InputTokens = %d, want %d", got, want)
			}
		})
	}
}

// TestRejects: each refused feature gets the real service's 400 text;
// a request without it passes.
func TestRejects(t *testing.T) {
	img := base64.StdEncoding.EncodeToString(testPNG(t, 8, 8))
	oaImage := []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + img}}}}}
	anImage := []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": img}}}}}
	tests := []struct {
		name  string
		p     Protocol
		rj    Rejects
		extra map[string]any
		want  string // substring of the 400 body; "" = accepted
	}{
		{"max_tokens", OpenAI, Rejects{MaxTokens: true}, map[string]any{"max_tokens": 10},
			`{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`},
		{"max_completion_tokens passes", OpenAI, Rejects{MaxTokens: true}, map[string]any{"max_completion_tokens": 10}, ""},
		{"max_completion_tokens", OpenAI, Rejects{MaxCompletionTokens: true}, map[string]any{"max_completion_tokens": 10}, "Unrecognized request argument supplied: max_completion_tokens"},
		{"stream_options", OpenAI, Rejects{StreamOptions: true}, nil, `"param":"stream_options","code":"unknown_parameter"`},
		{"no stream_options passes", OpenAI, Rejects{StreamOptions: true}, map[string]any{"stream_options": nil}, ""},
		{"openai image", OpenAI, Rejects{Images: true}, map[string]any{"messages": oaImage}, `image_url is only supported by certain models.","type":"invalid_request_error","param":"messages.[0].content.[0].type"`},
		{"anthropic image", Anthropic, Rejects{Images: true}, map[string]any{"messages": anImage}, `"message":"Could not process image"`},
		{"text passes", Anthropic, Rejects{Images: true, Documents: true}, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, Options{Reject: tc.rj})
			resp := post(t.Context(), t, newClient(t), s, tc.p, requestBody(tc.p, "hi", tc.extra))
			b, _ := io.ReadAll(resp.Body)
			if tc.want == "" {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, b)
				}
				return
			}
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), tc.want) || !json.Valid(b) {
				t.Errorf("status %d body %s; want 400 containing %s", resp.StatusCode, b, tc.want)
			}
		})
	}
}
