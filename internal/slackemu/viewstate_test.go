package slackemu_test

import (
	"testing"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestSubmitViewInputs: the submission carries every input in its
// element's shape, entered values where given and what the element shows
// pre-filled elsewhere, decoded by slack-go as Slack's would be.
func TestSubmitViewInputs(t *testing.T) {
	emu := newEmu(t, fastOpts())
	api := botClient(emu)
	c := startSocket(t, emu, true)
	c.next(t, socketmode.EventTypeHello)
	pt := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
	}
	a, b := slack.NewOptionBlockObject("a", pt("A"), nil), slack.NewOptionBlockObject("b", pt("B"), nil)
	text := slack.NewPlainTextInputBlockElement(nil, "v")
	text.InitialValue = "pre"
	num := slack.NewNumberInputBlockElement(nil, "v", false)
	sel := slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, pt("x"), "v", a, b)
	sel.InitialOption = b
	multi := slack.NewOptionsMultiSelectBlockElement(slack.MultiOptTypeStatic, pt("x"), "v", a, b)
	multi.InitialOptions = []*slack.OptionBlockObject{a}
	date := slack.NewDatePickerBlockElement("v")
	date.InitialDate = "2026-01-02"
	box := slack.NewCheckboxGroupsBlockElement("v", a)
	m := slack.ModalViewRequest{Type: slack.VTModal, Title: pt("Form"), Submit: pt("Send"), CallbackID: "f", Blocks: slack.Blocks{BlockSet: []slack.Block{
		slack.NewInputBlock("text", pt("t"), nil, text), slack.NewInputBlock("num", pt("n"), nil, num),
		slack.NewInputBlock("sel", pt("s"), nil, sel), slack.NewInputBlock("multi", pt("m"), nil, multi),
		slack.NewInputBlock("date", pt("d"), nil, date), slack.NewInputBlock("box", pt("b"), nil, box),
	}}}
	v, err := api.OpenView(emu.NewTrigger(slackemu.TeamID, slackemu.UserAlice), m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := emu.SubmitViewInputs(slackemu.TeamID, slackemu.UserAlice, v.ID, map[string]any{"num": "7", "box": []string{"a"}, "multi": []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	ev := c.next(t, socketmode.EventTypeInteractive)
	st := ev.Data.(slack.InteractionCallback).View.State.Values
	got := []string{st["text"]["v"].Value, st["num"]["v"].Value, st["sel"]["v"].SelectedOption.Value,
		st["date"]["v"].SelectedDate, st["box"]["v"].SelectedOptions[0].Value, st["multi"]["v"].SelectedOptions[1].Value}
	want := []string{"pre", "7", "b", "2026-01-02", "a", "b"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("state %d = %q, want %q (all %v)", i, got[i], want[i], got)
		}
	}
	for _, bad := range []map[string]any{{"sel": "zz"}, {"nope": "x"}, {"multi": "a"}} {
		if _, err := emu.SubmitViewInputs(slackemu.TeamID, slackemu.UserAlice, v.ID, bad); err == nil {
			t.Errorf("SubmitViewInputs(%v) accepted", bad)
		}
	}
}
