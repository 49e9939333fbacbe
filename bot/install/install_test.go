package install

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/session"
)

// pinned is an Env whose SLACK_BOT_TOKEN serves team TPIN.
func pinned() (Env, *slack.Client) {
	api := slack.New("xoxb-pinned")
	return Env{Pinned: Pinned{API: api, Token: "xoxb-pinned", Workspace: func() (string, string) { return "TPIN", "" }}}, api
}

// TestSelfPerInstallation: the bot's identity and client are those of
// the workspace's installation (an org-wide one for the org's teams);
// the pinned token's workspace keeps the pinned ones.
func TestSelfPerInstallation(t *testing.T) {
	env, api := pinned()
	in := New(nil, Options{}, env)
	in.put(session.Installation{TeamID: "TA", BotToken: "xoxb-a", BotUserID: "U0A", BotID: "B0A"})
	in.put(session.Installation{EnterpriseID: "E1", OrgWide: true, BotToken: "xoxb-org", BotUserID: "W0ORG", BotID: "B0ORG"})
	in.via["TORG"] = "E1"
	for team, want := range map[string]Identity{"TA": {"U0A", "B0A"}, "TORG": {"W0ORG", "B0ORG"}} {
		if id, ok := in.Self(team); !ok || id != want {
			t.Errorf("Self(%s) = %+v, %v; want %+v", team, id, ok, want)
		}
	}
	for _, team := range []string{"TPIN", "TNONE"} {
		if id, ok := in.Self(team); ok {
			t.Errorf("Self(%s) = %+v, want the pinned identity", team, id)
		}
	}
	if in.client("TA") == in.client("TORG") || in.client("TA") == api || in.client("TORG") != in.client("E1") || in.client("TPIN") != api {
		t.Error("clients are not per installation")
	}
}

func TestInstallRefs(t *testing.T) {
	var cb struct {
		TeamID         string          `json:"team_id"`
		EnterpriseID   string          `json:"enterprise_id"`
		Authorizations []Authorization `json:"authorizations"`
	}
	_ = json.Unmarshal([]byte(`{"type":"event_callback","team_id":"T1","enterprise_id":"E9",
		"authorizations":[{"enterprise_id":"E1","team_id":null,"user_id":"W1","is_bot":true,"is_enterprise_install":true}],"event":{}}`), &cb)
	if got := EventRef("T1", cb.EnterpriseID, cb.Authorizations); got != (Ref{Team: "T1", Enterprise: "E1", Org: true}) {
		t.Errorf("event ref = %+v", got)
	}
	if got := EventRef("T1", "E9", nil); got != (Ref{Team: "T1", Enterprise: "E9"}) {
		t.Errorf("event ref without authorizations = %+v", got)
	}
	if got := InteractiveRef(json.RawMessage(`{"type":"block_actions","team":null,"user":{"id":"U1","team_id":"T2"},"enterprise":{"id":"E1"},"is_enterprise_install":true}`)); got != (Ref{Team: "T2", Enterprise: "E1", Org: true}) {
		t.Errorf("interactive ref = %+v", got)
	}
	for _, raw := range []string{`{"team_id":"T3","enterprise_id":"E3","is_enterprise_install":"true"}`, `{"team_id":"T3","enterprise_id":"E3","is_enterprise_install":true}`} {
		if got := SlashRef(json.RawMessage(raw)); got != (Ref{Team: "T3", Enterprise: "E3", Org: true}) {
			t.Errorf("slash ref of %s = %+v", raw, got)
		}
	}
	if got := SlashRef(json.RawMessage(`{"team_id":"T3","is_enterprise_install":"false"}`)); got.Org {
		t.Errorf("slash ref = %+v", got)
	}
}

// BenchmarkInstallLookupCached is the per-call cost of finding a
// workspace's client and identity once this process holds its
// installation (every Web API call and every event pays it).
func BenchmarkInstallLookupCached(bm *testing.B) {
	in := New(nil, Options{}, Env{})
	for i := range 1000 {
		in.put(session.Installation{TeamID: fmt.Sprintf("T%04d", i), BotToken: fmt.Sprintf("xoxb-%d", i), BotUserID: "U0B", BotID: "B0"})
	}
	ctx := context.Background()
	ref := Ref{Team: "T0500"}
	bm.ReportAllocs()
	for bm.Loop() {
		if ok, err := in.Admit(ctx, ref); !ok || err != nil {
			bm.Fatal(ok, err)
		}
		if _, e, _, err := in.pick(ctx, "T0500"); e == nil || err != nil {
			bm.Fatal(err)
		}
		_, _ = in.Self("T0500")
	}
}
