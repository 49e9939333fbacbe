package session

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bobbinbot/bobbin/provider"
)

func TestFastDecodeMatchesEncodingJSON(t *testing.T) {
	msgs := append(sampleMessages(), benchMessage(7),
		provider.Message{Role: "user", Content: "emoji 😀 and \U0001F600 \t\n\\ \"q\" </script> & \u2028\u2029 \x7f é"},
		provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "a", Name: "b", Arguments: `{"k":["v",1,null]}`}, {ID: "c"}}},
		provider.Message{Meta: map[string]string{"": "", "k": "v\u0000"}},
	)
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var got provider.Message
		if !fastDecodeMessage(b, &got) {
			t.Errorf("message %d: fast path refused canonical JSON %s", i, b)
			continue
		}
		if diff := cmp.Diff(m, got); diff != "" {
			t.Errorf("message %d: (-want +got)\n%s", i, diff)
		}
	}
	// Shapes the fast path leaves to encoding/json.
	for _, in := range []string{
		`{"role":"user","content":null}`, `{"Role":"user"}`, `{"role":"user","role":"x"}`, `{"role":"user"} x`,
		`{"content":"\ud800"}`, `{"content":"\xff"}`, `{"is_error":1}`, `{"extra":"x"}`, `[]`, ``, `{"content":"a`,
		`{"parts":[{"file":null}]}`, `{"parts":[{"file":{"size":01}}]}`, `{"parts":[{"file":{"size":-1}}]}`,
		`{"parts":[{"file":{"width":1e2}}]}`, `{"parts":[{"file":{"width":2.0}}]}`, `{"parts":[{"data":"AAAA"}]}`,
		`{"parts":[{"file":{"size":1234567890123456789}}]}`, `{"parts":null}`,
	} {
		var m provider.Message
		if fastDecodeMessage([]byte(in), &m) {
			t.Errorf("fast path accepted %q", in)
		}
	}
}

// FuzzFastDecode: whenever the fast path accepts input, encoding/json must
// accept it too and produce exactly the same message.
func FuzzFastDecode(f *testing.F) {
	for _, m := range append(sampleMessages(), benchMessage(1)) {
		b, _ := json.Marshal(m)
		f.Add(b)
	}
	for _, s := range []string{`{"parts":[]}`, `{"parts":[{"type":"note","file":{"size":0,"width":12,"pages":3}},{}]}`, `{"parts":[{"file":{"size":-0}}]}`, `{}`, `{"meta":{}}`, `{"tool_calls":[]}`, `{ "role" : "user" , "content":"\ud83d\ude00\/" }`, `{"reasoning":[{"text":"a"},{}]}`, `{"summary":false}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast provider.Message
		if !fastDecodeMessage(data, &fast) {
			return
		}
		var std provider.Message
		if err := json.Unmarshal(data, &std); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json says %v", data, err)
		}
		if diff := cmp.Diff(std, fast); diff != "" {
			t.Fatalf("input %q: (-encoding/json +fast)\n%s", data, diff)
		}
	})
}
