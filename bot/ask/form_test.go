package ask

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent/ask"
)

func intp(n int) *int { return &n }

// TestFormRoundTrip: what a person picks in each kind of input becomes the
// typed content the server's schema wants, and the answer survives the
// trip through the store typed the same.
func TestFormRoundTrip(t *testing.T) {
	fields := []ask.Field{
		{Name: "name", Kind: ask.FieldString, Required: true, Default: "Ada"},
		{Name: "age", Kind: ask.FieldInteger, Default: 36.0},
		{Name: "ratio", Kind: ask.FieldNumber},
		{Name: "ok", Kind: ask.FieldBoolean, Default: true},
		{Name: "must", Kind: ask.FieldBoolean, Required: true},
		{Name: "size", Kind: ask.FieldEnum, Options: []ask.Option{{Value: "s", Title: "Small"}, {Value: "l", Title: "Large"}}},
		{Name: "tags", Kind: ask.FieldMultiEnum, MaxItems: intp(2), Options: []ask.Option{{Value: "a"}, {Value: "b"}}},
		{Name: "day", Kind: ask.FieldString, Format: "date"},
		{Name: "pin", Kind: ask.FieldString, Title: "Card PIN"},
	}
	state := &slack.ViewState{Values: map[string]map[string]slack.BlockAction{
		"q_f0": {"v": {Value: "Grace"}},
		"q_f1": {"v": {Value: "40"}},
		"q_f2": {"v": {Value: "1.5"}},
		"q_f3": {"v": {}},
		"q_f4": {"v": {SelectedOption: slack.OptionBlockObject{Value: "true"}}},
		"q_f5": {"v": {SelectedOption: slack.OptionBlockObject{Value: "1"}}},
		"q_f6": {"v": {SelectedOptions: []slack.OptionBlockObject{{Value: "0"}, {Value: "1"}}}},
		"q_f7": {"v": {SelectedDate: "2026-02-01"}},
		"q_f8": {"v": {Value: "1234"}},
	}}
	content, errs := formContent(fields, state)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	want := map[string]any{"name": "Grace", "age": int64(40), "ratio": 1.5, "ok": false, "must": true,
		"size": "l", "tags": []string{"a", "b"}, "day": "2026-02-01", "pin": "1234"}
	if diff := cmp.Diff(want, content); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	raw, _ := json.Marshal(content)
	back, err := decodeAnswer(fields, raw)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, back); diff != "" {
		t.Errorf("after the store (-want +got):\n%s", diff)
	}
	sum := answerSummary(fields, content, "U1")
	if strings.Contains(sum, "1234") || !strings.Contains(sum, "*Card PIN*: _hidden_") || !strings.Contains(sum, "*size*: Large") {
		t.Errorf("summary shows %s", sum)
	}
	// Bad input is a field error, not a value.
	_, errs = formContent(fields[1:2], &slack.ViewState{Values: map[string]map[string]slack.BlockAction{"q_f0": {"v": {Value: "4.5"}}}})
	if errs["age"] == "" {
		t.Error("a fraction was accepted for an integer")
	}

	m := questionModal("abc", Question{Server: "a-server-with-a-long-name", Message: "Hi <!channel>", Fields: fields, AsksForSecret: true})
	if m.PrivateMetadata != "abc" || m.CallbackID != CallbackQuestion || len([]rune(m.Title.Text)) > 24 {
		t.Errorf("modal %+v", m)
	}
	raw, _ = json.Marshal(m)
	for _, want := range []string{`"type":"checkboxes"`, `"type":"datepicker"`, `"type":"number_input"`, `"max_selected_items":2`, "must not ask for secrets", `Hi \u0026lt;!channel\u0026gt;`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("modal lacks %s: %s", want, raw)
		}
	}
}
