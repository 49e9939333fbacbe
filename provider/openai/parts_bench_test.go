package openai

import (
	"testing"

	"github.com/bobbinbot/bobbin/provider"
)

// BenchmarkBodyWithImage measures encoding a request body with one 1 MB
// image (base64 data URL) against the same body without it.
func BenchmarkBodyWithImage(b *testing.B) {
	c := New(Options{})
	img := make([]byte, 1<<20)
	for i := range img {
		img[i] = byte(i * 31)
	}
	base := []provider.Message{{Role: provider.RoleSystem, Content: "You are Bobbin."}, {Role: provider.RoleUser, Content: "what is this?"}}
	with := append([]provider.Message(nil), base...)
	with[1].Parts = []provider.Part{{Type: provider.PartImage, File: &provider.FileRef{MimeType: provider.MimePNG}, Data: img}}
	for _, tc := range []struct {
		name string
		msgs []provider.Message
	}{{"none", base}, {"1MB-image", with}} {
		b.Run(tc.name, func(b *testing.B) {
			req := provider.Request{Model: "gpt-4o", Messages: tc.msgs}
			v := c.variant(req.Model)
			b.ReportAllocs()
			for range b.N {
				if _, err := c.requestBody(req, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
