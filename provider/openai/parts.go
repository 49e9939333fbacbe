package openai

import (
	"net/http"
	"strings"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/shape"
	"github.com/bobbinbot/bobbin/provider/internal/splice"
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
		URL splice.Placeholder `json:"url"`
	}
	filePart struct {
		Type string   `json:"type"` // "file"
		File fileData `json:"file"`
	}
	fileData struct {
		Filename string             `json:"filename"`
		FileData splice.Placeholder `json:"file_data"`
	}
)

// userContent shapes a user message: the speaker-prefixed text, then its
// parts. Without images or PDFs everything is one string (text files and
// notes inlined), which every compatible server takes; with them the
// content is an array of text, image_url and file parts, whose data URLs
// sp splices in after marshalling.
func userContent(m provider.Message, sp *splice.Splicer) (string, []any) {
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
			out = append(out, imagePart{Type: "image_url", ImageURL: imageURL{URL: sp.Add("data:"+mediaType(p)+";base64,", p.Data)}})
		case p.Type == provider.PartDocument && len(p.Data) > 0:
			out = append(out, filePart{Type: "file", File: fileData{Filename: shape.FileName(p, "document.pdf"), FileData: sp.Add("data:"+provider.MimePDF+";base64,", p.Data)}})
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
