package agent

import (
	"math"

	"github.com/bobbinbot/bobbin/provider"
)

// Token costs of media, from the providers' documented formulas.
const (
	// OpenAI (high detail): 85 tokens plus 170 per 512-pixel tile, after the
	// image is fitted into 2048×2048 and its short side to 768.
	openAIImageBase = 85
	openAIImageTile = 170
	// Anthropic: about width×height/750 tokens, after the image is fitted
	// into 1568 px and 1.15 megapixels (so at most ~1,600).
	anthropicPixelsPerToken = 750
	anthropicMaxSide        = 1568
	anthropicMaxPixels      = 1_150_000
	// PDFs are read as text plus an image of each page: Anthropic documents
	// 1,500–3,000 text tokens a page, and the page image comes on top.
	// Without a page count, a page is estimated per 100 KB of file.
	pdfPageTokens = 3000
	pdfPageBytes  = 100 << 10
)

// countPart is the local token estimate of one part.
func (c *Counter) countPart(p provider.Part) int { return c.tallyPart(p, c.Count) }

// tallyPart estimates one part, its text as text counts it (Count, or
// tokenBound for the upper bound); media by the providers' formulas.
func (c *Counter) tallyPart(p provider.Part, text func(string) int) int {
	switch p.Type {
	case provider.PartImage:
		w, h := 0, 0
		if p.File != nil {
			w, h = p.File.Width, p.File.Height
		}
		return imageTokens(c != nil && c.claude, w, h)
	case provider.PartDocument:
		pages := 0
		var size int64
		if p.File != nil {
			pages, size = p.File.Pages, p.File.Size
		}
		if pages <= 0 {
			pages = max(1, int((size+pdfPageBytes-1)/pdfPageBytes))
		}
		return pages * pdfPageTokens
	}
	return text(p.AsText())
}

// imageTokens is what a w×h image costs: Anthropic's formula when claude,
// else OpenAI's. An unknown size counts as the largest image.
func imageTokens(claude bool, w, h int) int {
	if claude {
		if w <= 0 || h <= 0 {
			return anthropicMaxPixels / anthropicPixelsPerToken
		}
		fw, fh := float64(w), float64(h)
		s := math.Min(1, math.Min(anthropicMaxSide/math.Max(fw, fh), math.Sqrt(anthropicMaxPixels/(fw*fh))))
		return max(1, int(math.Ceil(fw*s*fh*s/anthropicPixelsPerToken)))
	}
	if w <= 0 || h <= 0 {
		w, h = 2048, 768
	}
	fw, fh := float64(w), float64(h)
	if s := 2048 / math.Max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	if s := 768 / math.Min(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	tiles := int(math.Ceil(fw/512)) * int(math.Ceil(fh/512))
	return openAIImageBase + openAIImageTile*tiles
}
