package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/bobbinbot/bobbin/session"
)

// TestDecodeEventPerInstallation: the bot's own messages and mention are
// those of the event's workspace: each installation has its bot user.
func TestDecodeEventPerInstallation(t *testing.T) {
	b := &Bot{botUserID: "U0PIN", botID: "B0PIN", teamID: "TPIN", opts: Options{BotToken: "xoxb-pinned"}}
	b.inst = newInstalls(nil, InstallOptions{})
	b.putInstall(session.Installation{TeamID: "TA", BotToken: "xoxb-a", BotUserID: "U0A", BotID: "B0A"})
	b.putInstall(session.Installation{EnterpriseID: "E1", OrgWide: true, BotToken: "xoxb-org", BotUserID: "W0ORG", BotID: "B0ORG"})
	b.inst.via["TORG"] = "E1"
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
	if b.client("TA") == b.client("TORG") || b.client("TA") == b.api || b.client("TORG") != b.client("E1") {
		t.Error("clients are not per installation")
	}
}

func TestInstallRefs(t *testing.T) {
	var cb eventCallback
	_ = json.Unmarshal([]byte(`{"type":"event_callback","team_id":"T1","enterprise_id":"E9",
		"authorizations":[{"enterprise_id":"E1","team_id":null,"user_id":"W1","is_bot":true,"is_enterprise_install":true}],"event":{}}`), &cb)
	if got := cb.installRef("T1"); got != (installRef{team: "T1", enterprise: "E1", org: true}) {
		t.Errorf("event ref = %+v", got)
	}
	if got := interactiveRef(json.RawMessage(`{"type":"block_actions","team":null,"user":{"id":"U1","team_id":"T2"},"enterprise":{"id":"E1"},"is_enterprise_install":true}`)); got != (installRef{team: "T2", enterprise: "E1", org: true}) {
		t.Errorf("interactive ref = %+v", got)
	}
	for _, raw := range []string{`{"team_id":"T3","enterprise_id":"E3","is_enterprise_install":"true"}`, `{"team_id":"T3","enterprise_id":"E3","is_enterprise_install":true}`} {
		if got := slashRef(json.RawMessage(raw)); got != (installRef{team: "T3", enterprise: "E3", org: true}) {
			t.Errorf("slash ref of %s = %+v", raw, got)
		}
	}
	if got := slashRef(json.RawMessage(`{"team_id":"T3","is_enterprise_install":"false"}`)); got.org {
		t.Errorf("slash ref = %+v", got)
	}
}

// BenchmarkInstallLookupCached is the per-call cost of finding a
// workspace's client and identity once this process holds its
// installation (every Web API call and every event pays it).
func BenchmarkInstallLookupCached(bm *testing.B) {
	b := &Bot{opts: Options{}}
	b.inst = newInstalls(nil, InstallOptions{})
	for i := range 1000 {
		b.putInstall(session.Installation{TeamID: fmt.Sprintf("T%04d", i), BotToken: fmt.Sprintf("xoxb-%d", i), BotUserID: "U0B", BotID: "B0"})
	}
	ctx := context.Background()
	ref := installRef{team: "T0500"}
	bm.ReportAllocs()
	for bm.Loop() {
		if ok, err := b.admitInstall(ctx, ref); !ok || err != nil {
			bm.Fatal(ok, err)
		}
		if _, e, _, err := b.pickClient(ctx, "T0500"); e == nil || err != nil {
			bm.Fatal(err)
		}
		_ = b.self("T0500")
	}
}
