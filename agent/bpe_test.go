package agent

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/bobbinbot/bobbin/provider"
	pt "github.com/bobbinbot/bobbin/provider/providertest"
)

var refOnce sync.Once

// reference is tiktoken-go's encoder, the yardstick of the compact table.
func reference(t testing.TB, name string) *tiktoken.Tiktoken {
	t.Helper()
	refOnce.Do(func() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) })
	enc, err := tiktoken.GetEncoding(name)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// bpeSamples covers what the pre-tokenizer patterns tell apart: words and
// contractions in several cases, numbers, punctuation runs, whitespace
// runs and line ends, code, JSON, scripts without spaces, emoji, combining
// marks and invalid UTF-8.
var bpeSamples = []string{
	"hello world",
	"Hello, World! I'm here; you're there. WE'LL SEE. They'd've.",
	"The quick brown fox jumps over the lazy dog 1234567890 times.",
	"   leading spaces and trailing   \n\n\n  \t\tindented\r\n\r\nwindows lines",
	"func main() {\n\tfmt.Println(\"hi\")\n\tfor i := 0; i < 10; i++ {}\n}\n",
	`{"query":"weather in Paris","units":"metric","limit":25,"nested":{"a":[1,2,3]}}`,
	"日本語のテキストは空白なしで続きます。東京タワーは333メートルです。",
	"Привет, мир! Это тест токенизатора с кириллицей.",
	"مرحبا بالعالم، هذا اختبار",
	"emoji 🎉🎉🎉 and 👩‍👩‍👧‍👦 family, flags 🇫🇷🇩🇪",
	"café naïve coöperate e\u0301 combining",
	"https://example.com/path/to/resource?x=1&y=two#frag //// ////\n///",
	"aGVsbG8gd29ybGQaGVsbG8gd29ybGQaGVsbG8gd29ybGQaGVsbG8gd29ybGQ=",
	"invalid \xff\xfe bytes \xc3 here",
	"<|endoftext|> is ordinary text here",
	"CamelCaseWordsAndALLCAPSWords mixedCASE iPhone XMLHttpRequest",
	"$$$ ??? !!! ... --- *** ### @@@ %%% ^^^ &&& ((())) [[[]]] {{{}}}",
	"1,000,000.00 3.14159 -42 +7 1e10 0x1F 12345678901234567890",
	strings.Repeat("lorem ipsum dolor sit amet ", 40),
	strings.Repeat("x", 300),
	strings.Repeat(" ", 200) + "a",
}

// TestBPEMatchesTiktoken: the compact table counts exactly what
// tiktoken-go's EncodeOrdinary makes, for both encodings.
func TestBPEMatchesTiktoken(t *testing.T) {
	for _, name := range []string{EncodingO200K, EncodingCL100K} {
		t.Run(name, func(t *testing.T) {
			ref := reference(t, name)
			tab, err := tables[name].get()
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range append(bpeSamples, mixed100KB()[:20000]) {
				if got, want := tab.count(s), len(ref.EncodeOrdinary(s)); got != want {
					t.Errorf("count(%.40q) = %d, tiktoken-go %d", s, got, want)
				}
			}
		})
	}
}

// TestTokenizerLoadsOnFirstTurn: building a Counter and an Agent loads no
// table (a replica that has not run a turn does not hold it); the first
// turn does, and counts exactly from its first count.
func TestTokenizerLoadsOnFirstTurn(t *testing.T) {
	lazy := &lazyTable{name: EncodingO200K}
	c := newCounter(EncodingO200K, lazy)
	e := newEnv(t, Options{Counter: c}, nil, pt.Text("hello"))
	if lazy.loaded.Load() {
		t.Fatal("the tokenizer table was built before any turn")
	}
	h := []provider.Message{user("hello world")}
	if _, err := e.agent.Run(context.Background(), e.turn(h)); err != nil {
		t.Fatal(err)
	}
	if !lazy.loaded.Load() {
		t.Fatal("a turn ran without building the tokenizer table (counts would be estimates)")
	}
	if n := c.Count("hello world"); n != 2 {
		t.Errorf("Count(hello world) = %d after the first turn, want 2", n)
	}
}
