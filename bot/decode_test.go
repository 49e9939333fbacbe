package bot

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/slack-go/slack"
)

func testBot() *Bot {
	return &Bot{botUserID: "U0BOT", botID: "B0BOT", opts: Options{}, ws: single{}}
}

func TestDecodeEvent(t *testing.T) {
	cb := func(ev string) string {
		return `{"type":"event_callback","team_id":"T1","event_id":"Ev1","event":` + ev + `}`
	}
	tests := []struct {
		name         string
		raw          string
		ok           bool
		kind, thread string
		text         string
		needsSession bool
	}{
		{"mention top level", cb(`{"type":"app_mention","user":"U2","text":"<@U0BOT> hi","ts":"1.1","channel":"C1"}`), true, kindMention, "1.1", "hi", false},
		{"mention in thread", cb(`{"type":"app_mention","user":"U2","text":"yo <@U0BOT>","ts":"2.2","thread_ts":"1.1","channel":"C1"}`), true, kindMention, "1.1", "yo", false},
		{"thread reply", cb(`{"type":"message","user":"U2","text":"more","ts":"2.2","thread_ts":"1.1","channel":"C1","channel_type":"channel"}`), true, kindReply, "1.1", "more", true},
		{"top-level message", cb(`{"type":"message","user":"U2","text":"chatter","ts":"2.2","channel":"C1","channel_type":"channel"}`), false, "", "", "", false},
		{"mention as message", cb(`{"type":"message","user":"U2","text":"<@U0BOT> x","ts":"2.2","thread_ts":"1.1","channel":"C1"}`), false, "", "", "", false},
		{"dm", cb(`{"type":"message","user":"U2","text":"hello","ts":"3.3","channel":"D1","channel_type":"im"}`), true, kindDM, "3.3", "hello", false},
		{"own echo", cb(`{"type":"message","user":"U0BOT","bot_id":"B0BOT","text":"mine","ts":"3.3","channel":"D1","channel_type":"im"}`), false, "", "", "", false},
		{"other bot", cb(`{"type":"message","subtype":"bot_message","bot_id":"B9","text":"beep","ts":"3.3","channel":"D1"}`), false, "", "", "", false},
		{"edit", cb(`{"type":"message","subtype":"message_changed","channel":"D1","ts":"4.4"}`), false, "", "", "", false},
		{"assistant", cb(`{"type":"assistant_thread_started","assistant_thread":{"user_id":"U2","channel_id":"D1","thread_ts":"5.5","context":{}}}`), true, kindAssistant, "5.5", "", false},
		{"url verification", `{"type":"url_verification"}`, false, "", "", "", false},
	}
	b := testBot()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, needs, ok, err := b.decodeEvent(json.RawMessage(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.ok || (ok && (m.Kind != tt.kind || m.ThreadTS != tt.thread || m.Text != tt.text || needs != tt.needsSession)) {
				t.Errorf("decodeEvent(%s) = %+v needs=%v ok=%v, want kind %q thread %q text %q needs %v ok %v", tt.raw, m, needs, ok, tt.kind, tt.thread, tt.text, tt.needsSession, tt.ok)
			}
		})
	}
}

// FuzzDecodeEnvelope feeds arbitrary payloads to the decoders the socket
// loop uses: nothing may panic, and an accepted event is well-formed.
func FuzzDecodeEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"type":"event_callback","team_id":"T1","event_id":"E","event":{"type":"app_mention","user":"U","text":"<@U0BOT> hi","ts":"1.1","channel":"C"}}`,
		`{"type":"event_callback","team_id":"T1","event":{"type":"assistant_thread_started","assistant_thread":{"channel_id":"D","thread_ts":"1"}}}`,
		`{"type":"event_callback","event":"x"}`,
		`{"type":"block_actions","team":{"id":"T1"},"user":{"id":"U"},"actions":[{"action_id":"bobbin_stop","value":"T1:C:1.1"}]}`,
		`[]`, `null`, `{"event":{"type":"message","thread_ts":5}}`,
	} {
		f.Add([]byte(s))
	}
	b := testBot()
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, _, ok, _ := b.decodeEvent(raw)
		if ok && (m.Team == "" || m.Channel == "" || m.ThreadTS == "") {
			t.Fatalf("accepted an incomplete event: %+v", m)
		}
		if ok && strings.Contains(m.Text, "<@U0BOT>") {
			t.Fatalf("mention not stripped: %q", m.Text)
		}
		var cb slack.InteractionCallback
		if json.Unmarshal(raw, &cb) == nil {
			for _, a := range cb.ActionCallback.BlockActions {
				if a != nil {
					parseThreadKey(a.Value)
				}
			}
		}
		var cmd slack.SlashCommand
		_ = json.Unmarshal(raw, &cmd)
	})
}
