package stream

import "testing"

func TestMaskedMentions(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"_Stopped by " + MaskUser("U0ALICE") + "._", "_Stopped by <@U0ALICE>._"},
		{"plain &lt;@U1&gt;", "plain &lt;@U1&gt;"},
		{maskOpen + "!channel" + maskClose, "!channel"}, // not a user id: no mention
		{"cut " + maskOpen + "U0ALI", "cut U0ALI"},      // truncated: mask dropped
		{MaskUser("W123") + " and " + MaskUser("U9"), "<@W123> and <@U9>"},
	} {
		if got := unmaskMentions(c.in); got != c.want {
			t.Errorf("unmaskMentions(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// The model cannot forge a mask.
	if got := unmaskMentions(stripMasks("hi " + MaskUser("U0BOB"))); got != "hi U0BOB" {
		t.Errorf("a masked mention in model text became %q", got)
	}
}
