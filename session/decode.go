package session

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/bobbinbot/bobbin/provider"
)

// fastDecodeMessage decodes the JSON that json.Marshal produces for a
// provider.Message, about three times faster than encoding/json (decoding
// dominates Load). It handles exactly the canonical shape: known keys, each
// once, string, boolean and non-negative integer values, valid UTF-8 and
// standard escapes. On anything else (unknown or repeated keys, null,
// fractions, exponents or negative numbers, lone surrogates,
// invalid UTF-8, trailing data) it reports false and the caller uses
// encoding/json, which also produces the error. FuzzFastDecode checks that
// whenever it succeeds, encoding/json agrees exactly.
func fastDecodeMessage(data []byte, m *provider.Message) bool {
	d := decoder{b: data}
	ok := d.object(func(key string) bool {
		switch key {
		case "role":
			s, ok := d.str()
			m.Role = provider.Role(s)
			return ok
		case "content":
			return d.strInto(&m.Content)
		case "user_id":
			return d.strInto(&m.UserID)
		case "user_name":
			return d.strInto(&m.UserName)
		case "tool_call_id":
			return d.strInto(&m.ToolCallID)
		case "tool_name":
			return d.strInto(&m.ToolName)
		case "is_error":
			return d.boolInto(&m.IsError)
		case "summary":
			return d.boolInto(&m.Summary)
		case "interrupted":
			return d.boolInto(&m.Interrupted)
		case "reasoning":
			m.Reasoning = []provider.Reasoning{}
			return d.array(func() bool {
				var r provider.Reasoning
				ok := d.object(func(key string) bool {
					switch key {
					case "text":
						return d.strInto(&r.Text)
					case "signature":
						return d.strInto(&r.Signature)
					case "redacted":
						return d.strInto(&r.Redacted)
					}
					return false
				})
				m.Reasoning = append(m.Reasoning, r)
				return ok
			})
		case "tool_calls":
			m.ToolCalls = []provider.ToolCall{}
			return d.array(func() bool {
				var c provider.ToolCall
				ok := d.object(func(key string) bool {
					switch key {
					case "id":
						return d.strInto(&c.ID)
					case "name":
						return d.strInto(&c.Name)
					case "arguments":
						return d.strInto(&c.Arguments)
					}
					return false
				})
				m.ToolCalls = append(m.ToolCalls, c)
				return ok
			})
		case "parts":
			m.Parts = []provider.Part{}
			return d.array(func() bool {
				var p provider.Part
				ok := d.part(&p)
				m.Parts = append(m.Parts, p)
				return ok
			})
		case "meta":
			m.Meta = map[string]string{}
			return d.object(func(key string) bool {
				v, ok := d.str()
				m.Meta[key] = v
				return ok
			})
		}
		return false
	})
	d.ws()
	return ok && d.i == len(d.b)
}

// part decodes one provider.Part (a message's file reference).
func (d *decoder) part(p *provider.Part) bool {
	return d.object(func(key string) bool {
		switch key {
		case "type":
			s, ok := d.str()
			p.Type = provider.PartType(s)
			return ok
		case "text":
			return d.strInto(&p.Text)
		case "file":
			f := &provider.FileRef{}
			p.File = f
			return d.object(func(key string) bool {
				switch key {
				case "id":
					return d.strInto(&f.ID)
				case "name":
					return d.strInto(&f.Name)
				case "mime_type":
					return d.strInto(&f.MimeType)
				case "size":
					return d.int64Into(&f.Size)
				case "sha256":
					return d.strInto(&f.SHA256)
				case "width":
					return d.intInto(&f.Width)
				case "height":
					return d.intInto(&f.Height)
				case "pages":
					return d.intInto(&f.Pages)
				case "url":
					return d.strInto(&f.URL)
				case "source":
					return d.strInto(&f.Source)
				}
				return false
			})
		}
		return false
	})
}

type decoder struct {
	b []byte
	i int
}

// int64Into parses a non-negative integer without leading zeros, fraction
// or exponent, at most 18 digits (so it cannot overflow); anything else is
// left to encoding/json.
func (d *decoder) int64Into(p *int64) bool {
	start := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	n := d.i - start
	if n == 0 || n > 18 || n > 1 && d.b[start] == '0' {
		return false
	}
	if d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		return false
	}
	var v int64
	for _, c := range d.b[start:d.i] {
		v = v*10 + int64(c-'0')
	}
	*p = v
	return true
}

func (d *decoder) intInto(p *int) bool {
	var v int64
	if !d.int64Into(&v) || int64(int(v)) != v {
		return false
	}
	*p = int(v)
	return true
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) consume(c byte) bool {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// object parses {"key": value, ...}, calling field for each value; a key
// seen twice fails (encoding/json merges repeated maps, which is not worth
// imitating).
func (d *decoder) object(field func(key string) bool) bool {
	if !d.consume('{') {
		return false
	}
	if d.consume('}') {
		return true
	}
	var seenBuf [16]string
	seen := seenBuf[:0]
	for {
		d.ws()
		key, ok := d.str()
		if !ok || !d.consume(':') {
			return false
		}
		for _, s := range seen {
			if s == key {
				return false
			}
		}
		seen = append(seen, key)
		d.ws()
		if !field(key) {
			return false
		}
		if d.consume(',') {
			continue
		}
		return d.consume('}')
	}
}

func (d *decoder) array(elem func() bool) bool {
	if !d.consume('[') {
		return false
	}
	if d.consume(']') {
		return true
	}
	for {
		d.ws()
		if !elem() {
			return false
		}
		if d.consume(',') {
			continue
		}
		return d.consume(']')
	}
}

func (d *decoder) boolInto(p *bool) bool {
	switch {
	case len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "true":
		*p = true
		d.i += 4
	case len(d.b)-d.i >= 5 && string(d.b[d.i:d.i+5]) == "false":
		*p = false
		d.i += 5
	default:
		return false
	}
	return true
}

func (d *decoder) strInto(p *string) bool {
	s, ok := d.str()
	*p = s
	return ok
}

// str parses a string at d.i.
func (d *decoder) str() (string, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return "", false
	}
	d.i++
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			seg := d.b[start:d.i]
			d.i++
			if !utf8.Valid(seg) {
				return "", false
			}
			return string(seg), true
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", false
		}
		d.i++
	}
	return "", false
}

// escaped finishes a string that contains escapes, from its start.
func (d *decoder) escaped(start int) (string, bool) {
	if !utf8.Valid(d.b[start:d.i]) {
		return "", false
	}
	buf := make([]byte, 0, d.i-start+32)
	buf = append(buf, d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return string(buf), true
		case c < 0x20:
			return "", false
		case c != '\\':
			// Copy a run of plain bytes, checking UTF-8.
			j := d.i
			for j < len(d.b) && d.b[j] != '"' && d.b[j] != '\\' && d.b[j] >= 0x20 {
				j++
			}
			if !utf8.Valid(d.b[d.i:j]) {
				return "", false
			}
			buf = append(buf, d.b[d.i:j]...)
			d.i = j
			continue
		}
		if d.i+1 >= len(d.b) {
			return "", false
		}
		e := d.b[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				// Only a high surrogate followed by an escaped low one.
				if r >= 0xDC00 || d.i+1 >= len(d.b) || d.b[d.i] != '\\' || d.b[d.i+1] != 'u' {
					return "", false
				}
				d.i += 2
				r2, ok := d.hex4()
				if !ok || r2 < 0xDC00 || r2 > 0xDFFF {
					return "", false
				}
				r = utf16.DecodeRune(r, r2)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (d *decoder) hex4() (rune, bool) {
	if d.i+4 > len(d.b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(d.b[d.i:d.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	d.i += 4
	return rune(n), true
}
