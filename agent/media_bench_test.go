package agent

import (
	"bytes"
	"context"
	"image"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
)

// noisyImage is a w×h opaque image that compresses like a photo or a busy
// screenshot.
func noisyImage(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = byte(i/w), byte(r.IntN(64)), byte(r.IntN(256)), 255
	}
	return img
}

// oneMBImages are a ~1 MB PNG within the limits (sent as is) and a ~1 MB
// 12-megapixel JPEG that must be scaled down.
func oneMBImages(b *testing.B) (pngData, jpegData []byte) {
	b.Helper()
	var p, j bytes.Buffer
	if err := png.Encode(&p, noisyImage(760, 560)); err != nil {
		b.Fatal(err)
	}
	src := image.NewRGBA(image.Rect(0, 0, 4000, 3000))
	r := rand.New(rand.NewPCG(5, 6))
	for y := range 3000 {
		for x := range 4000 {
			i := src.PixOffset(x, y)
			src.Pix[i], src.Pix[i+1], src.Pix[i+2], src.Pix[i+3] = byte(x/16)+byte(r.IntN(9)), byte(y/12)+byte(r.IntN(9)), byte((x^y)&0x3f)+byte(r.IntN(9)), 255
		}
	}
	if err := jpeg.Encode(&j, src, &jpeg.Options{Quality: 85}); err != nil {
		b.Fatal(err)
	}
	return p.Bytes(), j.Bytes()
}

// BenchmarkRequestWithImage measures what one 1 MB image adds to building
// a model request: "cold" is a turn's first request after a restart (load
// through the FileLoader from memory, SHA-256 check, preparation), "warm"
// every later step of the turn (the turn's memo), "none" the same request
// without the image. Network time of the Slack download is not included.
func BenchmarkRequestWithImage(b *testing.B) {
	pngData, jpegData := oneMBImages(b)
	b.Logf("png %d bytes, jpeg %d bytes", len(pngData), len(jpegData))
	c := newCounter("", nil)
	hist := func(data []byte) []provider.Message {
		h := []provider.Message{user("earlier"), {Role: provider.RoleAssistant, Content: "ok"}}
		return append(h, provider.Message{Role: provider.RoleUser, Content: "what is this?", Parts: []provider.Part{imageRef("F1", data)}})
	}
	run := func(b *testing.B, data []byte, cold bool) {
		l := &memLoader{files: map[string][]byte{"F1": data}}
		h := hist(data)
		var r *run
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if cold || i == 0 {
				r = newRun(New(nil, Options{Model: "gpt-4o", Counter: c}), Turn{History: h, Files: l})
			}
			req := r.request(context.Background(), r.history)
			if p := req.Messages[len(req.Messages)-1].Parts[0]; len(p.Data) == 0 {
				b.Fatalf("no image bytes: %+v", p)
			}
		}
	}
	b.Run("none", func(b *testing.B) {
		h := hist(pngData)[:2]
		r := newRun(New(nil, Options{Model: "gpt-4o", Counter: c}), Turn{History: h})
		b.ReportAllocs()
		for range b.N {
			r.request(context.Background(), r.history)
		}
	})
	b.Run("cold-png-as-is", func(b *testing.B) { run(b, pngData, true) })
	b.Run("warm-png", func(b *testing.B) { run(b, pngData, false) })
	b.Run("cold-jpeg-12MP-scaled", func(b *testing.B) { run(b, jpegData, true) })
}
