package jsondec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/internal/importcheck"
	"github.com/google/go-cmp/cmp"
)

func TestImports(t *testing.T) {
	importcheck.Forbid(t, ".", importcheck.Module, importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}

// value has the shapes the stream decoders read: nested objects, arrays,
// pointers and raw JSON.
type value struct {
	Type    string `json:"type"`
	Index   *int   `json:"index"`
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		In int `json:"input_tokens"`
	} `json:"usage"`
	Raw json.RawMessage `json:"raw"`
}

// FuzzDecoder checks that the reused json.Decoder accepts and rejects
// exactly what json.Unmarshal does, with the same result, across a sequence
// of values (one per line), including after a failure.
func FuzzDecoder(f *testing.F) {
	f.Add(`{"choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n" + `{"choices":[]} x` + "\n" + `{"usage":{"input_tokens":3}}`)
	f.Add("1\n  \n[1]\n{\"choices\":null}  \n{")
	f.Add(`{"type":"message_stop"       }` + "\n" + `{}{}` + "\n" + `"s"` + "\n" + `{"raw":{"a":[1,2]},"index":7}`)
	f.Fuzz(func(t *testing.T, in string) {
		var j Decoder
		for i, line := range strings.Split(in, "\n") {
			var got, want value
			var gerr error
			if i%2 == 0 {
				gerr = j.UnmarshalString(line, &got)
			} else {
				gerr = j.Unmarshal([]byte(line), &got)
			}
			werr := json.Unmarshal([]byte(line), &want)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("line %q: reused decoder error %v, json.Unmarshal error %v", line, gerr, werr)
			}
			if werr == nil {
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("line %q decoded differently (-Unmarshal +reused):\n%s", line, diff)
				}
			}
		}
	})
}
