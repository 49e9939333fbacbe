package mcp

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/agent/access"
)

// TestScopeCheck is the evaluation table: channel, DM, users, user
// groups, guests, external and unverified people, merged turns.
func TestScopeCheck(t *testing.T) {
	yes, no := true, false
	alice := Person{ID: "UALICE"}
	bob := Person{ID: "UBOB"}
	oncallMember := Person{ID: "UONCALL"}
	guest := Person{ID: "UGUEST", Guest: true}
	stranger := Person{ID: "USTRANGE", External: true}
	unknown := Person{ID: "UUNKNOWN", Unverified: true}
	groups := map[string][]string{"SONCALL": {"UONCALL", "UGUEST"}, "SEMPTY": {}}
	members := func(_ context.Context, g string) ([]string, error) {
		if g == "SBROKEN" {
			return nil, errors.New("ratelimited")
		}
		return groups[g], nil
	}
	in := func(ch string, people ...Person) Access {
		return Access{Team: "T1", Channel: ch, People: people, Members: members}
	}
	dm := func(people ...Person) Access {
		return Access{Team: "T1", Channel: "D1", DM: true, People: people, Members: members}
	}
	ok := Verdict{OK: true}
	cases := []struct {
		name  string
		scope Scope
		a     Access
		want  Verdict
	}{
		{"unscoped member in a channel", Scope{}, in("C1", alice), ok},
		{"unscoped member in a DM", Scope{}, dm(alice), ok},
		{"unscoped, nobody known", Scope{}, Access{Team: "T1"}, ok},
		{"unscoped guest", Scope{}, in("C1", guest), Verdict{Reason: access.ScopeGuest, Person: "UGUEST"}},
		{"unscoped external", Scope{}, in("C1", stranger), Verdict{Reason: access.ScopeExternal, Person: "USTRANGE"}},
		{"unscoped unverified", Scope{}, dm(unknown), Verdict{Reason: access.ScopeUnverified, Person: "UUNKNOWN"}},
		{"guests: true lets a guest in", Scope{Guests: true}, in("C1", guest), ok},
		{"guests: true lets an external person in", Scope{Guests: true}, in("C1", stranger), ok},

		{"listed channel", Scope{Channels: []string{"C1"}}, in("C1", alice), ok},
		{"other channel", Scope{Channels: []string{"C1"}}, in("C2", alice), Verdict{Reason: access.ScopeChannel}},
		{"no channel known", Scope{Channels: []string{"C1"}}, Access{Team: "T1", People: []Person{alice}}, Verdict{Reason: access.ScopeChannel}},
		{"channels listed: no DMs by default", Scope{Channels: []string{"C1"}}, dm(alice), Verdict{Reason: access.ScopeDM}},
		{"channels listed, dm: true", Scope{Channels: []string{"C1"}, DM: &yes}, dm(alice), ok},
		{"dm: false without channels", Scope{DM: &no}, dm(alice), Verdict{Reason: access.ScopeDM}},
		{"dm: false, in a channel", Scope{DM: &no}, in("C9", alice), ok},
		{"any place: a channel-scoped server for a member", Scope{Channels: []string{"C1"}, DM: &no}, Access{Team: "T1", AnyPlace: true, People: []Person{alice}}, ok},
		{"any place: the people still count", Scope{Channels: []string{"C1"}, Users: []string{"UALICE"}}, Access{Team: "T1", AnyPlace: true, People: []Person{bob}}, Verdict{Reason: access.ScopePerson, Person: "UBOB"}},
		{"any place: guests still need guests", Scope{Channels: []string{"C1"}}, Access{Team: "T1", AnyPlace: true, People: []Person{guest}}, Verdict{Reason: access.ScopeGuest, Person: "UGUEST"}},
		{"a DM id in Channel is still a DM", Scope{Channels: []string{"C1"}}, Access{Team: "T1", Channel: "C1", DM: true, People: []Person{alice}}, Verdict{Reason: access.ScopeDM}},

		{"listed user", Scope{Users: []string{"UALICE"}}, in("C1", alice), ok},
		{"unlisted user", Scope{Users: []string{"UALICE"}}, in("C1", bob), Verdict{Reason: access.ScopePerson, Person: "UBOB"}},
		{"users listed, nobody known", Scope{Users: []string{"UALICE"}}, in("C1"), Verdict{Reason: access.ScopePerson}},
		{"group member", Scope{Usergroups: []string{"SONCALL"}}, in("C1", oncallMember), ok},
		{"not a group member", Scope{Usergroups: []string{"SONCALL"}}, in("C1", bob), Verdict{Reason: access.ScopePerson, Person: "UBOB"}},
		{"empty group", Scope{Usergroups: []string{"SEMPTY"}}, in("C1", alice), Verdict{Reason: access.ScopePerson, Person: "UALICE"}},
		{"group unresolvable: nobody is in it", Scope{Usergroups: []string{"SBROKEN"}}, in("C1", alice), Verdict{Reason: access.ScopePerson, Person: "UALICE"}},
		{"no resolver: groups grant nothing", Scope{Usergroups: []string{"SONCALL"}}, Access{Team: "T1", Channel: "C1", People: []Person{oncallMember}}, Verdict{Reason: access.ScopePerson, Person: "UONCALL"}},
		{"listed user or group member", Scope{Users: []string{"UALICE"}, Usergroups: []string{"SONCALL"}}, in("C1", alice, oncallMember), ok},
		{"guest in the group still needs guests", Scope{Usergroups: []string{"SONCALL"}}, in("C1", guest), Verdict{Reason: access.ScopeGuest, Person: "UGUEST"}},
		{"guest in the group with guests", Scope{Usergroups: []string{"SONCALL"}, Guests: true}, in("C1", guest), ok},
		{"listed guest needs guests", Scope{Users: []string{"UGUEST"}}, in("C1", guest), Verdict{Reason: access.ScopeGuest, Person: "UGUEST"}},
		{"guests: true does not skip the lists", Scope{Users: []string{"UALICE"}, Guests: true}, in("C1", stranger), Verdict{Reason: access.ScopePerson, Person: "USTRANGE"}},

		{"channel AND person: both fine", Scope{Channels: []string{"C1"}, Users: []string{"UALICE"}}, in("C1", alice), ok},
		{"channel AND person: wrong channel", Scope{Channels: []string{"C1"}, Users: []string{"UALICE"}}, in("C2", alice), Verdict{Reason: access.ScopeChannel}},
		{"channel AND person: wrong person", Scope{Channels: []string{"C1"}, Users: []string{"UALICE"}}, in("C1", bob), Verdict{Reason: access.ScopePerson, Person: "UBOB"}},

		{"merged turn, all allowed", Scope{Users: []string{"UALICE"}, Usergroups: []string{"SONCALL"}}, in("C1", alice, oncallMember), ok},
		{"merged turn, one not allowed", Scope{Users: []string{"UALICE"}}, in("C1", alice, bob), Verdict{Reason: access.ScopePerson, Person: "UBOB"}},
		{"merged turn with a guest, unscoped", Scope{}, in("C1", alice, guest), Verdict{Reason: access.ScopeGuest, Person: "UGUEST"}},
		{"merged turn with an external person, DM allowed", Scope{}, dm(alice, stranger), Verdict{Reason: access.ScopeExternal, Person: "USTRANGE"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.scope.Check(context.Background(), tc.a); got != tc.want {
				t.Errorf("Check(%+v) for %+v = %+v, want %+v", tc.a, tc.scope, got, tc.want)
			}
		})
	}
}

// TestScopeCheckResolvesEachGroupOnce: a merged turn of several people
// asks for a group's members once.
func TestScopeCheckResolvesEachGroupOnce(t *testing.T) {
	var asked atomic.Int32
	a := Access{Team: "T1", Channel: "C1", People: []Person{{ID: "U1"}, {ID: "U2"}, {ID: "U3"}},
		Members: func(context.Context, string) ([]string, error) { asked.Add(1); return []string{"U1", "U2", "U3"}, nil }}
	if v := (Scope{Usergroups: []string{"S1"}}).Check(context.Background(), a); !v.OK {
		t.Fatalf("Check = %+v", v)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("members asked %d times, want 1", n)
	}
}

func TestScopeConfig(t *testing.T) {
	good := `servers:
  - name: db
    command: [db-mcp]
    channels: [C0ONCALL, G0PRIV]
    users: [U0ALICE, W0GRID]
    usergroups: [S0ONCALL]
    guests: true
    dm: false
  - name: open
    url: https://open.example.com/mcp
`
	cfg, err := parseConfig("mcp.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	db := cfg.Servers[0].Scope
	if !slices.Equal(db.Channels, []string{"C0ONCALL", "G0PRIV"}) || !slices.Equal(db.Users, []string{"U0ALICE", "W0GRID"}) ||
		!slices.Equal(db.Usergroups, []string{"S0ONCALL"}) || !db.Guests || db.DM == nil || *db.DM || db.DMAllowed() {
		t.Errorf("scope = %+v", db)
	}
	if open := cfg.Servers[1].Scope; !open.IsZero() || !open.DMAllowed() {
		t.Errorf("unscoped server's scope = %+v", open)
	}

	bad := `servers:
  - name: db
    command: [db-mcp]
    channels: [D0ALICE, general]
    users: [alice]
    usergroups: ["@oncall"]
    dm: maybe
`
	_, err = parseConfig("mcp.yaml", []byte(bad))
	if err == nil {
		t.Fatal("bad scope accepted")
	}
	for _, want := range []string{
		`servers[0] (db): channels: "D0ALICE" is a direct message, not a channel: use dm instead`,
		`servers[0] (db): channels: "general" is not a channel id`,
		`servers[0] (db): users: "alice" is not a user id`,
		`servers[0] (db): usergroups: "@oncall" is not a user group id`,
		`line 7: expected true or false, got a string`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestScopedTools: tools of a server out of scope are not offered (and
// the server is not contacted); a call of a tool offered earlier is
// refused once the scope no longer allows it, without a reconnect.
func TestScopedTools(t *testing.T) {
	port := startModernHTTP(t)
	m := newTestManager(t, nil, func(o *Options) { o.AllowPrivateNetworks = true; o.RegistrationTTL = time.Nanosecond })
	ctx := context.Background()
	url := "http://modern.test:" + port + "/"
	m.regs.set("T1",
		Registered{Name: "open", URL: url},
		Registered{Name: "oncall", URL: url, Scope: Scope{Channels: []string{"C1"}, Usergroups: []string{"S1"}}},
	)
	members := []string{"UALICE"}
	accessAt := func(ch string, user string) Access {
		return Access{Team: "T1", Channel: ch, People: []Person{{ID: user}},
			Members: func(context.Context, string) ([]string, error) { return members, nil }}
	}
	names := func(a Access) []string {
		t.Helper()
		tools, err := m.ToolsFor(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		return toolNames(tools)
	}
	if got := names(accessAt("C2", "UALICE")); slices.Contains(got, "oncall__echo") || !slices.Contains(got, "open__echo") {
		t.Errorf("in another channel: %v", got)
	}
	if got := names(accessAt("C1", "UBOB")); slices.Contains(got, "oncall__echo") {
		t.Errorf("for a non-member: %v", got)
	}
	if c := mountOf(m.Manager, "T1", "oncall").liveConnection(); c != nil {
		t.Error("a server nobody in scope asked for was contacted")
	}
	tools, err := m.ToolsFor(ctx, accessAt("C1", "UALICE"))
	if err != nil {
		t.Fatal(err)
	}
	echo := toolByName(t, tools, "oncall__echo")
	mt := mountOf(m.Manager, "T1", "oncall")
	if got, err := call(t, echo, `{"message":"hi"}`); err != nil || got != "hi" {
		t.Fatalf("in scope: %q, %v", got, err)
	}

	// StatusAt says where the server is offered.
	for _, st := range m.StatusAt(ctx, accessAt("C2", "UALICE")) {
		switch {
		case st.Here == nil:
			t.Errorf("%s: no verdict", st.Name)
		case st.Name == "oncall" && (st.Here.OK || st.Here.Reason != access.ScopeChannel || !slices.Equal(st.Scope.Usergroups, []string{"S1"})):
			t.Errorf("oncall status = %+v, verdict %+v", st, *st.Here)
		case st.Name == "open" && !st.Here.OK:
			t.Errorf("open verdict %+v", *st.Here)
		}
	}

	// Another replica narrows the scope: the bound tool is refused at
	// call time, and the mount keeps its connection.
	m.regs.set("T1",
		Registered{Name: "open", URL: url},
		Registered{Name: "oncall", URL: url, Scope: Scope{Channels: []string{"C1"}, Users: []string{"UCAROL"}}},
	)
	if _, err := call(t, echo, `{"message":"again"}`); err == nil || !strings.Contains(err.Error(), "not available here") {
		t.Fatalf("after narrowing: %v", err)
	}
	// A group membership change is seen through the resolver.
	m.regs.set("T1", Registered{Name: "oncall", URL: url, Scope: Scope{Usergroups: []string{"S1"}}})
	members = []string{"UBOB"}
	if got := names(accessAt("C1", "UALICE")); slices.Contains(got, "oncall__echo") {
		t.Errorf("after leaving the group: %v", got)
	}
	if got := names(accessAt("C1", "UBOB")); !slices.Contains(got, "oncall__echo") {
		t.Errorf("after joining the group: %v", got)
	}
	if now := mountOf(m.Manager, "T1", "oncall"); now != mt || now.liveConnection() == nil {
		t.Error("a scope change replaced the mount or dropped its connection")
	}

	// A malformed registered scope offers nothing.
	m.regs.set("T1", Registered{Name: "oncall", URL: url, Scope: Scope{Channels: []string{"#general"}}})
	if got := names(accessAt("C1", "UBOB")); slices.Contains(got, "oncall__echo") {
		t.Errorf("malformed scope offered: %v", got)
	}
	if !strings.Contains(m.logs.String(), "its scope is malformed") {
		t.Error("the malformed scope was not logged")
	}
}

// mountOf is the workspace's current mount of server, nil if none.
func mountOf(m *Manager, team, server string) *mount {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ws := m.teams[team]; ws != nil {
		return ws.mounts[server]
	}
	return nil
}

func (mt *mount) liveConnection() *conn {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	return mt.conn
}
