package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/bobbinbot/bobbin/internal/importcheck"
	"github.com/google/go-cmp/cmp"
)

func TestImports(t *testing.T) {
	importcheck.Forbid(t, ".", importcheck.Module, importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}

// readAll drains r and returns its events and the terminal error.
func readAll(r *Reader) ([]Event, error) {
	var evs []Event
	for {
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func TestReader(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		want     []Event
		comments int
	}{
		{name: "empty", in: ""},
		{name: "single", in: "data: hello\n\n", want: []Event{{Data: "hello"}}},
		{name: "no space after colon", in: "data:hello\n\n", want: []Event{{Data: "hello"}}},
		{name: "only one space stripped", in: "data:  two\n\n", want: []Event{{Data: " two"}}},
		{name: "event type", in: "event: ping\ndata: {}\n\n", want: []Event{{Type: "ping", Data: "{}"}}},
		{name: "type does not leak", in: "event: a\ndata: 1\n\ndata: 2\n\n", want: []Event{{Type: "a", Data: "1"}, {Data: "2"}}},
		{name: "multi data joined", in: "data: a\ndata: b\ndata:\n\n", want: []Event{{Data: "a\nb\n"}}},
		{name: "empty data line dispatches", in: "data\n\n", want: []Event{{Data: ""}}},
		{name: "event without data skipped", in: "event: x\n\ndata: y\n\n", want: []Event{{Data: "y"}}},
		{name: "comments ignored", in: ": keep-alive\n\n: OPENROUTER PROCESSING\ndata: z\n\n", want: []Event{{Data: "z"}}, comments: 2},
		{name: "CRLF", in: "event: e\r\ndata: a\r\ndata: b\r\n\r\n: ka\r\n\r\n", want: []Event{{Type: "e", Data: "a\nb"}}, comments: 1},
		{name: "flush at EOF", in: "data: last", want: []Event{{Data: "last"}}},
		{name: "flush at EOF after newline", in: "data: last\n", want: []Event{{Data: "last"}}},
		{name: "flush at EOF CR", in: "data: last\r", want: []Event{{Data: "last"}}},
		{name: "id persists", in: "id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", want: []Event{{Data: "a", ID: "7"}, {Data: "b", ID: "7"}, {Data: "c"}}},
		{name: "id with NUL ignored", in: "id: a\x00b\ndata: x\n\n", want: []Event{{Data: "x"}}},
		{name: "unknown field ignored", in: "foo: bar\ndata: x\n\n", want: []Event{{Data: "x"}}},
		{name: "trailing spaces kept", in: "data: {\"type\":\"message_stop\"}     \n\n", want: []Event{{Data: "{\"type\":\"message_stop\"}     "}}},
		{name: "BOM stripped", in: "\xEF\xBB\xBFdata: x\n\n", want: []Event{{Data: "x"}}},
		{name: "colon in value", in: "data: a: b\n\n", want: []Event{{Data: "a: b"}}},
		{name: "DONE", in: "data: {}\n\ndata: [DONE]\n\n", want: []Event{{Data: "{}"}, {Data: "[DONE]"}}},
		{name: "many blank lines", in: "\n\n\ndata: x\n\n\n\n", want: []Event{{Data: "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, wrap := range []struct {
				name string
				f    func(io.Reader) io.Reader
			}{
				{"whole", func(r io.Reader) io.Reader { return r }},
				{"one byte", iotest.OneByteReader},
			} {
				r := NewReader(wrap.f(strings.NewReader(tt.in)), 0)
				got, err := readAll(r)
				if err != io.EOF {
					t.Fatalf("%s: Next(%q) error = %v, want io.EOF", wrap.name, tt.in, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s: events of %q (-want +got):\n%s", wrap.name, tt.in, diff)
				}
				if r.Comments() != tt.comments {
					t.Errorf("%s: Comments() = %d, want %d", wrap.name, r.Comments(), tt.comments)
				}
				if _, err := r.Next(); err != io.EOF {
					t.Errorf("%s: Next after EOF = %v, want io.EOF", wrap.name, err)
				}
			}
		})
	}
}

func TestRetry(t *testing.T) {
	r := NewReader(strings.NewReader("retry: 1500\ndata: x\n\nretry: 1x\ndata: y\n\n"), 0)
	if _, err := readAll(r); err != io.EOF {
		t.Fatal(err)
	}
	if r.Retry() != 1500 {
		t.Errorf("Retry() = %d, want 1500", r.Retry())
	}
}

func TestLongLines(t *testing.T) {
	big := strings.Repeat("x", 3*bufSize+17)
	r := NewReader(strings.NewReader("data: "+big+"\r\ndata: "+big+"\n\n"), 0)
	got, err := readAll(r)
	if err != io.EOF {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Data != big+"\n"+big {
		t.Errorf("long data lines not joined intact: %d events", len(got))
	}
}

func TestTooLarge(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
	}{
		{"line beyond buffer", "data: " + strings.Repeat("y", 2*bufSize) + "\n\n", bufSize},
		{"short line over cap", "data: " + strings.Repeat("y", 200) + "\n\n", 100},
		{"joined data over cap", strings.Repeat("data: "+strings.Repeat("y", 60)+"\n", 3) + "\n", 100},
		{"comment over cap", ": " + strings.Repeat("y", 3*bufSize) + "\n", bufSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.in), tt.max)
			_, err := readAll(r)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error = %v, want ErrTooLarge", err)
			}
			if _, err2 := r.Next(); !errors.Is(err2, ErrTooLarge) {
				t.Errorf("error not sticky: %v", err2)
			}
		})
	}
}

func TestReadError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)), 0)
	got, err := readAll(r)
	if !errors.Is(err, boom) {
		t.Fatalf("error = %v, want boom", err)
	}
	// The half-read event must not be dispatched as if the stream had ended.
	if diff := cmp.Diff([]Event{{Data: "a"}}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: hello\n\n",
		"event: message_start\ndata: {\"type\":\"message_start\"}   \n\n",
		": keep-alive\r\n\r\ndata: {}\r\n\r\ndata: [DONE]\r\n\r\n",
		"data: a\ndata: b\n\nid: 1\nretry: 10\ndata: c",
		"\xEF\xBB\xBFdata:x\n\n",
		"data:\n\n\n:\n",
		"event\ndata\nid\nretry\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		const max = 1 << 10
		evs, err := readAll(NewReader(strings.NewReader(in), max))
		if err != io.EOF && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("unexpected error %v", err)
		}
		for _, ev := range evs {
			if len(ev.Data) > max {
				t.Fatalf("event data of %d bytes exceeds cap %d", len(ev.Data), max)
			}
		}
		// Chunking of the input must not change the result.
		evs2, err2 := readAll(NewReader(iotest.OneByteReader(strings.NewReader(in)), max))
		if !errors.Is(err2, err) {
			t.Fatalf("one-byte reads: error %v, whole reads: %v", err2, err)
		}
		if diff := cmp.Diff(evs, evs2); diff != "" {
			t.Fatalf("one-byte reads differ (-whole +bytewise):\n%s", diff)
		}
		// CRLF line endings must read like LF ones.
		if !strings.Contains(in, "\r") && err == io.EOF {
			crlf := strings.ReplaceAll(in, "\n", "\r\n")
			evs3, err3 := readAll(NewReader(strings.NewReader(crlf), max+len(crlf)))
			if err3 != io.EOF {
				t.Fatalf("CRLF variant: error %v", err3)
			}
			if diff := cmp.Diff(evs, evs3); diff != "" {
				t.Fatalf("CRLF variant differs (-LF +CRLF):\n%s", diff)
			}
		}
	})
}

func BenchmarkReader(b *testing.B) {
	var sb strings.Builder
	const n = 1000
	for i := 0; i < n; i++ {
		sb.WriteString(`data: {"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1727346142,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	}
	in := sb.String()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	sr := strings.NewReader(in)
	for b.Loop() {
		sr.Reset(in)
		r := NewReader(sr, 0)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}
