package openai

import (
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/shape"
)

// Content parts of a user message, as the Chat Completions API names them.
type (
	textPart struct {
		Type string `json:"type"` // "text"
		Text string `json:"text"`
	}
	imagePart struct {
		Type     string   `json:"type"` // "image_url"
		ImageURL imageURL `json:"image_url"`
	}
	imageURL struct {
		URL dataURL `json:"url"`
	}
	filePart struct {
		Type string   `json:"type"` // "file"
		File fileData `json:"file"`
	}
	fileData struct {
		Filename string  `json:"filename"`
		FileData dataURL `json:"file_data"`
	}
)

// dataURL is "data:<mime>;base64,<data>", encoded straight into the JSON
// string: base64 needs no escaping, so the megabytes of an image are
// written once rather than built as a Go string and escaped again.
type dataURL struct {
	mime string
	data []byte
}

func (d dataURL) MarshalJSON() ([]byte, error) {
	prefix := `"data:` + d.mime + `;base64,`
	n := base64.StdEncoding.EncodedLen(len(d.data))
	b := make([]byte, len(prefix)+n+1)
	copy(b, prefix)
	base64.StdEncoding.Encode(b[len(prefix):], d.data)
	b[len(b)-1] = '"'
	return b, nil
}

// userContent shapes a user message: the speaker-prefixed text, then its
// parts. Without images or PDFs everything is one string (text files and
// notes inlined), which every compatible server takes; with them the
// content is an array of text, image_url and file parts.
func userContent(m provider.Message) (string, []any) {
	text := shape.SpeakerPrefix(m) + m.Content
	if !provider.HasMedia(m.Parts) {
		for _, p := range m.Parts {
			text = shape.Join(text, p.AsText())
		}
		return text, nil
	}
	out := make([]any, 0, len(m.Parts)+1)
	if text != "" {
		out = append(out, textPart{Type: "text", Text: text})
	}
	for _, p := range m.Parts {
		switch {
		case p.Type == provider.PartImage && len(p.Data) > 0:
			out = append(out, imagePart{Type: "image_url", ImageURL: imageURL{URL: dataURL{mime: mediaType(p), data: p.Data}}})
		case p.Type == provider.PartDocument && len(p.Data) > 0:
			out = append(out, filePart{Type: "file", File: fileData{Filename: shape.FileName(p, "document.pdf"), FileData: dataURL{mime: provider.MimePDF, data: p.Data}}})
		default:
			out = append(out, textPart{Type: "text", Text: p.AsText()})
		}
	}
	return "", out
}

// mediaType is an image part's type: the sniffed one the agent recorded,
// else what the bytes look like.
func mediaType(p provider.Part) string {
	if p.File != nil && strings.HasPrefix(p.File.MimeType, "image/") {
		return p.File.MimeType
	}
	return http.DetectContentType(p.Data)
}

// toolImageNote is why a tool's image reaches the model as a note: a Chat
// Completions tool message holds text only.
const toolImageNote = "returned by the tool; this model API takes tool results as text, so the image is not shown"

// withToolParts appends a tool result's parts to its text, images as
// notes.
func withToolParts(content string, parts []provider.Part) string {
	for _, p := range parts {
		if p.IsMedia() {
			p = p.AsNote(toolImageNote)
		}
		content = shape.Join(content, p.AsText())
	}
	return content
}
