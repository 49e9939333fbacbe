package provider

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// PartType names the kind of a content Part.
type PartType string

// The kinds of content parts. Their values are stored in transcripts:
// extend, never rename.
const (
	// PartImage is a PNG, JPEG, GIF or WebP image; Data holds its bytes for
	// one request.
	PartImage PartType = "image"
	// PartDocument is a PDF; Data holds its bytes for one request.
	PartDocument PartType = "document"
	// PartTextFile is a text file inlined as Text (already cut to
	// MaxTextFileBytes, marker included).
	PartTextFile PartType = "text_file"
	// PartNote is a one-line note about a file the model cannot see (an
	// unknown type, too large, not loadable, image input turned off); Text
	// is the reason.
	PartNote PartType = "note"
)

// MaxTextFileBytes is how much of a text file is inlined; the rest is cut
// with a visible marker.
const MaxTextFileBytes = 256 << 10

// Part is one piece of a message besides its Content text: a file shared in
// Slack, or an image a tool returned. It is stored in the transcript as
// JSON, so field names are part of the stored format: extend, never rename.
// Images and PDFs are stored as references only (FileRef, well under 1 KB);
// their bytes are filled into Data for each request and never stored.
type Part struct {
	Type PartType `json:"type"`
	// File describes the file the part comes from.
	File *FileRef `json:"file,omitempty"`
	// Text is a text file's inlined text, or a note's reason.
	Text string `json:"text,omitempty"`
	// Data is the bytes of an image or PDF for one request. It is never
	// encoded (json:"-"): transcripts keep the reference, and the agent
	// loads the bytes again when a later request needs them. A provider
	// sends an image or document part without Data as a note.
	Data []byte `json:"-"`
}

// FileRef identifies a file without its bytes. Field names are part of the
// stored format: extend, never rename.
type FileRef struct {
	// ID is the file's id where it came from (a Slack file id), so it can be
	// fetched again.
	ID string `json:"id,omitempty"`
	// Name is the file name as the person gave it.
	Name string `json:"name,omitempty"`
	// MimeType is the real type of the bytes ("image/png",
	// "application/pdf", "text/plain"), sniffed rather than declared where
	// that matters (see SniffImage).
	MimeType string `json:"mime_type,omitempty"`
	// Size is the file's size in bytes as shared.
	Size int64 `json:"size,omitempty"`
	// SHA256 is the lowercase hex SHA-256 of the bytes as shared; a load that
	// returns other bytes is not used.
	SHA256 string `json:"sha256,omitempty"`
	// Width and Height are an image's dimensions as sent to the model (after
	// PrepareImage), for token counting; zero if unknown.
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
	// Pages is a PDF's page count, for token counting; zero if unknown.
	Pages int `json:"pages,omitempty"`
	// URL is where the loader fetches the file (Slack's url_private_download);
	// it is not a secret without the workspace token and is never sent to
	// the model.
	URL string `json:"url,omitempty"`
	// Source says where the file came from when it is not a person's upload
	// (e.g. the tool that returned an image); empty for shared files.
	Source string `json:"source,omitempty"`
}

// IsMedia reports whether p is an image or a PDF: the parts sent as bytes,
// which LLM_IMAGES=false and endpoints without vision refuse.
func (p Part) IsMedia() bool { return p.Type == PartImage || p.Type == PartDocument }

// HasMedia reports whether any of parts is an image or PDF with Data.
func HasMedia(parts []Part) bool {
	for _, p := range parts {
		if p.IsMedia() && len(p.Data) > 0 {
			return true
		}
	}
	return false
}

// TextFilePart returns the part that inlines a text file: data as UTF-8
// (invalid bytes replaced, a byte-order mark and NUL bytes dropped), cut
// past MaxTextFileBytes on a rune boundary with a visible marker.
func TextFilePart(ref FileRef, data []byte) Part {
	if ref.Size == 0 {
		ref.Size = int64(len(data))
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	cut := 0
	if len(data) > MaxTextFileBytes {
		n := MaxTextFileBytes
		for n > 0 && !utf8.RuneStart(data[n]) {
			n--
		}
		cut = len(data) - n
		data = data[:n]
	}
	text := strings.ToValidUTF8(string(data), "\uFFFD")
	text = strings.ReplaceAll(text, "\x00", "")
	if cut > 0 {
		text += fmt.Sprintf("\n…[file cut here: %d more bytes not shown]", cut)
	}
	return Part{Type: PartTextFile, File: &ref, Text: text}
}

// NotePart returns a note telling the model that a file exists and why it
// cannot see it, e.g. NotePart(ref, "unsupported file type").
func NotePart(ref FileRef, reason string) Part {
	return Part{Type: PartNote, File: &ref, Text: reason}
}

// AsNote returns p as a note with reason, keeping its file reference: the
// form an image or PDF takes when it cannot be sent.
func (p Part) AsNote(reason string) Part {
	n := Part{Type: PartNote, Text: reason}
	if p.File != nil {
		f := *p.File
		n.File = &f
	}
	return n
}

// AsText renders p as the text a model reads in place of (or for) the part:
//
//	text file:  [file notes.txt (text/plain, 1.2 KB)]\n<text>
//	note:       [file report.zip (application/zip, 3.4 MB): <reason>]
//	image/PDF:  [image chart.png (image/png, 210 KB, 800×600): not available]
//
// Both providers use it, so a conversation reads the same whichever
// protocol carries it.
func (p Part) AsText() string {
	switch p.Type {
	case PartTextFile:
		return "[file " + p.describe() + "]\n" + p.Text
	case PartNote:
		if p.File == nil {
			return "[" + oneLine(p.Text) + "]"
		}
		return "[" + p.kind() + " " + p.describe() + ": " + oneLine(p.Text) + "]"
	}
	return "[" + p.kind() + " " + p.describe() + ": not available]"
}

// kind is the word a note starts with.
func (p Part) kind() string {
	if p.File != nil {
		switch {
		case strings.HasPrefix(p.File.MimeType, "image/"):
			return "image"
		case p.File.MimeType == "application/pdf":
			return "PDF"
		}
	}
	switch p.Type {
	case PartImage:
		return "image"
	case PartDocument:
		return "PDF"
	}
	return "file"
}

// describe renders the file's name and facts: `notes.txt (text/plain, 1.2 KB)`.
func (p Part) describe() string {
	f := p.File
	if f == nil {
		return "(unnamed)"
	}
	name := oneLine(f.Name)
	if name == "" {
		name = "(unnamed)"
	}
	var facts []string
	if f.MimeType != "" {
		facts = append(facts, oneLine(f.MimeType))
	}
	if f.Size > 0 {
		facts = append(facts, HumanSize(f.Size))
	}
	if f.Width > 0 && f.Height > 0 {
		facts = append(facts, fmt.Sprintf("%d×%d", f.Width, f.Height))
	}
	if f.Pages > 0 {
		facts = append(facts, fmt.Sprintf("%d pages", f.Pages))
	}
	if f.Source != "" {
		facts = append(facts, "from "+oneLine(f.Source))
	}
	if len(facts) == 0 {
		return name
	}
	return name + " (" + strings.Join(facts, ", ") + ")"
}

// oneLine drops control characters, so a person-chosen file name cannot
// start a new line that reads like an instruction.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0x2028 || r == 0x2029 {
			return ' '
		}
		return r
	}, s)
}

// HumanSize renders n bytes as "512 bytes", "1.2 KB" or "3.4 MB" (powers of
// 1024).
func HumanSize(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1f KB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1024*1024))
}
