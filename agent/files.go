package agent

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"sync"

	"github.com/bobbinbot/bobbin/provider"
)

// FileLoader fetches a shared file's bytes again for a request: transcripts
// keep only references (provider.FileRef), so a later step, a later turn or
// another replica loads images and PDFs through it. The bot implements it
// per turn with the workspace's token (Slack download, bounded cache). It
// returns the bytes as shared; the agent checks them against
// FileRef.SHA256 and prepares images itself. An error becomes a note for
// the model, never a failed turn. LoadFile is called from several
// goroutines at once (a request's files load in parallel) and must honour
// ctx.
type FileLoader interface {
	LoadFile(ctx context.Context, ref provider.FileRef) ([]byte, error)
}

// Media limits of one request, and the prepared-bytes cache.
const (
	// DefaultMaxRequestMedia is how many images and PDFs one request
	// carries; older ones become notes (Anthropic takes up to 100 images
	// but shrinks every image of a request with more than 20).
	DefaultMaxRequestMedia = 20
	// DefaultMaxRequestMediaBytes bounds the media bytes of one request
	// (base64 adds a third; Anthropic takes 32 MB per request).
	DefaultMaxRequestMediaBytes = 20 << 20
	// DefaultMediaCacheBytes bounds the process's cache of prepared images
	// and PDFs, shared by all turns.
	DefaultMediaCacheBytes = 64 << 20
	// mediaLoadParallel bounds one request's concurrent loads.
	mediaLoadParallel = 4
	// prepareParallel bounds concurrent image decodes per agent: a decoded
	// image takes up to 4 bytes per pixel.
	prepareParallel = 2
)

// Notes for media the model does not get.
const (
	noteImagesOff     = "image and PDF input is turned off (LLM_IMAGES=false)"
	noteRefused       = "the model endpoint did not accept image or PDF input, so it is not shown"
	noteNoLoader      = "not available here"
	noteLoadFailed    = "could not be loaded again"
	noteChanged       = "the file changed since it was shared, so it is not shown"
	noteNotKept       = "shown earlier in the conversation; its bytes are not kept"
	noteOverRequest   = "left out of this request: newer images and PDFs fill its size limit"
	noteNotPDF        = "not a readable PDF"
	noteTooLargePDF   = "larger than the 10 MB limit for PDFs"
	noteUnknownFormat = "not a PNG, JPEG, GIF or WebP image"
)

// partRef locates a part: msgs[msg].Parts[part].
type partRef struct{ msg, part int }

// media is a part's bytes as sent, or the note that stands in for them.
type media struct {
	data          []byte
	mime          string
	width, height int
	note          string
}

func (m media) size() int { return len(m.data) }

// mediaCache is a byte-bounded LRU of prepared media, keyed by file hash
// or id. It is safe for concurrent use.
type mediaCache struct {
	mu    sync.Mutex
	max   int
	used  int
	lru   *list.List // of *mediaEntry, most recent first
	index map[string]*list.Element
}

type mediaEntry struct {
	key string
	m   media
}

func newMediaCache(maxBytes int) *mediaCache {
	return &mediaCache{max: maxBytes, lru: list.New(), index: map[string]*list.Element{}}
}

func (c *mediaCache) get(key string) (media, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.index[key]
	if !ok {
		return media{}, false
	}
	c.lru.MoveToFront(e)
	return e.Value.(*mediaEntry).m, true
}

func (c *mediaCache) put(key string, m media) {
	if m.note != "" || m.size() > c.max/4 {
		return // failures are retried next turn; one item must not flush the rest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[key]; ok {
		c.lru.MoveToFront(e)
		return
	}
	c.index[key] = c.lru.PushFront(&mediaEntry{key: key, m: m})
	c.used += m.size()
	for c.used > c.max {
		last := c.lru.Back()
		ent := last.Value.(*mediaEntry)
		c.lru.Remove(last)
		delete(c.index, ent.key)
		c.used -= ent.m.size()
	}
}

// mediaKey identifies a part's bytes: its hash, else its file id and URL.
// "" means it cannot be cached (nor loaded).
func mediaKey(p provider.Part) string {
	f := p.File
	switch {
	case f == nil:
		return ""
	case f.SHA256 != "":
		return string(p.Type) + ":sha256:" + f.SHA256
	case f.ID != "" || f.URL != "":
		return string(p.Type) + ":id:" + f.ID + "\x00" + f.URL
	}
	return ""
}

// withMedia returns msgs with every image and PDF part ready for the
// provider: Data filled (loaded, checked and prepared) or replaced by a
// note. msgs is not modified; messages with parts are copied. The newest
// media come first within the request's count and byte limits; older ones
// become notes. Results are kept for the turn, so every step of it sends
// the same bytes (or the same note) and the prompt prefix stays stable.
func (r *run) withMedia(ctx context.Context, msgs []provider.Message) []provider.Message {
	var refs []partRef
	for i := len(msgs) - 1; i >= 0; i-- {
		for j := len(msgs[i].Parts) - 1; j >= 0; j-- {
			if msgs[i].Parts[j].IsMedia() {
				refs = append(refs, partRef{i, j})
			}
		}
	}
	if len(refs) == 0 {
		return msgs
	}
	out := slices.Clone(msgs)
	for k, rf := range refs {
		if k == 0 || refs[k-1].msg != rf.msg {
			out[rf.msg].Parts = slices.Clone(msgs[rf.msg].Parts)
		}
	}
	if reason := r.mediaOffReason(); reason != "" {
		for _, rf := range refs {
			p := &out[rf.msg].Parts[rf.part]
			*p = p.AsNote(reason)
		}
		return out
	}
	got := r.resolveAll(ctx, out, refs[:min(len(refs), r.a.opts.MaxRequestMedia)])
	used := 0
	for k, rf := range refs {
		p := &out[rf.msg].Parts[rf.part]
		if k >= len(got) {
			*p = p.AsNote(noteOverRequest)
			continue
		}
		m := got[k]
		switch {
		case m.note != "":
			*p = p.AsNote(m.note)
		case used+m.size() > r.a.opts.MaxRequestMediaBytes:
			*p = p.AsNote(noteOverRequest)
		default:
			used += m.size()
			f := provider.FileRef{}
			if p.File != nil {
				f = *p.File
			}
			f.MimeType, f.Width, f.Height = m.mime, m.width, m.height
			p.File, p.Data = &f, m.data
		}
	}
	return out
}

// mediaOffReason is the note every image and PDF gets when none may be
// sent, or "".
func (r *run) mediaOffReason() string {
	switch {
	case r.a.opts.NoImages:
		return noteImagesOff
	case r.mediaRefused:
		return noteRefused
	}
	return ""
}

// resolveAll resolves the parts at refs (a few loads at a time) and
// returns their results in the order of refs.
func (r *run) resolveAll(ctx context.Context, msgs []provider.Message, refs []partRef) []media {
	got := make([]media, len(refs))
	sem := make(chan struct{}, mediaLoadParallel)
	var wg sync.WaitGroup
	for k, rf := range refs {
		p := msgs[rf.msg].Parts[rf.part]
		if m, ok := r.memoGet(p); ok {
			got[k] = m
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			got[k] = r.resolve(ctx, p)
		})
	}
	wg.Wait()
	return got
}

func (r *run) memoGet(p provider.Part) (media, bool) {
	key := mediaKey(p)
	if key == "" {
		return media{}, false
	}
	r.mediaMu.Lock()
	defer r.mediaMu.Unlock()
	m, ok := r.memo[key]
	return m, ok
}

// resolve gives one part's bytes or note, from the turn's memo, the
// agent's cache, the part's own Data or the loader, in that order.
func (r *run) resolve(ctx context.Context, p provider.Part) media {
	key := mediaKey(p)
	if m, ok := r.memoGet(p); ok {
		return m
	}
	m, ok := media{}, false
	if key != "" {
		m, ok = r.a.media.get(key)
	}
	if !ok {
		m = r.load(ctx, p)
		if ctx.Err() != nil && m.note != "" {
			return m // not remembered: the turn is ending anyway
		}
		if key != "" {
			r.a.media.put(key, m)
		}
	}
	if key != "" {
		r.mediaMu.Lock()
		r.memo[key] = m
		r.mediaMu.Unlock()
	}
	return m
}

// load fetches (or takes) a part's bytes, checks them and prepares them.
func (r *run) load(ctx context.Context, p provider.Part) media {
	data := p.Data
	if len(data) == 0 {
		switch {
		case p.File == nil || p.File.ID == "" && p.File.URL == "":
			return media{note: noteNotKept}
		case r.t.Files == nil:
			return media{note: noteNoLoader}
		}
		var err error
		data, err = r.t.Files.LoadFile(ctx, *p.File)
		if err != nil || len(data) == 0 {
			if ctx.Err() == nil {
				r.a.log.Warn("agent: loading a file failed; the model gets a note instead", "file_id", p.File.ID, "err", err)
			}
			return media{note: noteLoadFailed}
		}
	}
	if p.File != nil && p.File.SHA256 != "" {
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != p.File.SHA256 {
			r.a.log.Warn("agent: a file's bytes do not match its hash; the model gets a note instead", "file_id", p.File.ID)
			return media{note: noteChanged}
		}
	}
	if p.Type == provider.PartDocument {
		switch {
		case !bytes.HasPrefix(data, []byte("%PDF-")):
			return media{note: noteNotPDF}
		case len(data) > provider.MaxDocumentBytes:
			return media{note: noteTooLargePDF}
		}
		return media{data: data, mime: provider.MimePDF}
	}
	img, err := r.a.prepareImage(ctx, data)
	if err != nil {
		return media{note: imageNote(err)}
	}
	return media{data: img.Data, mime: img.MimeType, width: img.Width, height: img.Height}
}

// prepareImage runs provider.PrepareImage with at most prepareParallel
// decodes at a time in this agent.
func (a *Agent) prepareImage(ctx context.Context, data []byte) (provider.Image, error) {
	select {
	case a.prep <- struct{}{}:
	case <-ctx.Done():
		return provider.Image{}, context.Cause(ctx)
	}
	defer func() { <-a.prep }()
	return provider.PrepareImage(data, a.opts.ImageLimits)
}

// imageNote words an image preparation error for the model.
func imageNote(err error) string {
	switch {
	case errors.Is(err, provider.ErrImageTooLarge):
		return "too large to send as an image"
	case errors.Is(err, provider.ErrImageFormat):
		return noteUnknownFormat
	}
	return "could not be prepared as an image"
}

// warnMediaRefused logs, once per process, that the endpoint refused media.
func (a *Agent) warnMediaRefused(err error) {
	a.mediaWarn.Do(func() {
		a.log.Warn("agent: the model endpoint refused image/PDF input; retrying without it (notes instead). Set LLM_IMAGES=false if this model has no vision.",
			slog.String("model", a.opts.Model), slog.String("err", err.Error()))
	})
}

// toolParts prepares the images a tool returned: each gets its type,
// dimensions, size and hash, and bytes within the image limits, or becomes
// a note. At most provider.MaxImagesPerMessage are kept.
func (r *run) toolParts(ctx context.Context, tool string, parts []provider.Part) []provider.Part {
	out := make([]provider.Part, 0, len(parts))
	images := 0
	for _, p := range parts {
		f := provider.FileRef{Source: "tool " + tool}
		if p.File != nil {
			f = *p.File
			f.Source = "tool " + tool
		}
		p.File = &f
		switch {
		case p.Type == provider.PartTextFile || p.Type == provider.PartNote:
			out = append(out, p)
			continue
		case p.Type != provider.PartImage || len(p.Data) == 0:
			out = append(out, p.AsNote("a tool result cannot carry this file"))
			continue
		case images >= provider.MaxImagesPerMessage:
			out = append(out, p.AsNote("more images than one result may carry"))
			continue
		}
		img, err := r.a.prepareImage(ctx, p.Data)
		if err != nil {
			out = append(out, p.AsNote(imageNote(err)))
			continue
		}
		images++
		sum := sha256.Sum256(img.Data)
		f.MimeType, f.Width, f.Height, f.Size, f.SHA256 = img.MimeType, img.Width, img.Height, int64(len(img.Data)), hex.EncodeToString(sum[:])
		out = append(out, provider.Part{Type: provider.PartImage, File: &f, Data: img.Data})
	}
	return out
}
