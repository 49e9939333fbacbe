package splice

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
)

func TestSplice(t *testing.T) {
	s := New()
	a, b := []byte("first bytes"), bytes.Repeat([]byte{0xff, 0, 7}, 1000)
	body, err := json.Marshal(map[string]any{
		"a":    s.Add("data:image/png;base64,", a),
		"b":    []any{"text", s.Add(`odd"prefix<`, b)},
		"text": "splice-not-a-token",
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Splice(body)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		A    string `json:"a"`
		B    []string
		Text string `json:"text"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("spliced body is not JSON: %v\n%s", err, out)
	}
	if v.A != "data:image/png;base64,"+base64.StdEncoding.EncodeToString(a) || v.B[1] != `odd"prefix<`+base64.StdEncoding.EncodeToString(b) || v.Text != "splice-not-a-token" {
		t.Errorf("spliced values wrong: %.80q %.80q %q", v.A, v.B[1], v.Text)
	}
	if out2, _ := New().Splice(body); !bytes.Equal(out2, body) {
		t.Error("a splicer with nothing added changed the body")
	}
	if _, err := s.Splice([]byte(`{}`)); err == nil {
		t.Error("missing placeholders were not reported")
	}
}
