// Package jsondec decodes the stream of small JSON values a model endpoint
// sends (one per SSE event) like json.Unmarshal, but through one reused
// json.Decoder, whose scanner stack and error context survive between
// values: that roughly halves the allocations per event on the hot path of
// provider/openai and provider/anthropic.
//
// jsondec imports only the standard library; it must not import any package
// of this module.
package jsondec

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"unsafe"
)

// Decoder decodes one JSON value per call. The zero value is ready. It is
// not safe for concurrent use.
type Decoder struct {
	r   bytes.Reader
	dec *json.Decoder
	fed int64 // bytes handed to dec so far
}

// Unmarshal decodes b into v, accepting and rejecting exactly what
// json.Unmarshal does, with the same result.
func (j *Decoder) Unmarshal(b []byte, v any) error {
	if j.dec == nil {
		j.dec = json.NewDecoder(&j.r)
		j.fed = 0
	}
	j.r.Reset(b)
	j.fed += int64(len(b))
	err := j.dec.Decode(v)
	if err == nil {
		// Like json.Unmarshal, reject anything but space after the value.
		rest := j.fed - j.dec.InputOffset()
		if rest <= int64(len(b)) && len(bytes.TrimSpace(b[int64(len(b))-rest:])) == 0 {
			return nil
		}
	}
	// A failed decoder is unusable; json.Unmarshal, into a zeroed value
	// (the failed Decode may have filled parts of it), gives the canonical
	// result.
	j.dec = nil
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv.Elem().SetZero()
	}
	if err := json.Unmarshal(b, v); err != nil {
		return err
	}
	return errors.New("invalid JSON value")
}

// UnmarshalString is Unmarshal for the text of an SSE event, without copying
// it: encoding/json neither keeps nor modifies its input (the Decoder copies
// into its own buffer), so the string's bytes are lent to it read-only.
func (j *Decoder) UnmarshalString(s string, v any) error {
	return j.Unmarshal(unsafe.Slice(unsafe.StringData(s), len(s)), v)
}
