// Package splice writes megabytes of base64 into a request's JSON without
// encoding/json touching them: the body is marshalled with short
// placeholders, which Splice then replaces with the data, base64-encoded
// straight into the final buffer. encoding/json validates (and copies) the
// output of every MarshalJSON at each level of nesting, which for a 1 MB
// image cost ~18 ms and 4.5 MB per request; splicing costs one base64
// encoding and one copy.
//
// splice may import only the standard library.
package splice

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
)

// Splicer collects the data of one request body. The zero value is not
// usable; use New. It is not safe for concurrent use.
type Splicer struct {
	nonce string
	items []item
}

type item struct {
	prefix string // written before the base64, inside the string
	data   []byte
}

// New returns a Splicer whose placeholders carry a random nonce, so no
// text a person wrote can be taken for one.
func New() *Splicer {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return &Splicer{nonce: "splice-" + hex.EncodeToString(b[:]) + "-"}
}

// Placeholder stands in a marshalled body for one JSON string: prefix
// followed by the base64 of data.
type Placeholder struct {
	s *Splicer
	i int
}

// Add registers a string of prefix + base64(data) and returns its
// placeholder, to be put where the string belongs.
func (s *Splicer) Add(prefix string, data []byte) Placeholder {
	// The prefix ("data:image/png;base64,") goes inside a JSON string.
	if q, err := json.Marshal(prefix); err == nil {
		prefix = string(q[1 : len(q)-1])
	}
	s.items = append(s.items, item{prefix: prefix, data: data})
	return Placeholder{s: s, i: len(s.items) - 1}
}

// MarshalJSON writes the placeholder token as a JSON string: ASCII letters,
// digits and dashes, which no encoder escapes.
func (p Placeholder) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, p.s.token(p.i)), nil
}

func (s *Splicer) token(i int) string { return s.nonce + strconv.Itoa(i) }

// errMissing means a placeholder did not appear in the body in order.
var errMissing = errors.New("splice: placeholder missing from the body")

// Splice returns body with every placeholder replaced, in the order they
// were added (which is the order encoding/json writes them). body is
// returned as is when nothing was added.
func (s *Splicer) Splice(body []byte) ([]byte, error) {
	if len(s.items) == 0 {
		return body, nil
	}
	size := len(body)
	for _, it := range s.items {
		size += len(it.prefix) + base64.StdEncoding.EncodedLen(len(it.data))
	}
	out := make([]byte, 0, size)
	rest := body
	for i, it := range s.items {
		tok := strconv.AppendQuote(nil, s.token(i))
		j := bytes.Index(rest, tok)
		if j < 0 {
			return nil, errMissing
		}
		out = append(out, rest[:j]...)
		out = append(out, '"')
		out = append(out, it.prefix...)
		n := len(out)
		out = out[:n+base64.StdEncoding.EncodedLen(len(it.data))]
		base64.StdEncoding.Encode(out[n:], it.data)
		out = append(out, '"')
		rest = rest[j+len(tok):]
	}
	return append(out, rest...), nil
}
