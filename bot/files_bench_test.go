package bot

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"testing"

	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// benchBot is a Bot against the emulator (no rate limits on either side:
// the benchmarks measure the work, not the budgets), authenticated.
func benchBot(b *testing.B) (*Bot, *slackemu.Server) {
	b.Helper()
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	b.Cleanup(emu.Close)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	store, err := session.Open(context.Background(), session.Options{URL: os.Getenv("REDIS_URL"), Prefix: "fb" + hex.EncodeToString(rnd[:])})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	limits, _ := slackapi.ParseRateLimits("*=off", slackapi.DefaultRateLimits())
	bt, err := New(Options{BotToken: slackemu.BotToken, AppToken: slackemu.AppToken, APIURL: emu.APIURL(), Store: store,
		Agent: nopRunner{}, RateLimits: limits})
	if err != nil {
		b.Fatal(err)
	}
	if err := bt.Authenticate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return bt, emu
}

// BenchmarkThreadImport imports a 100-message thread (the parent and 99
// replies by five people, one conversations.replies page), as a first
// mention does: the Slack calls, the speakers' names (looked up cold each
// time: a fresh name cache) and the context blocks.
func BenchmarkThreadImport(b *testing.B) {
	bt, emu := benchBot(b)
	users := []string{slackemu.UserAlice, slackemu.UserBob, slackemu.UserAdmin, slackemu.UserOwner, slackemu.UserGuest}
	parent, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: users[0], Text: "incident: checkout 502s", Silent: true})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 99 {
		if _, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: users[i%len(users)], ThreadTS: parent.TS, Silent: true,
			Text: fmt.Sprintf("update %d: looked at the gateway dashboards, p99 latency is still high; next step is to check the pool sizes", i)}); err != nil {
			b.Fatal(err)
		}
	}
	mention, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: users[1], ThreadTS: parent.TS, Silent: true, Text: "summarize"})
	if err != nil {
		b.Fatal(err)
	}
	k := session.ThreadKey{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, ThreadTS: parent.TS}
	batch := []inbound{{Kind: kindMention, Team: k.Team, Channel: k.Channel, ThreadTS: k.ThreadTS, TS: mention.TS, User: users[1]}}
	calls := func() (int, int) {
		return len(emu.Calls("conversations.replies")), len(emu.Calls("users.info"))
	}
	r0, u0 := calls()
	var msgs []provider.Message
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		bt.people = bt.newPeople()
		var mb msgBuilder
		bt.importContext(context.Background(), k, batch, &mb)
		msgs = mb.build(context.Background(), bt, k.Team)
	}
	b.StopTimer()
	r1, u1 := calls()
	b.ReportMetric(float64(r1-r0)/float64(b.N), "replies-calls/op")
	b.ReportMetric(float64(u1-u0)/float64(b.N), "users.info-calls/op")
	lines := 0
	for _, m := range msgs {
		lines += bytes.Count([]byte(m.Content), []byte("\n["))
	}
	b.ReportMetric(float64(lines), "messages")
	if lines != 100 {
		b.Errorf("imported %d messages, want 100", lines)
	}
}

// noisePNG is a PNG of about n bytes within the image limits (noise does
// not compress), so it is sent as it is.
func noisePNG(b *testing.B, n int) []byte {
	side := 1
	for side*side*3 < n { // three noise bytes a pixel (alpha is opaque)
		side++
	}
	img := image.NewNRGBA(image.Rect(0, 0, side, side))
	_, _ = rand.Read(img.Pix)
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 255
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkMentionImage1MB is what the bot adds before the model call for
// a mention carrying one 1 MB screenshot: the download from Slack's file
// host (the emulator, loopback), the size cap, type sniffing and SHA-256,
// into the message's image part. It reports the bytes the stored reference
// adds to the message in Redis (session stores json.Marshal of it).
func BenchmarkMentionImage1MB(b *testing.B) {
	bt, emu := benchBot(b)
	pic := noisePNG(b, 1<<20)
	p, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice, Silent: true,
		Text: "what does this error mean?", Files: []slackemu.File{{Name: "Screenshot 2026-01-05 at 09.41.07.png", Content: pic}}})
	if err != nil {
		b.Fatal(err)
	}
	f := p.Files[0]
	sf := sharedFile{ID: f.ID, Name: f.Name, Title: f.Title, Mimetype: f.Mimetype, Filetype: f.Filetype, Size: int64(f.Size), Mode: f.Mode,
		URLPrivate: f.URLPrivate, URLPrivateDownload: f.URLPrivateDownload}
	k := session.ThreadKey{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, ThreadTS: p.TS}
	batch := []inbound{{Kind: kindMention, Team: k.Team, Channel: k.Channel, ThreadTS: p.TS, TS: p.TS, User: slackemu.UserAlice,
		Text: "what does this error mean?", Files: []sharedFile{sf}}}
	bt.people.Name(context.Background(), k.Team, slackemu.UserAlice) // warm: names are not the subject
	var msgs []provider.Message
	b.SetBytes(int64(len(pic)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		var mb msgBuilder
		bt.batchMessages(context.Background(), k, batch, &mb)
		msgs = mb.build(context.Background(), bt, k.Team)
	}
	b.StopTimer()
	if len(msgs) != 1 || len(msgs[0].Parts) != 1 || !bytes.Equal(msgs[0].Parts[0].Data, pic) {
		b.Fatalf("message = %+v", msgs)
	}
	with, _ := json.Marshal(&msgs[0])
	plain := msgs[0]
	plain.Parts = nil
	without, _ := json.Marshal(&plain)
	b.ReportMetric(float64(len(with)-len(without)), "redis-B/imageref")
	if len(with)-len(without) > 1024 {
		b.Errorf("a stored image reference takes %d bytes, over the 1 KB goal", len(with)-len(without))
	}
}
