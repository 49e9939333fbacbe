package agent

import (
	"container/list"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// Encodings a Counter may use.
const (
	EncodingO200K  = "o200k_base"
	EncodingCL100K = "cl100k_base"
)

// encoders holds one tokenizer per encoding for the whole process: building
// one costs 90-200 ms and ~12-24 MB, and a built one is safe for concurrent
// use (providers.md §10). It is built on the first count, not when a
// Counter is made: a replica that has not run a turn does not hold it, and
// nothing slow happens before the socket connects. Callers that only need
// to know whether a text fits ask Bound first and count only when the
// bound does not fit (budget.over, the bot's thread-context share), so a
// replica whose conversations stay well under their budgets never builds
// it.
var encoders = map[string]*sharedEncoder{
	EncodingO200K:  {},
	EncodingCL100K: {},
}

// loaderOnce installs the embedded BPE files before the first encoder is
// built; without it tiktoken-go downloads them over HTTP.
var loaderOnce sync.Once

type sharedEncoder struct {
	name  string
	once  sync.Once
	built atomic.Bool
	enc   *tiktoken.Tiktoken
	err   error
}

// get builds the encoder on first use.
func (s *sharedEncoder) get() (*tiktoken.Tiktoken, error) {
	loaderOnce.Do(func() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) })
	s.once.Do(func() {
		s.enc, s.err = tiktoken.GetEncoding(s.name)
		if s.err != nil {
			s.err = fmt.Errorf("agent: tokenizer %s: %w", s.name, s.err)
		}
		s.built.Store(true)
	})
	return s.enc, s.err
}

func init() {
	for name, s := range encoders {
		s.name = name
	}
}

// EncodingFor returns the tiktoken encoding used for model: cl100k_base for
// GPT-4 (not 4o/4.1/4.5) and GPT-3.5, o200k_base for everything else.
// A routing prefix ("openai/gpt-4o") is ignored.
func EncodingFor(model string) string {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	switch {
	case strings.HasPrefix(m, "gpt-4o"), strings.HasPrefix(m, "gpt-4.1"), strings.HasPrefix(m, "gpt-4.5"):
		return EncodingO200K
	case m == "gpt-4", strings.HasPrefix(m, "gpt-4-"), strings.HasPrefix(m, "gpt-3.5"), strings.HasPrefix(m, "text-embedding-"):
		return EncodingCL100K
	}
	return EncodingO200K
}

// counterCacheSize bounds the per-message count cache.
const counterCacheSize = 1 << 14

// Counter counts tokens with a local tiktoken encoding and caches the count
// of each message, so adding a message never re-tokenizes the history. It
// is safe for concurrent use; share one per model across sessions.
type Counter struct {
	encoding string
	src      *sharedEncoder // nil: estimate from bytes
	seed     maphash.Seed
	// claude selects Anthropic's image formula over OpenAI's.
	claude bool

	mu    sync.Mutex
	lru   *list.List // of *countEntry, most recent first
	index map[uint64]*list.Element
}

type countEntry struct {
	key uint64
	n   int
}

// NewCounter returns a Counter with the encoding for model (see
// EncodingFor). The encoder is built once per process, on the first count,
// and shared.
func NewCounter(model string) (*Counter, error) {
	name := EncodingFor(model)
	src, ok := encoders[name]
	if !ok {
		return nil, fmt.Errorf("agent: unknown encoding %q", name)
	}
	c := newCounter(name, src)
	c.claude = strings.Contains(strings.ToLower(model), "claude")
	return c, nil
}

func newCounter(name string, src *sharedEncoder) *Counter {
	return &Counter{
		encoding: name,
		src:      src,
		seed:     maphash.MakeSeed(),
		lru:      list.New(),
		index:    make(map[uint64]*list.Element),
	}
}

// Encoding names the tiktoken encoding in use ("" for the byte estimate).
func (c *Counter) Encoding() string {
	if c == nil {
		return ""
	}
	return c.encoding
}

// enc is the encoder, built on first use; nil: estimate from bytes (no
// tokenizer, or its embedded files failed to load: a broken build).
func (c *Counter) enc() *tiktoken.Tiktoken {
	if c == nil || c.src == nil {
		return nil
	}
	e, _ := c.src.get()
	return e
}

// Count returns the number of tokens of s. A nil Counter (or one without a
// tokenizer) estimates len(s)/4, rounded up. Counts are exact from the
// first one (it waits for the encoder), so compaction never acts on an
// estimate.
func (c *Counter) Count(s string) int {
	if s == "" {
		return 0
	}
	enc := c.enc()
	if enc == nil {
		return (len(s) + 3) / 4
	}
	// Byte-pair merging is quadratic in the length of one pre-tokenized
	// piece: a 40 KB run without spaces (base64, minified JSON, "xxxx…")
	// takes seconds. Cut such runs into short segments and count each; at
	// most a token per cut is lost.
	n, start, run := 0, 0, 0
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r':
			run = 0
		case run >= maxRun && utf8.RuneStart(ch):
			n += len(enc.EncodeOrdinary(s[start:i]))
			start, run = i, 1
		default:
			run++
		}
	}
	return n + len(enc.EncodeOrdinary(s[start:]))
}

// maxRun is the longest run of non-space bytes tokenized in one piece.
const maxRun = 128

// Bound returns an upper bound of Count(s) that needs no tokenizer: the
// byte length of s as the tokenizer sees it. Every token of a tiktoken BPE
// encoding (o200k_base, cl100k_base) is a non-empty byte string, the text
// is split into pieces that are each covered by their tokens, and special
// tokens are never produced (Count uses EncodeOrdinary), so a text has at
// most one token per byte. tiktoken-go reads the text as runes, so each
// byte of invalid UTF-8 becomes U+FFFD (three bytes) first. The byte
// estimate of a Counter without a tokenizer, len(s)/4 rounded up, is below
// the bound too.
func (c *Counter) Bound(s string) int { return tokenBound(s) }

func tokenBound(s string) int {
	if utf8.ValidString(s) {
		return len(s)
	}
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			n += utf8.RuneLen(utf8.RuneError)
		} else {
			n += size
		}
		i += size
	}
	return n
}

// CountMessage returns the local token count of m including per-message and
// per-call framing. Counts are cached by message content.
func (c *Counter) CountMessage(m provider.Message) int {
	if c == nil {
		return c.tallyMessage(m, c.Count)
	}
	return c.cached(c.hashMessage(m), func() int { return c.tallyMessage(m, c.Count) })
}

// boundMessage is an upper bound of CountMessage(m) that needs no
// tokenizer: the same framing, each text by its Bound.
func (c *Counter) boundMessage(m provider.Message) int {
	return c.tallyMessage(m, tokenBound)
}

// cached returns the count stored under key, computing and storing it on a
// miss. The lock is not held while counting.
func (c *Counter) cached(key uint64, count func() int) int {
	c.mu.Lock()
	if e, ok := c.index[key]; ok {
		c.lru.MoveToFront(e)
		n := e.Value.(*countEntry).n
		c.mu.Unlock()
		return n
	}
	c.mu.Unlock()

	n := count()

	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[key]; ok {
		c.lru.MoveToFront(e)
		return n
	}
	c.index[key] = c.lru.PushFront(&countEntry{key: key, n: n})
	if c.lru.Len() > counterCacheSize {
		last := c.lru.Back()
		c.lru.Remove(last)
		delete(c.index, last.Value.(*countEntry).key)
	}
	return n
}

// tallyMessage adds up m's framing and its texts as text counts them
// (Count, or tokenBound for the upper bound). Opaque blobs and media are
// estimated the same way by both.
func (c *Counter) tallyMessage(m provider.Message, text func(string) int) int {
	n := msgOverhead + text(m.Content)
	for _, r := range m.Reasoning {
		n += text(r.Text)
		// Signatures and redacted data are opaque blobs the provider counts
		// its own way; bytes/4 is as good as anything.
		n += (len(r.Signature) + len(r.Redacted) + 3) / 4
	}
	for _, tc := range m.ToolCalls {
		n += callOverhead + text(tc.Name) + text(tc.Arguments)
	}
	if m.ToolCallID != "" {
		n += text(m.ToolCallID)
	}
	for _, p := range m.Parts {
		n += c.tallyPart(p, text)
	}
	return n
}

func (c *Counter) hashMessage(m provider.Message) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	field := func(s string) { writeField(&h, s) }
	field(string(m.Role))
	field(m.Content)
	field(m.ToolCallID)
	for _, r := range m.Reasoning {
		field(r.Text)
		field(r.Signature)
		field(r.Redacted)
	}
	for _, tc := range m.ToolCalls {
		field(tc.ID)
		field(tc.Name)
		field(tc.Arguments)
	}
	for _, p := range m.Parts {
		field(string(p.Type))
		field(p.Text)
		if f := p.File; f != nil {
			field(f.ID)
			field(f.Name)
			field(f.MimeType)
			field(f.SHA256)
			field(f.Source)
			field(fmt.Sprint(f.Size, f.Width, f.Height, f.Pages))
		}
	}
	return h.Sum64()
}

// CountTools returns the local token count of the tool specs as offered.
// Each spec's count is cached like a message's.
func (c *Counter) CountTools(specs []provider.ToolSpec) int {
	n := 0
	for _, s := range specs {
		count := func() int { return tallyTool(s, c.Count) }
		if c == nil {
			n += count()
			continue
		}
		var h maphash.Hash
		h.SetSeed(c.seed)
		h.WriteString("tool\x00")
		writeField(&h, s.Name)
		writeField(&h, s.Description)
		writeField(&h, string(s.InputSchema))
		n += c.cached(h.Sum64(), count)
	}
	return n
}

// boundTools is an upper bound of CountTools(specs) that needs no
// tokenizer.
func boundTools(specs []provider.ToolSpec) int {
	n := 0
	for _, s := range specs {
		n += tallyTool(s, tokenBound)
	}
	return n
}

func tallyTool(s provider.ToolSpec, text func(string) int) int {
	return callOverhead + text(s.Name) + text(s.Description) + text(string(s.InputSchema))
}

// writeField hashes s with its length, so field boundaries are unambiguous.
func writeField(h *maphash.Hash, s string) {
	var l [8]byte
	n := len(s)
	for i := range l {
		l[i] = byte(n >> (8 * i))
	}
	h.Write(l[:])
	h.WriteString(s)
}
