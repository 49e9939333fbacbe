package session

import (
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/provider"
)

// screenshotRef is a realistic stored reference to a shared 1 MB
// screenshot (Slack's real id, name and URL shapes).
func screenshotRef(i int, data []byte) provider.Part {
	return provider.Part{Type: provider.PartImage, Data: data, File: &provider.FileRef{
		ID: "F07ABCDEF12", Name: "Screenshot 2026-01-05 at 10.12.44.png", MimeType: provider.MimePNG,
		Size: 1 << 20, SHA256: strings.Repeat("ab", 32), Width: 1568, Height: 882 + i%2,
		URL: "https://files.slack.com/files-pri/T0123ABCD-F07ABCDEF12/download/screenshot_2026-01-05_at_10.12.44.png"}}
}

// BenchmarkStoredImageRef appends a user message carrying one 1 MB image
// to a transcript in Redis and reports the bytes Redis stores for the
// image reference (the message's stored size minus the same message
// without it): the bytes themselves are never stored.
func BenchmarkStoredImageRef(b *testing.B) {
	s, _ := benchStore(b)
	ctx := ctxT(b)
	k := testThread()
	l, err := s.Acquire(ctx, k, "bench")
	if err != nil {
		b.Fatal(err)
	}
	plain := provider.Message{Role: provider.RoleUser, UserID: "U0123ABCD", UserName: "ann", Content: "what does this error mean?", Meta: map[string]string{"ts": "1767607964.000100"}}
	tk := s.k.thread(k)
	measure := func(m provider.Message) int {
		if err := s.Append(ctx, k, l.Token(), m); err != nil {
			b.Fatal(err)
		}
		v, err := s.rdb.LIndex(ctx, tk.msgs, -1).Result()
		if err != nil {
			b.Fatal(err)
		}
		return len(v)
	}
	base := measure(plain)
	data := make([]byte, 1<<20)
	b.ReportAllocs()
	b.ResetTimer()
	var with int
	for i := range b.N {
		m := plain
		m.Parts = []provider.Part{screenshotRef(i, data)}
		with = measure(m)
	}
	b.StopTimer()
	b.ReportMetric(float64(with-base), "B/imageref")
	b.ReportMetric(float64(with), "B/message")
	if with-base > 1024 {
		b.Errorf("a stored image reference takes %d bytes, over the 1 KB goal", with-base)
	}
}
