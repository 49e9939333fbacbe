package faulttest

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSoakCurves writes the soak's samples as CSV and as a PNG of four
// panels (RSS of both replicas, goroutines of both, Redis keys, live
// sockets) into the test's artifact directory and returns the paths.
func writeSoakCurves(t *testing.T, samples []soakSample) (csvPath, pngPath string) {
	t.Helper()
	dir := t.ArtifactDir()
	var b strings.Builder
	b.WriteString("t_s,rss_a_mib,rss_b_mib,goroutines_a,goroutines_b,live_sockets,redis_keys,redis_keys_without_ttl,mentions_sent,mentions_answered,rate_limited\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "%.1f,%.2f,%.2f,%.0f,%.0f,%d,%d,%d,%d,%d,%d\n", s.at.Seconds(),
			float64(s.rssA)/(1<<20), float64(s.rssB)/(1<<20), s.goA, s.goB, s.liveSockets,
			s.keys, s.persistentKeys, s.sent, s.answered, s.rateLimited)
	}
	csvPath = filepath.Join(dir, "soak.csv")
	if err := os.WriteFile(csvPath, []byte(b.String()), 0o644); err != nil {
		t.Errorf("writing %s: %v", csvPath, err)
	}
	pngPath = filepath.Join(dir, "soak.png")
	f, err := os.Create(pngPath)
	if err != nil {
		t.Errorf("writing %s: %v", pngPath, err)
		return csvPath, ""
	}
	defer f.Close()
	if err := png.Encode(f, plotSoak(samples)); err != nil {
		t.Errorf("writing %s: %v", pngPath, err)
	}
	t.Logf("soak curves: %s, %s", csvPath, pngPath)
	return csvPath, pngPath
}

var (
	plotBlue = color.RGBA{0x1f, 0x77, 0xb4, 0xff} // replica A
	plotRed  = color.RGBA{0xd6, 0x27, 0x28, 0xff} // replica B
	plotGrey = color.RGBA{0xcc, 0xcc, 0xcc, 0xff}
)

// plotSoak draws four stacked panels, each scaled from 0 to its maximum;
// replica A in blue, B (restarted) in red, Redis keys without a TTL in red.
func plotSoak(samples []soakSample) image.Image {
	const w, panelH, pad = 800, 150, 10
	panels := []struct{ a, b func(soakSample) float64 }{
		{func(s soakSample) float64 { return float64(s.rssA) }, func(s soakSample) float64 { return float64(s.rssB) }},
		{func(s soakSample) float64 { return s.goA }, func(s soakSample) float64 { return s.goB }},
		{func(s soakSample) float64 { return float64(s.keys) }, func(s soakSample) float64 { return float64(s.persistentKeys) }},
		{func(s soakSample) float64 { return float64(s.liveSockets) }, nil},
	}
	img := image.NewRGBA(image.Rect(0, 0, w, len(panels)*(panelH+pad)+pad))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	if len(samples) < 2 {
		return img
	}
	end := samples[len(samples)-1].at.Seconds()
	for p, panel := range panels {
		top := pad + p*(panelH+pad)
		for x := pad; x < w-pad; x++ {
			img.Set(x, top+panelH, plotGrey)
			img.Set(x, top, plotGrey)
		}
		hi := 1.0
		for _, s := range samples {
			hi = max(hi, panel.a(s))
			if panel.b != nil {
				hi = max(hi, panel.b(s))
			}
		}
		line := func(f func(soakSample) float64, c color.Color) {
			px, py := -1, -1
			for _, s := range samples {
				x := pad + int(s.at.Seconds()/end*float64(w-2*pad-1))
				y := top + panelH - int(f(s)/hi*float64(panelH-1))
				if px >= 0 {
					drawLine(img, px, py, x, y, c)
				}
				px, py = x, y
			}
		}
		line(panel.a, plotBlue)
		if panel.b != nil {
			line(panel.b, plotRed)
		}
	}
	return img
}

func drawLine(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	steps := max(abs(x1-x0), abs(y1-y0), 1)
	for i := 0; i <= steps; i++ {
		img.Set(x0+(x1-x0)*i/steps, y0+(y1-y0)*i/steps, c)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
