package anthropic

import (
	"net/http"
	"strings"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/shape"
	"github.com/bobbinbot/bobbin/provider/internal/splice"
)

// imageBlock and documentBlock carry an image or a PDF as base64.
type (
	imageBlock struct {
		Type         string        `json:"type"` // "image"
		Source       base64Source  `json:"source"`
		CacheControl *cacheControl `json:"cache_control,omitempty"`
	}
	documentBlock struct {
		Type         string        `json:"type"` // "document"
		Source       base64Source  `json:"source"`
		Title        string        `json:"title,omitempty"`
		CacheControl *cacheControl `json:"cache_control,omitempty"`
	}
	base64Source struct {
		Type      string             `json:"type"` // "base64"
		MediaType string             `json:"media_type"`
		Data      splice.Placeholder `json:"data"` // spliced in after marshalling
	}
)

// user adds a user message: its images and PDFs first (Anthropic's
// guidance: Claude does best with images before the text about them), then
// the speaker-prefixed text, then its text files and notes.
func (s *shaper) user(m provider.Message) {
	var texts []provider.Part
	for _, p := range m.Parts {
		if b, ok := s.mediaBlock(p); ok {
			s.add("user", b)
			continue
		}
		texts = append(texts, p)
	}
	s.addText("user", shape.SpeakerPrefix(m)+m.Content)
	for _, p := range texts {
		s.addText("user", p.AsText())
	}
}

// mediaBlock returns the image or document block of a part that has
// bytes.
func (s *shaper) mediaBlock(p provider.Part) (any, bool) {
	if len(p.Data) == 0 {
		return nil, false
	}
	switch p.Type {
	case provider.PartImage:
		return imageBlock{Type: "image", Source: base64Source{Type: "base64", MediaType: mediaType(p), Data: s.media.Add("", p.Data)}}, true
	case provider.PartDocument:
		return documentBlock{Type: "document", Source: base64Source{Type: "base64", MediaType: provider.MimePDF, Data: s.media.Add("", p.Data)},
			Title: shape.FileName(p, "")}, true
	}
	return nil, false
}

// toolResultParts are the blocks of a tool's parts inside its tool_result:
// images as image blocks (the Messages API takes them there), anything
// else as text.
func (s *shaper) toolResultParts(parts []provider.Part) []any {
	var out []any
	for _, p := range parts {
		if p.Type == provider.PartImage && len(p.Data) > 0 {
			b, _ := s.mediaBlock(p)
			out = append(out, b)
			continue
		}
		if p.Type == provider.PartDocument && len(p.Data) > 0 {
			p = p.AsNote("returned by the tool; a tool result cannot carry this file")
		}
		out = append(out, textBlock{Type: "text", Text: p.AsText()})
	}
	return out
}

// mediaType is an image part's type: the sniffed one the agent recorded,
// else what the bytes look like.
func mediaType(p provider.Part) string {
	if p.File != nil && strings.HasPrefix(p.File.MimeType, "image/") {
		return p.File.MimeType
	}
	return http.DetectContentType(p.Data)
}

// requestHasMedia reports whether req carries image or PDF bytes.
func requestHasMedia(req provider.Request) bool {
	for _, m := range req.Messages {
		if provider.HasMedia(m.Parts) {
			return true
		}
	}
	return false
}
