package anthropic

import (
	"log/slog"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
)

// BenchmarkBodyWithImage measures encoding a request body with one 1 MB
// image (base64 image block) against the same body without it.
func BenchmarkBodyWithImage(b *testing.B) {
	img := make([]byte, 1<<20)
	for i := range img {
		img[i] = byte(i * 31)
	}
	base := []provider.Message{{Role: provider.RoleSystem, Content: "You are Bobbin."}, {Role: provider.RoleUser, Content: "what is this?"}}
	with := append([]provider.Message(nil), base...)
	with[1].Parts = []provider.Part{{Type: provider.PartImage, File: &provider.FileRef{MimeType: provider.MimePNG}, Data: img}}
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name string
		msgs []provider.Message
	}{{"none", base}, {"1MB-image", with}} {
		b.Run(tc.name, func(b *testing.B) {
			req := provider.Request{Model: "claude-sonnet-4-5", Messages: tc.msgs}
			b.ReportAllocs()
			for range b.N {
				if _, err := buildRequest(req, 4096, true, log).encode(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
