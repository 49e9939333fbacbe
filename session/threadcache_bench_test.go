package session

import (
	"testing"
)

// BenchmarkThreadCacheAppend is one received message cached (seal + one
// script call).
func BenchmarkThreadCacheAppend(b *testing.B) {
	s := newStore(b, Options{SecretKey: testKey(1)})
	c := s.ThreadCache(ThreadCacheOptions{})
	ctx := ctxT(b)
	k := testThread()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := c.Append(ctx, k, cacheMsg(k, i%999+1)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkThreadCacheImport200 reads a 200-message thread back (one
// script call, 200 openings).
func BenchmarkThreadCacheImport200(b *testing.B) {
	s := newStore(b, Options{SecretKey: testKey(1)})
	c := s.ThreadCache(ThreadCacheOptions{})
	ctx := ctxT(b)
	k := testThread()
	for i := range 200 {
		if err := c.Append(ctx, k, cacheMsg(k, i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		v, err := c.Newest(ctx, k, 0, 0)
		if err != nil || len(v.Messages) != 200 {
			b.Fatal(len(v.Messages), err)
		}
	}
}
