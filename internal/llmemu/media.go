package llmemu

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	_ "image/gif" // DecodeConfig of recorded images, for token counts
	_ "image/jpeg"
	_ "image/png"
	"math"
	"strings"
)

// Media is one image or document a request carried, decoded.
type Media struct {
	// Kind is "image" or "document".
	Kind string
	// MimeType is the declared type: the data URL's or the block's
	// media_type.
	MimeType string
	// Filename is an OpenAI file part's filename or an Anthropic document's
	// title.
	Filename string
	// Data is the decoded bytes; nil when the base64 did not decode (Err
	// says why).
	Data []byte
	Err  string
	// encoded is the length of the base64 text in the body.
	encoded int
}

// mediaTokens estimates what a media item costs a model, so reported usage
// and the context-window check stay realistic with images in a request:
// OpenAI 85 + 170 per 512-pixel tile (after fitting 2048×2048 and a 768
// short side), Anthropic width×height/750 (after fitting 1568 px and
// 1.15 megapixels); 1,000 for an image whose size is unknown, 2,000 for a
// document.
func (m Media) tokens(p Protocol) int {
	if m.Kind != "image" {
		return 2000
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(m.Data))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 1000
	}
	w, h := float64(cfg.Width), float64(cfg.Height)
	if p == Anthropic {
		s := min(1, 1568/max(w, h), math.Sqrt(1_150_000/(w*h)))
		return max(1, int(w*s*h*s/750))
	}
	s := min(1, 2048/max(w, h))
	w, h = w*s, h*s
	if s2 := 768 / min(w, h); s2 < 1 {
		w, h = w*s2, h*s2
	}
	tiles := int((w+511)/512) * int((h+511)/512)
	return 85 + 170*tiles
}

// decodeDataURL reads "data:<mime>;base64,<data>".
func decodeDataURL(kind, url, filename string) (Media, bool) {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return Media{}, false
	}
	mime, b64, ok := strings.Cut(rest, ";base64,")
	if !ok {
		return Media{Kind: kind, Filename: filename, Err: "not a base64 data URL", encoded: len(url)}, true
	}
	return decodeBase64(kind, mime, filename, b64, len(url)), true
}

func decodeBase64(kind, mime, filename, b64 string, encoded int) Media {
	m := Media{Kind: kind, MimeType: mime, Filename: filename, encoded: encoded}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		m.Err = "invalid base64: " + err.Error()
		return m
	}
	m.Data = data
	return m
}

// openAIMedia reads the image_url and file parts of a content array.
func openAIMedia(raw json.RawMessage) []Media {
	if len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	var parts []struct {
		Type     string `json:"type"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
		File struct {
			Filename string `json:"filename"`
			FileData string `json:"file_data"`
		} `json:"file"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	var out []Media
	for _, p := range parts {
		switch p.Type {
		case "image_url":
			if m, ok := decodeDataURL("image", p.ImageURL.URL, ""); ok {
				out = append(out, m)
			}
		case "file":
			if m, ok := decodeDataURL("document", p.File.FileData, p.File.Filename); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// anSource is an Anthropic image or document source.
type anSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// anthropicMedia reads an image or document block.
func anthropicMedia(kind, title string, src *anSource) (Media, bool) {
	if src == nil || src.Type != "base64" {
		return Media{}, false
	}
	return decodeBase64(kind, src.MediaType, title, src.Data, len(src.Data)), true
}

// anthropicToolMedia reads the image blocks inside a tool_result's content.
func anthropicToolMedia(raw json.RawMessage) []Media {
	if len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	var blocks []struct {
		Type   string    `json:"type"`
		Source *anSource `json:"source"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	var out []Media
	for _, b := range blocks {
		if b.Type == "image" {
			if m, ok := anthropicMedia("image", "", b.Source); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// Media returns every image and document of the request, in order.
func (r Recorded) Media() []Media {
	var out []Media
	for _, m := range r.Messages {
		out = append(out, m.Media...)
	}
	return out
}
