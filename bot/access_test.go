package bot

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bobbinbot/bobbin/session"
)

// TestPeopleOfATurn: the people a batch answers are recorded in the
// session and read back by a resumed turn; a session from before has the
// requester alone.
func TestPeopleOfATurn(t *testing.T) {
	var meta session.Meta
	recordPeople(&meta, "T1", []inbound{
		{User: "U1", UserTeam: "T1"}, {User: "U2", UserTeam: "T9"}, {User: "U1"}, {User: ""},
	})
	if got := meta.Extra[extraPeople]; got != "U1,U2@T9" {
		t.Errorf("recorded %q", got)
	}
	got := peopleOf(meta, inbound{User: "U2"})
	if diff := cmp.Diff([]personRef{{user: "U1"}, {user: "U2", team: "T9"}}, got, cmp.AllowUnexported(personRef{})); diff != "" {
		t.Errorf("peopleOf (-want +got):\n%s", diff)
	}
	if got := peopleOf(session.Meta{}, inbound{User: "U7", UserTeam: "T8"}); len(got) != 1 || got[0] != (personRef{user: "U7", team: "T8"}) {
		t.Errorf("old session: %+v", got)
	}
}
