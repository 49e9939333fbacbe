package provider

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTextFilePart(t *testing.T) {
	ref := FileRef{ID: "F1", Name: "app.log", MimeType: "text/plain"}
	p := TextFilePart(ref, []byte("\xef\xbb\xbfhello \xff wörld\x00!"))
	if p.Type != PartTextFile || p.Text != "hello \uFFFD wörld!" || p.File.Size != 19 {
		t.Errorf("part = %+v (size %d)", p, p.File.Size)
	}
	big := strings.Repeat("é", MaxTextFileBytes) // 2 bytes each
	p = TextFilePart(ref, []byte(big))
	if !utf8.ValidString(p.Text) || !strings.HasSuffix(p.Text, "…[file cut here: 262144 more bytes not shown]") {
		t.Errorf("cut text ends %q", p.Text[len(p.Text)-60:])
	}
	if n := len(strings.TrimSuffix(p.Text, "\n…[file cut here: 262144 more bytes not shown]")); n != MaxTextFileBytes {
		t.Errorf("kept %d bytes, want %d", n, MaxTextFileBytes)
	}
	if p.File.Size != int64(len(big)) {
		t.Errorf("size = %d", p.File.Size)
	}
}

func TestAsText(t *testing.T) {
	f := &FileRef{Name: "chart\n.png", MimeType: "image/png", Size: 215040, Width: 800, Height: 600}
	tests := []struct {
		p    Part
		want string
	}{
		{Part{Type: PartTextFile, File: &FileRef{Name: "a.txt", MimeType: "text/plain", Size: 5}, Text: "hello"}, "[file a.txt (text/plain, 5 bytes)]\nhello"},
		{Part{Type: PartNote, File: &FileRef{Name: "b.zip", MimeType: "application/zip", Size: 3 << 20}, Text: "unsupported file type"}, "[file b.zip (application/zip, 3.0 MB): unsupported file type]"},
		{Part{Type: PartImage, File: f}.AsNote("image input is off"), "[image chart .png (image/png, 210.0 KB, 800×600): image input is off]"},
		{Part{Type: PartImage, File: f}, "[image chart .png (image/png, 210.0 KB, 800×600): not available]"},
		{Part{Type: PartDocument, File: &FileRef{Name: "s.pdf", MimeType: MimePDF, Pages: 3}}.AsNote("x"), "[PDF s.pdf (application/pdf, 3 pages): x]"},
		{Part{Type: PartNote, Text: "bare\nnote"}, "[bare note]"},
		{Part{Type: PartImage, File: &FileRef{MimeType: "image/jpeg", Source: "tool shot"}}.AsNote("y"), "[image (unnamed) (image/jpeg, from tool shot): y]"},
	}
	for _, tc := range tests {
		if got := tc.p.AsText(); got != tc.want {
			t.Errorf("AsText(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

// TestPartJSON: bytes are never encoded, and an image reference stays
// small.
func TestPartJSON(t *testing.T) {
	p := Part{Type: PartImage, Data: make([]byte, 1<<20), File: &FileRef{ID: "F07ABCDEF12", Name: "Screenshot 2026-01-05 at 10.12.44.png",
		MimeType: MimePNG, Size: 1 << 20, SHA256: strings.Repeat("ab", 32), Width: 1568, Height: 882,
		URL: "https://files.slack.com/files-pri/T0123ABCD-F07ABCDEF12/download/screenshot_2026-01-05_at_10.12.44.png"}}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 1024 || strings.Contains(string(b), "AAAA") {
		t.Errorf("stored reference is %d bytes: %s", len(b), b)
	}
	var back Part
	if err := json.Unmarshal(b, &back); err != nil || back.File.SHA256 != p.File.SHA256 || back.Data != nil {
		t.Errorf("round trip: %+v %v", back, err)
	}
}

func TestSniffPartAndPDFPages(t *testing.T) {
	for in, want := range map[string]PartType{
		"%PDF-1.7\n":                 PartDocument,
		"name,age\nann,3\n":          PartTextFile,
		"{\"a\":1}":                  PartTextFile,
		"\xef\xbb\xbfbom text":       PartTextFile,
		"cut rune at end \xc3":       PartTextFile,
		"PK\x03\x04\x14\x00\x00":     PartNote,
		"\x00\x01binary":             PartNote,
		"<svg xmlns='x'></svg>\n":    PartTextFile,
		"GIF89a\x01\x00\x01\x00\x00": PartImage,
	} {
		if got := SniffPart([]byte(in)); got != want {
			t.Errorf("SniffPart(%q) = %q, want %q", in, got, want)
		}
	}
	pdf := "%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >> endobj\n" +
		"3 0 obj << /Type /Page /Parent 2 0 R >> endobj\n4 0 obj <</Type/Page/Parent 2 0 R>> endobj\n"
	if n := PDFPages([]byte(pdf)); n != 2 {
		t.Errorf("PDFPages = %d, want 2", n)
	}
	if n := PDFPages([]byte("%PDF-1.5 /Type /ObjStm ... /Count 7 /Count 3")); n != 7 {
		t.Errorf("PDFPages from /Count = %d, want 7", n)
	}
	if n := PDFPages([]byte("%PDF-1.5 nothing")); n != 0 {
		t.Errorf("PDFPages = %d, want 0 (unknown)", n)
	}
}

// TestMediaRefusal: the real refusal texts are recognized; other 400s and
// other statuses are not.
func TestMediaRefusal(t *testing.T) {
	yes := []string{
		"Invalid content type. image_url is only supported by certain models.",
		"Unsupported chat content part type: 'file'. Supported types: audio_embeds, image_url, text. (parameter=type, value=file)",
		"Failed to deserialize the JSON body into the target type: messages[1]: unknown variant `image_url`, expected `text` at line 1 column 9",
		"Failed to deserialize the JSON body into the target type: messages[2]: invalid type: sequence, expected a string at line 1 column 2901",
		"Could not process image",
		"Could not process PDF",
		"messages.0.content.1.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'",
	}
	for _, m := range yes {
		if !MediaRefusal(400, m) {
			t.Errorf("not recognized: %q", m)
		}
	}
	if MediaRefusal(400, "Unsupported parameter: 'max_tokens' is not supported with this model.") || MediaRefusal(500, "Could not process image") || MediaRefusal(429, "image rate limit") {
		t.Error("a non-media error was taken for a refusal")
	}
}
