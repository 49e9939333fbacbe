package bot

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// assistantFixtures are Slack's own assistant-thread payloads (testdata/SOURCES.md).
func assistantFixtures(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile("testdata/events-assistant-thread.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDecodeAssistantEvents(t *testing.T) {
	fx := assistantFixtures(t)
	b := testBot()
	tests := []struct {
		fixture, kind, pane string
		ok                  bool
	}{
		{"thread_started_event_body", kindAssistant, "C222", true},
		{"thread_context_changed_event_body", kindPaneMoved, "C333", true},
		{"user_message_event_body", kindDM, "", true},
		{"user_message_event_body_with_assistant_thread", kindDM, "", true},
		{"message_changed_event_body", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			m, _, ok, err := b.decodeEvent(fx[tt.fixture])
			if err != nil || ok != tt.ok {
				t.Fatalf("decodeEvent = %+v, ok %v, %v; want ok %v", m, ok, err, tt.ok)
			}
			if !ok {
				return
			}
			if m.Kind != tt.kind || m.Channel != "D111" || m.ThreadTS != "1726133698.626339" {
				t.Errorf("decoded %+v, want kind %s in D111 thread 1726133698.626339", m, tt.kind)
			}
			got := ""
			if m.Pane != nil {
				got = m.Pane.ChannelID
				if m.Pane.EventTS != "1726133698.665188" || m.Pane.TeamID != "T111" || m.Pane.EnterpriseID != "E111" {
					t.Errorf("pane = %+v", *m.Pane)
				}
			}
			if got != tt.pane {
				t.Errorf("pane channel = %q, want %q", got, tt.pane)
			}
		})
	}
}

// subscribedEventSamples is one payload per event subscription the
// manifest may list: a subscription without a sample here, or whose sample
// the bot drops, fails TestEverySubscribedEventIsHandled.
func subscribedEventSamples(t *testing.T) map[string]json.RawMessage {
	fx := assistantFixtures(t)
	cb := func(ev string) json.RawMessage {
		return json.RawMessage(`{"type":"event_callback","team_id":"T1","event_id":"Ev1","event":` + ev + `}`)
	}
	return map[string]json.RawMessage{
		"app_mention":                      cb(`{"type":"app_mention","user":"U2","text":"<@U0BOT> hi","ts":"1.1","channel":"C1"}`),
		"message.channels":                 fx["channel_user_message_event_body"],
		"message.groups":                   cb(`{"type":"message","user":"U2","text":"more","ts":"2.2","thread_ts":"1.1","channel":"G1","channel_type":"group"}`),
		"message.im":                       fx["user_message_event_body"],
		"assistant_thread_started":         fx["thread_started_event_body"],
		"assistant_thread_context_changed": fx["thread_context_changed_event_body"],
		// Slack's documented example (slack-install-files.md §6).
		"app_home_opened": cb(`{"type":"app_home_opened","user":"U123ABC456","channel":"D123ABC456","event_ts":"1515449522000016","tab":"home","view":{"id":"V123","type":"home","hash":"1231232323.12321312"}}`),
		// Slack's documented examples (slack-agents-2026.md §1, §2).
		"app_context_changed":         cb(`{"type":"app_context_changed","user":"U123","channel":"D123","event_ts":"1783536990.000200","context":{"entities":[{"type":"slack#/types/channel_id","value":"C01234ABDCE","team_id":"T0ABCDE6543"}]}}`),
		"agent_session_stopped":       cb(`{"type":"agent_session_stopped","channel":"C0123ABC456","thread_ts":"1782234671.392669","user":"U123ABC456","streaming_message_ts":["1782234987.693923"],"event_ts":"1783536983.783769"}`),
		"agent_session_title_changed": cb(`{"type":"agent_session_title_changed","channel":"C123ABC456","thread_ts":"1782234671.392669","user":"U123ABC456","title":"Bora Bora trip prep","previous_title":"Scuba diving research","team_id":"T123ABC456","event_ts":"1783536983.783769"}`),
	}
}

// TestEverySubscribedEventIsHandled: each event manifest.yaml subscribes
// to is decoded into something the bot acts on.
func TestEverySubscribedEventIsHandled(t *testing.T) {
	samples := subscribedEventSamples(t)
	b := testBot()
	for _, e := range readManifest(t).Settings.EventSubscriptions.BotEvents {
		raw, ok := samples[e]
		if !ok {
			t.Errorf("manifest.yaml subscribes to %s, which has no sample here: handle it and add one, or unsubscribe", e)
			continue
		}
		var cb eventCallback
		_ = json.Unmarshal(raw, &cb)
		if _, _, agent := agentEventOf(cb); agent {
			continue // agentview.go
		}
		if _, _, ok, err := b.decodeEvent(raw); err != nil || !ok {
			t.Errorf("the bot drops the %s event (ok=%v, err=%v): handle it or unsubscribe", e, ok, err)
		}
	}
}

// TestSuggestedPromptsMatchManifest: the pane offers the same prompts
// whether Slack shows the manifest's or the bot sets its own, and none asks
// for something the bot cannot do (it reads no channel history or files).
func TestSuggestedPromptsMatchManifest(t *testing.T) {
	raw, err := os.ReadFile("../manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Features struct {
			AgentView struct {
				Prompts []struct{ Title, Message string } `yaml:"suggested_prompts"`
			} `yaml:"agent_view"`
		}
	}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var code []struct{ Title, Message string }
	for _, p := range suggestedPrompts {
		code = append(code, struct{ Title, Message string }{p.Title, p.Message})
		low := strings.ToLower(p.Title + " " + p.Message)
		for _, cannot := range []string{"summar", "channel", "history", "file", "catch me up"} {
			if strings.Contains(low, cannot) {
				t.Errorf("suggested prompt %q asks for %q, which the bot cannot do", p.Title, cannot)
			}
		}
	}
	if diff := cmp.Diff(code, m.Features.AgentView.Prompts); diff != "" {
		t.Errorf("manifest.yaml's suggested prompts differ from the bot's (-bot +manifest):\n%s", diff)
	}
	if len(code) == 0 || len(code) > 4 {
		t.Errorf("%d suggested prompts; Slack shows 1 to 4", len(code))
	}
}
