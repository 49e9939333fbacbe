package slackemu_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

func modal(title string) slack.ModalViewRequest {
	return slack.ModalViewRequest{
		Type:       slack.VTModal,
		Title:      slack.NewTextBlockObject(slack.PlainTextType, title, false, false),
		CallbackID: "mcp_add",
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewInputBlock("url_block", slack.NewTextBlockObject(slack.PlainTextType, "URL", false, false), nil,
				slack.NewPlainTextInputBlockElement(nil, "url")),
		}},
	}
}

func TestViewsWithSlackGo(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)
	trig := emu.NewTrigger(slackemu.TeamID, slackemu.UserAdmin)

	v, err := api.OpenView(trig, modal("Add server"))
	if err != nil {
		t.Fatalf("OpenView: %v", err)
	}
	if v.ID == "" || v.Hash == "" || v.CallbackID != "mcp_add" || v.RootViewID != v.ID {
		t.Errorf("view = %+v", v.View)
	}
	if _, err := api.OpenView(trig, modal("again")); err == nil || err.Error() != "exchanged_trigger_id" {
		t.Errorf("reused trigger: %v, want exchanged_trigger_id", err)
	}
	old := emu.NewTrigger(slackemu.TeamID, slackemu.UserAdmin)
	emu.ExpireTrigger(old)
	if _, err := api.OpenView(old, modal("late")); err == nil || err.Error() != "expired_trigger_id" {
		t.Errorf("expired trigger: %v, want expired_trigger_id", err)
	}
	if _, err := api.OpenView("1.2.nope", modal("x")); err == nil || err.Error() != "invalid_trigger_id" {
		t.Errorf("unknown trigger: %v, want invalid_trigger_id", err)
	}

	for i := range 3 {
		_, err := api.PushView(emu.NewTrigger(slackemu.TeamID, slackemu.UserAdmin), modal("pushed"))
		want := ""
		if i == 2 {
			want = "push_limit_reached"
		}
		if got := errString(err); got != want {
			t.Errorf("push %d: %q, want %q", i, got, want)
		}
	}
	if got := len(emu.Views(slackemu.TeamID, slackemu.UserAdmin)); got != 3 {
		t.Errorf("stack size %d, want 3", got)
	}

	if _, err := api.UpdateView(modal("stale"), "", "1.stale", v.ID); errString(err) != "hash_conflict" {
		t.Errorf("update with stale hash: %v, want hash_conflict", err)
	}
	u, err := api.UpdateView(modal("Renamed"), "", v.Hash, v.ID)
	if err != nil || u.Hash == v.Hash || u.Title.Text != "Renamed" {
		t.Errorf("UpdateView = %+v, %v", u, err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestClickAndResponseURL(t *testing.T) {
	emu := newEmu(t, timeoutOpts())
	api := botClient(emu)
	c := startSocket(t, emu, false)
	c.next(t, socketmode.EventTypeHello)

	parent := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "run it", "")
	c.ack(t, c.next(t, socketmode.EventTypeEventsAPI).Request.EnvelopeID, nil)
	btn := slack.NewButtonBlockElement("perm_allow", "req-42", slack.NewTextBlockObject(slack.PlainTextType, "Allow", false, false))
	_, ts, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionTS(parent.TS), slack.MsgOptionText("Allow github.search?", false),
		slack.MsgOptionBlocks(slack.NewActionBlock("perm:req-42", btn)))
	if err != nil {
		t.Fatal(err)
	}

	in, err := emu.Click(slackemu.TeamID, slackemu.UserAlice, slackemu.ChannelGen, ts, "perm_allow", "")
	if err != nil {
		t.Fatal(err)
	}
	ev := c.next(t, socketmode.EventTypeInteractive)
	cb := ev.Data.(slack.InteractionCallback)
	if cb.Type != slack.InteractionTypeBlockActions || cb.User.ID != slackemu.UserAlice || cb.Container.MessageTs != ts ||
		len(cb.ActionCallback.BlockActions) != 1 || cb.ActionCallback.BlockActions[0].Value != "req-42" ||
		cb.ActionCallback.BlockActions[0].BlockID != "perm:req-42" || cb.Message.ThreadTimestamp != parent.TS || cb.ResponseURL != in.ResponseURL {
		t.Errorf("block_actions = %+v", cb)
	}
	c.ack(t, ev.Request.EnvelopeID, nil)

	// The response_url replaces the original message, five uses at most.
	if _, _, err := api.PostMessage("", slack.MsgOptionReplaceOriginal(cb.ResponseURL), slack.MsgOptionText("Allowed by alice", false)); err != nil {
		t.Fatalf("response_url replace: %v", err)
	}
	m, _ := emu.MessageAt(slackemu.ChannelGen, ts)
	if m.Text != "Allowed by alice" || len(m.History) != 2 {
		t.Errorf("after replace_original: %+v", m)
	}
	for i := range 5 {
		_, _, err := api.PostMessage("", slack.MsgOptionResponseURL(cb.ResponseURL, slack.ResponseTypeEphemeral), slack.MsgOptionText("note", false))
		want := ""
		if i == 4 {
			want = "used_url"
		}
		if got := errString(err); got != want {
			t.Errorf("response_url use %d: %q, want %q", i+2, got, want)
		}
	}
	if got := len(emu.Ephemerals(slackemu.UserAlice)); got != 4 {
		t.Errorf("ephemerals %d, want 4", got)
	}

	if _, err := emu.Click(slackemu.TeamID, slackemu.UserAlice, slackemu.ChannelGen, ts, "nope", ""); err == nil {
		t.Error("click on a missing action_id: no error")
	}
	// Forged click: any action, no message needed; an unacked one is a user-visible failure.
	forged := emu.ClickRaw(slackemu.TeamID, slackemu.UserBob, slackemu.ChannelGen, ts, map[string]any{"type": "button", "action_id": "perm_allow", "block_id": "perm:x", "value": "forged"})
	c.next(t, socketmode.EventTypeInteractive)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := forged.Wait(ctx); err == nil {
		t.Error("unacked click: no failure")
	}
}

func TestSubmitViewAckActions(t *testing.T) {
	emu := newEmu(t, fastOpts())
	api := botClient(emu)
	c := startSocket(t, emu, false)
	c.next(t, socketmode.EventTypeHello)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	v, err := api.OpenView(emu.NewTrigger(slackemu.TeamID, slackemu.UserAdmin), modal("Add server"))
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]map[string]string{"url_block": {"url": "http://10.0.0.1/mcp"}}

	in, err := emu.SubmitView(slackemu.TeamID, slackemu.UserAdmin, v.ID, values)
	if err != nil {
		t.Fatal(err)
	}
	ev := c.next(t, socketmode.EventTypeInteractive)
	cb := ev.Data.(slack.InteractionCallback)
	if cb.Type != slack.InteractionTypeViewSubmission || !ev.Request.AcceptsResponsePayload ||
		cb.View.State.Values["url_block"]["url"].Value != "http://10.0.0.1/mcp" || cb.View.CallbackID != "mcp_add" {
		t.Errorf("view_submission = %+v", cb.View)
	}
	c.ack(t, ev.Request.EnvelopeID, slack.NewErrorsViewSubmissionResponse(map[string]string{"url_block": "private address"}))
	res, err := in.Wait(ctx)
	if err != nil || res.ResponseAction != "errors" || res.Errors["url_block"] != "private address" {
		t.Fatalf("Wait = %+v, %v", res, err)
	}
	if vs := emu.Views(slackemu.TeamID, slackemu.UserAdmin); len(vs) != 1 || vs[0].Errors["url_block"] != "private address" {
		t.Errorf("after errors: stack %+v, want the view with its field error", vs)
	}

	in2, _ := emu.SubmitView(slackemu.TeamID, slackemu.UserAdmin, v.ID, values)
	ev2 := c.next(t, socketmode.EventTypeInteractive)
	c.ack(t, ev2.Request.EnvelopeID, nil)
	if _, err := in2.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(emu.Views(slackemu.TeamID, slackemu.UserAdmin)); got != 0 {
		t.Errorf("after empty ack: stack %d, want 0 (closed)", got)
	}
}

func TestAssistantThreadAndEcho(t *testing.T) {
	opts := fastOpts()
	opts.EchoBotMessages = true
	emu := newEmu(t, opts)
	api := botClient(emu)
	c := startSocket(t, emu, true)
	c.next(t, socketmode.EventTypeHello)

	p := emu.AssistantThreadStarted(slackemu.TeamID, slackemu.UserAlice, slackemu.DMAlice, slackemu.ChannelGen)
	ev := c.next(t, socketmode.EventTypeEventsAPI)
	var payload map[string]any
	if err := json.Unmarshal(ev.Request.Payload, &payload); err != nil {
		t.Fatal(err)
	}
	inner := payload["event"].(map[string]any)
	at := inner["assistant_thread"].(map[string]any)
	if inner["type"] != "assistant_thread_started" || at["thread_ts"] != p.TS || at["channel_id"] != slackemu.DMAlice || at["user_id"] != slackemu.UserAlice {
		t.Errorf("assistant_thread_started = %v", inner)
	}
	follow := emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "and staging?", p.TS)
	if follow.EventID == "" {
		t.Fatal("no message event for a DM follow-up")
	}
	ev = c.next(t, socketmode.EventTypeEventsAPI)
	_ = json.Unmarshal(ev.Request.Payload, &payload)
	inner = payload["event"].(map[string]any)
	if inner["channel_type"] != "im" || inner["thread_ts"] != p.TS {
		t.Errorf("follow-up = %v", inner)
	}

	// Bot posts echo back with bot_id; edits as message_changed.
	_, ts, _ := api.PostMessage(slackemu.DMAlice, slack.MsgOptionTS(p.TS), slack.MsgOptionText("answer", false))
	_, _, _, _ = api.UpdateMessage(slackemu.DMAlice, ts, slack.MsgOptionText("answer!", false))
	var kinds []string
	for range 2 {
		ev = c.next(t, socketmode.EventTypeEventsAPI)
		_ = json.Unmarshal(ev.Request.Payload, &payload)
		inner = payload["event"].(map[string]any)
		kinds = append(kinds, str(inner["bot_id"])+"/"+str(inner["subtype"]))
	}
	if diff := cmp.Diff([]string{slackemu.BotID + "/", "/message_changed"}, kinds); diff != "" {
		t.Errorf("echo kinds (-want +got):\n%s", diff)
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// TestFramesCarrySlackFields compares the emulator's frames with real
// frames recorded by Slack's SDK maintainers: every field of the real
// frame must be present in ours.
func TestFramesCarrySlackFields(t *testing.T) {
	lines := readLines(t, "testdata/socket-mode-frames.jsonl")
	real := map[string]map[string]any{}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		key := str(m["type"])
		if p, ok := m["payload"].(map[string]any); ok {
			if ev, ok := p["event"].(map[string]any); ok {
				key += "/" + str(ev["type"])
			} else if pt := str(p["type"]); pt != "" {
				key += "/" + pt
			}
		}
		real[key] = m
	}

	emu := newEmu(t, fastOpts())
	ws := dialRaw(t, emu)
	ours := map[string]map[string]any{"hello": readFrame(t, ws)}
	emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "hi", "")
	ours["events_api/app_mention"] = readFrame(t, ws)
	emu.Message(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "hi", "")
	ours["events_api/message"] = readFrame(t, ws)
	emu.SlashCommand(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "/bobbin", "")
	ours["slash_commands"] = readFrame(t, ws)

	for key, want := range real {
		got, ok := ours[key]
		if !ok {
			continue // shortcut, modal block_actions, disconnect: covered elsewhere
		}
		if missing := missingKeys(want, got, ""); len(missing) > 0 {
			t.Errorf("%s: fields missing from the emulator's frame: %v", key, missing)
		}
	}

	// Interactive payloads against bolt-python's recorded bodies.
	for _, tc := range []struct{ file, kind string }{
		{"testdata/interactive-block-actions.json", "block_actions"},
		{"testdata/interactive-view-submission.json", "view_submission"},
	} {
		var want map[string]any
		readJSON(t, tc.file, &want)
		var got map[string]any
		switch tc.kind {
		case "block_actions":
			api := botClient(emu)
			btn := slack.NewButtonBlockElement("a", "click_me_123", slack.NewTextBlockObject(slack.PlainTextType, "Button", false, false))
			_, ts, _ := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("x", false), slack.MsgOptionBlocks(slack.NewActionBlock("b", btn)))
			if _, err := emu.Click(slackemu.TeamID, slackemu.UserAlice, slackemu.ChannelGen, ts, "a", ""); err != nil {
				t.Fatal(err)
			}
		case "view_submission":
			api := botClient(emu)
			v, err := api.OpenView(emu.NewTrigger(slackemu.TeamID, slackemu.UserAlice), modal("m"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := emu.SubmitView(slackemu.TeamID, slackemu.UserAlice, v.ID, map[string]map[string]string{"url_block": {"url": "x"}}); err != nil {
				t.Fatal(err)
			}
		}
		got = readFrame(t, ws)["payload"].(map[string]any)
		// Enterprise fields are not emulated; view blocks, buttons and
		// input block ids are the test modal's own.
		ignore := []string{"team.enterprise_", "view.blocks.", "view.close", "view.submit", "view.state.values."}
		for _, m := range missingKeys(want, got, "") {
			if !slices.ContainsFunc(ignore, func(p string) bool { return strings.Contains(m, p) }) {
				t.Errorf("%s: field %s missing", tc.kind, m)
			}
		}
	}
}

// missingKeys lists dotted paths of object keys in want that got lacks.
func missingKeys(want, got map[string]any, prefix string) []string {
	var out []string
	for k, wv := range want {
		gv, ok := got[k]
		if !ok {
			out = append(out, prefix+k)
			continue
		}
		switch w := wv.(type) {
		case map[string]any:
			if g, ok := gv.(map[string]any); ok {
				out = append(out, missingKeys(w, g, prefix+k+".")...)
			}
		case []any:
			if g, ok := gv.([]any); ok && len(w) > 0 && len(g) > 0 {
				wm, ok1 := w[0].(map[string]any)
				gm, ok2 := g[0].(map[string]any)
				if ok1 && ok2 {
					out = append(out, missingKeys(wm, gm, prefix+k+".")...)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func TestResponseURLModes(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)
	btn := slack.NewButtonBlockElement("go", "v", slack.NewTextBlockObject(slack.PlainTextType, "Go", false, false))
	blocks := slack.MsgOptionBlocks(slack.NewActionBlock("b", btn))

	tests := []struct {
		name      string
		ephemeral bool
		opts      []slack.MsgOption
		check     func(t *testing.T, ts string)
	}{
		{"delete_original", false, []slack.MsgOption{slack.MsgOptionDeleteOriginal("")}, func(t *testing.T, ts string) {
			if m, _ := emu.MessageAt(slackemu.ChannelGen, ts); !m.Deleted {
				t.Errorf("message not deleted: %+v", m)
			}
		}},
		{"in_channel", false, []slack.MsgOption{slack.MsgOptionResponseURL("", slack.ResponseTypeInChannel), slack.MsgOptionText("for all", false)}, func(t *testing.T, ts string) {
			msgs := emu.Messages(slackemu.ChannelGen)
			if last := msgs[len(msgs)-1]; last.Text != "for all" || !last.IsBot() || last.Via != "response_url" {
				t.Errorf("last message = %+v", last)
			}
		}},
		{"replace ephemeral", true, []slack.MsgOption{slack.MsgOptionReplaceOriginal(""), slack.MsgOptionText("done", false)}, func(t *testing.T, ts string) {
			e := emu.Ephemerals(slackemu.UserBob)
			if len(e) != 1 || e[0].Text != "done" || !e[0].Replaced {
				t.Errorf("ephemerals = %+v", e)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ts string
			var err error
			if tc.ephemeral {
				ts, err = api.PostEphemeral(slackemu.ChannelGen, slackemu.UserBob, slack.MsgOptionText("choose", false), blocks)
			} else {
				_, ts, err = api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("choose", false), blocks)
			}
			if err != nil {
				t.Fatal(err)
			}
			in, err := emu.Click(slackemu.TeamID, slackemu.UserBob, slackemu.ChannelGen, ts, "go", "")
			if err != nil {
				t.Fatal(err)
			}
			// The option's URL argument is replaced by the click's response_url.
			opts := append([]slack.MsgOption{}, tc.opts...)
			opts = append(opts, slack.UnsafeMsgOptionEndpoint(in.ResponseURL, func(url.Values) {}))
			if _, _, err := api.PostMessage("", opts...); err != nil {
				t.Fatalf("response_url: %v", err)
			}
			tc.check(t, ts)
		})
	}
}
