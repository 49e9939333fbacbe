// Package sse reads Server-Sent Events (the framing of the HTML Living
// Standard, "event stream interpretation") from a model endpoint's response
// body. Both provider/openai and provider/anthropic use it.
//
// It is built on bufio.Reader rather than bufio.Scanner because a single
// tool-argument chunk can exceed the Scanner's default 64 KiB token limit; an
// explicit per-event cap turns oversized input into an error instead of
// unbounded memory.
//
// sse imports only the standard library; it must not import any package of
// this module.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// ErrTooLarge is returned when a line or an event's data exceeds the size cap
// given to NewReader. The reader cannot continue after it.
var ErrTooLarge = errors.New("sse: event exceeds size limit")

// DefaultMaxEventBytes is the cap NewReader uses when given a size <= 0.
const DefaultMaxEventBytes = 8 << 20

// bufSize is the bufio buffer; lines longer than it are assembled in a
// separate growable buffer, still bounded by the cap.
const bufSize = 16 << 10

// Event is one dispatched event.
type Event struct {
	// Type is the value of the event's "event:" field, or "" when the event
	// had none (the spec's implicit "message"; some endpoints never send
	// "event:" lines).
	Type string
	// Data is the event's "data:" lines joined with "\n".
	Data string
	// ID is the last event ID seen so far; as in the spec it persists across
	// events until another "id:" field changes it.
	ID string
}

// Reader reads events one at a time. It is not safe for concurrent use.
type Reader struct {
	br  *bufio.Reader
	max int

	data    []byte // data of the event being assembled
	hasData bool
	typ     []byte // event type of the event being assembled
	long    []byte // assembly buffer for lines longer than the bufio buffer

	// Cached strings: event types and ids repeat, so a dispatch reuses the
	// previous string when the bytes are equal instead of allocating.
	typStr string
	idStr  string

	retry    int
	comments int
	started  bool
	err      error // sticky terminal error (io.EOF at a clean end)
}

// NewReader returns a Reader that reads from r. maxEventBytes caps both a
// single line and an event's joined data; <= 0 means DefaultMaxEventBytes.
func NewReader(r io.Reader, maxEventBytes int) *Reader {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxEventBytes
	}
	return &Reader{br: bufio.NewReaderSize(r, bufSize), max: maxEventBytes}
}

// Comments reports how many comment lines (lines starting with ":", such as
// keep-alives and ": OPENROUTER PROCESSING") the reader has skipped. Comments
// are never returned as events: they are not data and must not reset an idle
// timer.
func (r *Reader) Comments() int { return r.comments }

// Retry returns the last valid "retry:" value in milliseconds, or 0.
func (r *Reader) Retry() int { return r.retry }

// Next returns the next event that carries data. Events without any "data:"
// line are skipped, as the spec requires. At the end of the input the last
// event is dispatched even without a trailing blank line; after that Next
// returns io.EOF. Any other error (a read error, ErrTooLarge) is returned as
// is and repeats on later calls. Lines may end in LF or CRLF; a lone CR is
// not a line terminator.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		line, rerr := r.readLine()
		if rerr != nil && rerr != io.EOF {
			r.err = rerr
			return Event{}, rerr
		}
		if len(line) == 0 {
			if rerr == io.EOF {
				r.err = io.EOF
				if r.hasData {
					return r.dispatch(), nil
				}
				return Event{}, io.EOF
			}
			if r.hasData {
				return r.dispatch(), nil
			}
			r.typ = r.typ[:0]
			continue
		}
		if err := r.field(line); err != nil {
			r.err = err
			return Event{}, err
		}
		if rerr == io.EOF {
			r.err = io.EOF
			if r.hasData {
				return r.dispatch(), nil
			}
			return Event{}, io.EOF
		}
	}
}

// field processes one non-empty line.
func (r *Reader) field(line []byte) error {
	if line[0] == ':' {
		r.comments++
		return nil
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		n := len(r.data) + len(value)
		if r.hasData {
			n++
		}
		if n > r.max {
			return ErrTooLarge
		}
		if r.hasData {
			r.data = append(r.data, '\n')
		}
		r.data = append(r.data, value...)
		r.hasData = true
	case "event":
		r.typ = append(r.typ[:0], value...)
	case "id":
		// The spec ignores ids containing NUL.
		if bytes.IndexByte(value, 0) < 0 && string(value) != r.idStr {
			r.idStr = string(value)
		}
	case "retry":
		if n, ok := digits(value); ok {
			r.retry = n
		}
	}
	return nil
}

func digits(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func (r *Reader) dispatch() Event {
	if string(r.typ) != r.typStr {
		r.typStr = string(r.typ)
	}
	ev := Event{Type: r.typStr, Data: string(r.data), ID: r.idStr}
	r.data = r.data[:0]
	r.hasData = false
	r.typ = r.typ[:0]
	return ev
}

// readLine returns the next line without its terminator. The slice is valid
// until the next read. At the end of input it returns the unterminated rest
// (possibly empty) with io.EOF.
func (r *Reader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = r.br.ReadSlice('\n')
			if len(r.long)+len(line) > r.max+2 {
				return nil, ErrTooLarge
			}
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	if err != nil && err != io.EOF {
		return nil, err
	}
	if !r.started {
		r.started = true
		// A leading UTF-8 byte order mark is not part of the first field.
		line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
	}
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > r.max {
		return nil, ErrTooLarge
	}
	return line, err
}
