package bot

import (
	"encoding/json"
	"testing"

	"github.com/bobbinbot/bobbin/bot/install"
)

// selfOf is a workspaces whose installations are only identities (the
// lookup itself is tested in bot/install).
type selfOf struct {
	single
	ids map[string]install.Identity
}

func (s selfOf) Self(team string) (install.Identity, bool) {
	id, ok := s.ids[team]
	return id, ok
}

// TestDecodeEventPerInstallation: the bot's own messages and mention are
// those of the event's workspace: each installation has its bot user.
func TestDecodeEventPerInstallation(t *testing.T) {
	b := &Bot{botUserID: "U0PIN", botID: "B0PIN", teamID: "TPIN", opts: Options{BotToken: "xoxb-pinned"}}
	b.ws = selfOf{ids: map[string]install.Identity{"TA": {UserID: "U0A", BotID: "B0A"}, "TORG": {UserID: "W0ORG", BotID: "B0ORG"}}}
	cb := func(team, ev string) json.RawMessage {
		return json.RawMessage(`{"type":"event_callback","team_id":"` + team + `","event_id":"Ev1","event":` + ev + `}`)
	}
	for _, tt := range []struct {
		name, team, ev string
		ok             bool
		text           string
	}{
		{"mention of A's bot in A", "TA", `{"type":"app_mention","user":"U2","text":"<@U0A> hi","ts":"1.1","channel":"C1"}`, true, "hi"},
		{"A's bot's own message", "TA", `{"type":"message","user":"U0A","bot_id":"B0A","text":"mine","ts":"3.3","channel":"D1","channel_type":"im"}`, false, ""},
		{"the pinned bot in A is someone else", "TA", `{"type":"message","user":"U0PIN","text":"hello","ts":"3.3","channel":"D1","channel_type":"im"}`, true, "hello"},
		{"pinned team uses the pinned identity", "TPIN", `{"type":"app_mention","user":"U2","text":"<@U0PIN> yo","ts":"1.1","channel":"C1"}`, true, "yo"},
		{"pinned bot's own message", "TPIN", `{"type":"message","user":"U0PIN","bot_id":"B0PIN","text":"x","ts":"3.3","channel":"D1","channel_type":"im"}`, false, ""},
		{"org-wide bot in an org team", "TORG", `{"type":"app_mention","user":"U2","text":"<@W0ORG> org","ts":"1.1","channel":"C1"}`, true, "org"},
		{"org-wide bot's own message", "TORG", `{"type":"message","user":"W0ORG","bot_id":"B0ORG","text":"x","ts":"3.3","channel":"D1","channel_type":"im"}`, false, ""},
		{"reply mentioning A's bot comes as app_mention", "TA", `{"type":"message","user":"U2","text":"<@U0A> x","ts":"2.2","thread_ts":"1.1","channel":"C1"}`, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, _, ok, err := b.decodeEvent(cb(tt.team, tt.ev))
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.ok || (ok && m.Text != tt.text) {
				t.Errorf("decodeEvent = %+v ok=%v, want ok %v text %q", m, ok, tt.ok, tt.text)
			}
		})
	}
	if id := b.self("TA"); id.userID != "U0A" {
		t.Errorf("self(TA) = %+v", id)
	}
	if id := b.self("TPIN"); id.userID != "U0PIN" {
		t.Errorf("self(TPIN) = %+v", id)
	}
}
