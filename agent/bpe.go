package agent

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dlclark/regexp2"
	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// bpeTable is one tiktoken encoding in a compact form: the tokens' bytes
// back to back in rank order and an open-addressing index of ranks by
// hash. o200k_base takes ~4 MB this way against ~23 MB (and 90-200 ms
// more to build) as tiktoken-go's Go maps; only counting is needed, so
// there is no decoder and no special tokens (Count treats "<|endoftext|>"
// as ordinary text, as tiktoken's EncodeOrdinary does).
type bpeTable struct {
	blob  []byte
	off   []uint32 // token of rank r is blob[off[r]:off[r+1]]
	slots []uint32 // rank+1, by hash; 0 is an empty slot
	mask  uint32
	seed  maphash.Seed
	pat   *regexp2.Regexp
}

// bpeEncoding says where an encoding's ranks are and how text is split
// into pieces before merging (tiktoken's published patterns). tokens and
// bytes size the table in one allocation each.
type bpeEncoding struct {
	file          string
	pattern       string
	tokens, bytes int
}

var bpeEncodings = map[string]bpeEncoding{
	EncodingO200K: {
		file: "o200k_base.tiktoken",
		pattern: strings.Join([]string{
			`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
			`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
			`\p{N}{1,3}`,
			` ?[^\s\p{L}\p{N}]+[\r\n/]*`,
			`\s*[\r\n]+`,
			`\s+(?!\S)`,
			`\s+`,
		}, "|"),
		tokens: 199998, bytes: 1397670,
	},
	EncodingCL100K: {
		file:    "cl100k_base.tiktoken",
		pattern: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
		tokens:  100256, bytes: 643830,
	},
}

// lazyTable builds its encoding's table on first use: a process that has
// not run a turn holds none of it (issue 23: the tables were most of an
// idle replica's memory and a third of its start-up).
type lazyTable struct {
	name   string
	once   sync.Once
	tab    *bpeTable
	err    error
	loaded atomic.Bool
}

// get returns the table, building it on the first call; concurrent
// callers wait for the one build.
func (l *lazyTable) get() (*bpeTable, error) {
	l.once.Do(func() {
		l.tab, l.err = loadBPE(l.name)
		if l.err != nil {
			l.err = fmt.Errorf("agent: tokenizer %s: %w", l.name, l.err)
		}
		l.loaded.Store(true)
	})
	return l.tab, l.err
}

// tables holds one lazily built table per encoding for the whole process
// (a built one is read-only and shared by every Counter).
var tables = map[string]*lazyTable{
	EncodingO200K:  {name: EncodingO200K},
	EncodingCL100K: {name: EncodingCL100K},
}

// loadBPE reads an encoding's ranks from the embedded tiktoken file
// ("<base64 token> <rank>" per line, ranks 0, 1, 2, … in order) straight
// into the compact table, never holding the file or a map in memory.
func loadBPE(name string) (*bpeTable, error) {
	enc, ok := bpeEncodings[name]
	if !ok {
		return nil, fmt.Errorf("unknown encoding")
	}
	pat, err := regexp2.Compile(enc.pattern, regexp2.None)
	if err != nil {
		return nil, err
	}
	f, err := assets.Assets.Open(enc.file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t := &bpeTable{
		blob: make([]byte, 0, enc.bytes),
		off:  make([]uint32, 1, enc.tokens+1),
		seed: maphash.MakeSeed(),
		pat:  pat,
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		tok, rank, ok := bytes.Cut(line, []byte(" "))
		if !ok {
			return nil, fmt.Errorf("%s: line %d: no rank", enc.file, len(t.off))
		}
		if r, err := strconv.Atoi(string(rank)); err != nil || r != len(t.off)-1 {
			return nil, fmt.Errorf("%s: line %d: rank %q out of order", enc.file, len(t.off), rank)
		}
		if t.blob, err = base64.StdEncoding.AppendDecode(t.blob, tok); err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", enc.file, len(t.off), err)
		}
		t.off = append(t.off, uint32(len(t.blob)))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	n := len(t.off) - 1
	size := 1
	for size < 2*n {
		size <<= 1
	}
	t.slots = make([]uint32, size)
	t.mask = uint32(size - 1)
	for r := range n {
		tok := t.blob[t.off[r]:t.off[r+1]]
		i := uint32(maphash.Bytes(t.seed, tok)) & t.mask
		for t.slots[i] != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = uint32(r) + 1
	}
	return t, nil
}

// rank returns the rank of token s.
func (t *bpeTable) rank(s string) (uint32, bool) {
	i := uint32(maphash.String(t.seed, s)) & t.mask
	for {
		v := t.slots[i]
		if v == 0 {
			return 0, false
		}
		r := v - 1
		if string(t.blob[t.off[r]:t.off[r+1]]) == s {
			return r, true
		}
		i = (i + 1) & t.mask
	}
}

// count returns the number of tokens tiktoken's EncodeOrdinary makes of s.
func (t *bpeTable) count(s string) int {
	n := 0
	m, _ := t.pat.FindStringMatch(s)
	for m != nil {
		n += t.countPiece(m.String())
		m, _ = t.pat.FindNextMatch(m)
	}
	return n
}

// noRank marks a pair that is no token.
const noRank = ^uint32(0)

// countPiece byte-pair merges one piece: repeatedly join the adjacent
// pair whose joined bytes have the lowest rank (the leftmost on a tie)
// until no pair is a token; the parts left are the tokens.
func (t *bpeTable) countPiece(p string) int {
	if len(p) <= 1 {
		return len(p)
	}
	if _, ok := t.rank(p); ok {
		return 1
	}
	// part i is p[start[i]:start[i+1]]; pair[i] is the rank of parts i
	// and i+1 joined.
	var startBuf [130]int
	var pairBuf [130]uint32
	start, pair := startBuf[:0], pairBuf[:0]
	if len(p)+1 > len(startBuf) {
		start, pair = make([]int, 0, len(p)+1), make([]uint32, 0, len(p)+1)
	}
	for i := 0; i <= len(p); i++ {
		start = append(start, i)
	}
	pairRank := func(i int) uint32 {
		if i < 0 || i+2 >= len(start) {
			return noRank
		}
		if r, ok := t.rank(p[start[i]:start[i+2]]); ok {
			return r
		}
		return noRank
	}
	for i := 0; i < len(start)-1; i++ {
		pair = append(pair, pairRank(i))
	}
	for {
		best, at := noRank, -1
		for i, r := range pair {
			if r < best {
				best, at = r, i
			}
		}
		if at < 0 {
			return len(start) - 1
		}
		start = append(start[:at+1], start[at+2:]...)
		pair = append(pair[:at+1], pair[at+2:]...)
		pair[at] = pairRank(at)
		if at > 0 {
			pair[at-1] = pairRank(at - 1)
		}
	}
}
