package slackemu_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// callRaw posts a form to a Web API method (for arguments slack-go does
// not send) and decodes the answer.
func callRaw(t *testing.T, emu *slackemu.Server, method, token string, form url.Values) map[string]any {
	t.Helper()
	form.Set("token", token)
	resp, err := http.PostForm(emu.APIURL()+method, form)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: decode: %v", method, err)
	}
	return out
}

func TestAgentSessionsWithSlackGo(t *testing.T) {
	emu := newEmu(t, slackemu.Options{NoRateLimits: true, NoAgentStopSubscription: true})
	api := botClient(emu)
	root := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "plan my trip", "")

	resp, err := api.SetAgentSessionStatus(slack.AgentSessionSetStatusParameters{
		Status: slack.AgentSessionStatusProcessing, ChannelID: slackemu.ChannelGen, ThreadTS: root.TS, Title: "Trip",
	})
	if err != nil {
		t.Fatalf("SetAgentSessionStatus: %v", err)
	}
	if resp.Status != "processing" || resp.AgentStatus != "processing" || resp.Title != "Trip" {
		t.Errorf("setStatus answer = %+v", resp)
	}
	if w := resp.ResponseMetadata.Warnings; resp.Warning != "missing_agent_session_stopped_event_subscription" || len(w) != 1 || w[0] != resp.Warning {
		t.Errorf("warning = %q, %v", resp.Warning, w)
	}
	// The title applies at creation only.
	for _, st := range []string{"suspended", "processing", "active"} {
		if _, err := api.SetAgentSessionStatus(slack.AgentSessionSetStatusParameters{Status: st, ChannelID: slackemu.ChannelGen, ThreadTS: root.TS, Title: "ignored"}); err != nil {
			t.Fatalf("SetAgentSessionStatus %s: %v", st, err)
		}
	}
	if r, err := api.RenameAgentSession(slack.AgentSessionRenameParameters{Title: "Trip to Bora Bora", ChannelID: slackemu.ChannelGen, ThreadTS: root.TS}); err != nil || r.Title != "Trip to Bora Bora" {
		t.Fatalf("RenameAgentSession: %+v, %v", r, err)
	}
	a, ok := emu.AgentSession(slackemu.ChannelGen, root.TS)
	if !ok || a.Title != "Trip to Bora Bora" || a.Initiator != slackemu.UserAlice || a.Status != "active" {
		t.Errorf("session = %+v", a)
	}
	if diff := cmp.Diff([]string{"processing", "suspended", "processing", "active"}, emu.SessionStatuses(slackemu.ChannelGen, root.TS)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Trip", "Trip to Bora Bora"}, a.Titles); diff != "" {
		t.Errorf("titles (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		p    slack.AgentSessionSetStatusParameters
		want string
	}{
		{slack.AgentSessionSetStatusParameters{Status: "busy", ChannelID: slackemu.ChannelGen, ThreadTS: root.TS}, "invalid_status"},
		{slack.AgentSessionSetStatusParameters{Status: "active", ChannelID: slackemu.ChannelGen}, "thread_ts_required"},
		{slack.AgentSessionSetStatusParameters{Status: "active", ChannelID: "CNOPE", ThreadTS: root.TS}, "channel_not_found"},
		{slack.AgentSessionSetStatusParameters{Status: "active", ChannelID: slackemu.ChannelRandom, ThreadTS: root.TS}, "not_authorized"},
		{slack.AgentSessionSetStatusParameters{Status: "active", ChannelID: slackemu.ChannelGen, ThreadTS: root.TS, InitiatorUserID: "UNOBODY"}, "user_not_found"},
	} {
		if _, err := api.SetAgentSessionStatus(tc.p); errString(err) != tc.want {
			t.Errorf("setStatus %+v: %v, want %s", tc.p, err, tc.want)
		}
	}
	if _, err := api.RenameAgentSession(slack.AgentSessionRenameParameters{Title: "x", ChannelID: slackemu.ChannelGen, ThreadTS: "1700000000.000001"}); errString(err) != "session_not_found" {
		t.Errorf("rename unknown: %v", err)
	}
	if _, err := api.RenameAgentSession(slack.AgentSessionRenameParameters{Title: strings.Repeat("x", 201), ChannelID: slackemu.ChannelGen, ThreadTS: root.TS}); errString(err) != "invalid_name" {
		t.Errorf("rename too long: %v", err)
	}

	// A workspace that refuses the methods (the degrade test).
	for _, code := range []string{"not_allowed", "unknown_method"} {
		emu.SetAgentSessionsRefused(slackemu.TeamID, code)
		if _, err := api.SetAgentSessionStatus(slack.AgentSessionSetStatusParameters{Status: "active", ChannelID: slackemu.ChannelGen, ThreadTS: root.TS}); errString(err) != code {
			t.Errorf("refused setStatus: %v, want %s", err, code)
		}
		if _, err := api.RenameAgentSession(slack.AgentSessionRenameParameters{Title: "y", ChannelID: slackemu.ChannelGen, ThreadTS: root.TS}); errString(err) != code {
			t.Errorf("refused rename: %v, want %s", err, code)
		}
	}
	emu.SetAgentSessionsRefused(slackemu.TeamID, "")
	if _, err := api.SetAgentSessionStatus(slack.AgentSessionSetStatusParameters{Status: "closed", ChannelID: slackemu.ChannelGen, ThreadTS: root.TS}); err != nil {
		t.Errorf("after the switch is off: %v", err)
	}
}

func TestAssistantThreadsBridgeToSessions(t *testing.T) {
	emu := newEmu(t, slackemu.Options{NoRateLimits: true, AgentView: true})
	api := botClient(emu)
	msg := emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "hi", "")
	if err := api.SetAssistantThreadsStatus(slack.AssistantThreadsSetStatusParameters{ChannelID: slackemu.DMAlice, ThreadTS: msg.TS, Status: "is thinking…"}); err != nil {
		t.Fatal(err)
	}
	if err := api.SetAssistantThreadsTitle(slack.AssistantThreadsSetTitleParameters{ChannelID: slackemu.DMAlice, ThreadTS: msg.TS, Title: "Greeting"}); err != nil {
		t.Fatal(err)
	}
	if err := api.SetAssistantThreadsStatus(slack.AssistantThreadsSetStatusParameters{ChannelID: slackemu.DMAlice, ThreadTS: msg.TS, Status: ""}); err != nil {
		t.Fatal(err)
	}
	a, _ := emu.AgentSession(slackemu.DMAlice, msg.TS)
	if a.Title != "Greeting" || a.Status != "active" {
		t.Errorf("bridged session = %+v", a)
	}
	if diff := cmp.Diff([]string{"processing", "active"}, emu.SessionStatuses(slackemu.DMAlice, msg.TS)); diff != "" {
		t.Errorf("bridged statuses (-want +got):\n%s", diff)
	}

	// Agent view: prompts are tab-level; thread_ts makes the call a silent
	// no-op; more than 4 prompts are refused.
	p := slack.AssistantThreadsSetSuggestedPromptsParameters{ChannelID: slackemu.DMAlice, ThreadTS: msg.TS}
	p.AddPrompt("a", "A")
	if err := api.SetAssistantThreadsSuggestedPrompts(p); err != nil {
		t.Fatal(err)
	}
	p.ThreadTS = ""
	if err := api.SetAssistantThreadsSuggestedPrompts(p); err != nil {
		t.Fatal(err)
	}
	var ignored []bool
	for _, st := range emu.AssistantStatuses() {
		if st.Method == "setSuggestedPrompts" {
			ignored = append(ignored, st.Ignored)
		}
	}
	if diff := cmp.Diff([]bool{true, false}, ignored); diff != "" {
		t.Errorf("prompts ignored (-want +got):\n%s", diff)
	}
	for range 4 {
		p.AddPrompt("b", "B")
	}
	if err := api.SetAssistantThreadsSuggestedPrompts(p); errString(err) != "invalid_arguments" {
		t.Errorf("5 prompts: %v", err)
	}
}

func TestStreamTaskCardsAndSessionStatus(t *testing.T) {
	emu := newEmu(t, slackemu.Options{NoRateLimits: true})
	api := botClient(emu)
	root := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "look it up", "")

	_, ts, err := api.StartStream(slackemu.ChannelGen, append(recipients(), slack.MsgOptionTS(root.TS), slack.MsgOptionTaskDisplayMode(slack.TaskDisplayModePlan),
		slack.MsgOptionChunks(slack.NewPlanUpdateChunk("Finding the answer")))...)
	if err != nil {
		t.Fatalf("StartStream: %v", err)
	}
	if got := emu.SessionStatuses(slackemu.ChannelGen, root.TS); !cmp.Equal(got, []string{"processing"}) {
		t.Errorf("a stream makes a processing session: %v", got)
	}
	task := func(id, title string, st slack.TaskCardStatus, details string, src ...slack.TaskCardSource) slack.TaskUpdateChunk {
		c := slack.NewTaskUpdateChunk(id, title)
		c.Status, c.Details, c.Sources = st, details, src
		return c
	}
	steps := [][]slack.StreamChunk{
		{task("call-1", "github · search_issues", "pending", "query=\"flaky\"")},
		{task("call-1", "github · search_issues", "in_progress", ""), task("call-2", "jira · get", "pending", "")},
		{task("call-1", "github · search_issues", "complete", "", slack.TaskCardSource{Type: "url", Text: "#12", URL: "https://example.com/12"})},
		{task("call-2", "jira · get", "error", "timeout"), slack.NewMarkdownTextChunk("Found it.")},
	}
	for i, cs := range steps {
		if _, _, err := api.AppendStream(slackemu.ChannelGen, ts, slack.MsgOptionChunks(cs...)); err != nil {
			t.Fatalf("AppendStream step %d: %v", i, err)
		}
	}
	for _, bad := range []slack.StreamChunk{
		task("x", "t", "done", ""),
		task("", "t", "pending", ""),
		task("x", strings.Repeat("a", 200), "pending", strings.Repeat("b", 57)),
		slack.NewPlanUpdateChunk(""),
	} {
		if _, _, err := api.AppendStream(slackemu.ChannelGen, ts, slack.MsgOptionChunks(bad)); errString(err) != "invalid_chunks" {
			t.Errorf("chunk %+v: %v, want invalid_chunks", bad, err)
		}
	}
	// stopStream with session_status and feedback blocks (slack-go has no
	// session_status option: raw form).
	blocks := `[{"type":"markdown","text":"| a | b |\n|---|---|\n| 1 | 2 |"},{"type":"context_actions","elements":[{"type":"feedback_buttons","action_id":"fb","positive_button":{"text":{"type":"plain_text","text":"👍"},"value":"good|T1"},"negative_button":{"text":{"type":"plain_text","text":"👎"},"value":"bad|T1"}}]}]`
	out := callRaw(t, emu, "chat.stopStream", slackemu.BotToken, url.Values{"channel": {slackemu.ChannelGen}, "ts": {ts}, "session_status": {"suspended"}, "blocks": {blocks}})
	if out["ok"] != true {
		t.Fatalf("stopStream: %v", out)
	}
	m, _ := emu.MessageAt(slackemu.ChannelGen, ts)
	if m.PlanTitle != "Finding the answer" || m.TaskDisplayMode != "plan" || m.MarkdownText != "Found it." {
		t.Errorf("stream = plan %q mode %q text %q", m.PlanTitle, m.TaskDisplayMode, m.MarkdownText)
	}
	cards := emu.TaskCards(slackemu.ChannelGen, ts)
	want := []slackemu.TaskCard{
		{ID: "call-1", Title: "github · search_issues", Status: "complete", Details: "query=\"flaky\"", Statuses: []string{"pending", "in_progress", "complete"},
			Sources: []slackemu.TaskSource{{Type: "url", Text: "#12", URL: "https://example.com/12"}}},
		{ID: "call-2", Title: "jira · get", Status: "error", Details: "timeout", Statuses: []string{"pending", "error"}},
	}
	if diff := cmp.Diff(want, cards); diff != "" {
		t.Errorf("task cards (-want +got):\n%s", diff)
	}
	if got := emu.SessionStatuses(slackemu.ChannelGen, root.TS); !cmp.Equal(got, []string{"processing", "suspended"}) {
		t.Errorf("statuses after stopStream: %v", got)
	}
	if out := callRaw(t, emu, "chat.stopStream", slackemu.BotToken, url.Values{"channel": {slackemu.ChannelGen}, "ts": {ts}, "session_status": {"done"}}); out["error"] != "message_not_in_streaming_state" {
		t.Errorf("second stop: %v", out)
	}

	// The feedback click, as Slack sends it.
	sock := startSocket(t, emu, true)
	in, err := emu.ClickFeedback(slackemu.TeamID, slackemu.UserBob, slackemu.ChannelGen, ts, "", false)
	if err != nil {
		t.Fatal(err)
	}
	ev := sock.next(t, socketmode.EventTypeInteractive)
	cb := ev.Data.(slack.InteractionCallback)
	if ev.Request.EnvelopeID != in.EnvelopeID || len(cb.ActionCallback.BlockActions) != 1 {
		t.Fatalf("click = %+v", cb)
	}
	act := cb.ActionCallback.BlockActions[0]
	if act.Type != "feedback_buttons" || act.ActionID != "fb" || act.Value != "bad|T1" || cb.User.ID != slackemu.UserBob || cb.Container.ThreadTs != root.TS {
		t.Errorf("feedback action = %+v (container %+v)", act, cb.Container)
	}
}

func TestAgentBlocksValidation(t *testing.T) {
	emu := newEmu(t, slackemu.Options{NoRateLimits: true})
	api := botClient(emu)
	fb := slack.NewFeedbackButtonsBlockElement("fb",
		slack.NewFeedbackButton(slack.NewTextBlockObject("plain_text", "👍", false, false), "positive_feedback"),
		slack.NewFeedbackButton(slack.NewTextBlockObject("plain_text", "👎", false, false), "negative_feedback"))
	if _, _, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionBlocks(slack.NewMarkdownBlock("", "**hi**"), slack.NewContextActionsBlock("ca", fb))); err != nil {
		t.Fatalf("context_actions via slack-go: %v", err)
	}
	post := func(blocks string) string {
		out := callRaw(t, emu, "chat.postMessage", slackemu.BotToken, url.Values{"channel": {slackemu.ChannelGen}, "blocks": {blocks}})
		if out["ok"] == true {
			return "ok"
		}
		return out["error"].(string)
	}
	row := `[{"type":"raw_text","text":"a"},{"type":"raw_number","text":"1","value":1}]`
	rows := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat(row+",", n), ",") + "]" }
	for _, tc := range []struct{ blocks, want string }{
		{`[{"type":"table","rows":` + rows(100) + `}]`, "ok"},
		{`[{"type":"table","rows":` + rows(101) + `}]`, "invalid_blocks"},
		{`[{"type":"table","rows":[[{"type":"raw_text","text":"` + strings.Repeat("x", 10001) + `"}]]}]`, "invalid_blocks"},
		{`[{"type":"table","rows":` + rows(2) + `,"column_settings":[{"align":"left","is_wrapped":false},null,{"align":"right"}]}]`, "ok"},
		{`[{"type":"table","rows":` + rows(2) + `,"column_settings":[{"align":"middle"}]}]`, "invalid_blocks"},
		{`[{"type":"table","rows":` + rows(2) + `,"column_settings":[` + strings.TrimSuffix(strings.Repeat(`null,`, 21), ",") + `]}]`, "invalid_blocks"},
		{`[{"type":"markdown","text":"` + strings.Repeat("x", 7000) + `"},{"type":"markdown","text":"` + strings.Repeat("x", 7000) + `"}]`, "invalid_blocks"},
		{`[{"type":"context_actions","elements":[{"type":"icon_button","icon":"trash","text":{"type":"plain_text","text":"Delete"},"action_id":"d","value":"x"}]}]`, "ok"},
		{`[{"type":"context_actions","elements":[{"type":"icon_button","icon":"star","text":{"type":"plain_text","text":"Star"},"action_id":"d"}]}]`, "invalid_blocks"},
		{`[{"type":"context_actions","elements":[{"type":"feedback_buttons","action_id":"f","positive_button":{"text":{"type":"plain_text","text":"y"},"value":"1"}}]}]`, "invalid_blocks"},
		{`[{"type":"context_actions","elements":[]}]`, "invalid_blocks"},
	} {
		if got := post(tc.blocks); got != tc.want {
			t.Errorf("blocks %.80s…: %s, want %s", tc.blocks, got, tc.want)
		}
	}
}

func TestStreamLifetimeAndStop(t *testing.T) {
	emu := newEmu(t, slackemu.Options{NoRateLimits: true, StreamLifetime: 300 * time.Millisecond})
	api := botClient(emu)
	root := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "long one", "")
	_, ts, err := api.StartStream(slackemu.ChannelGen, append(recipients(), slack.MsgOptionTS(root.TS), slack.MsgOptionMarkdownText("part 1"))...)
	if err != nil {
		t.Fatal(err)
	}
	// The stream times out on its own (no call needed), and the session
	// becomes active as Slack does for a timed-out stream.
	waitFor(t, emu, "the stream to expire", func() bool {
		m, _ := emu.MessageAt(slackemu.ChannelGen, ts)
		return m.StreamEnded == "expired"
	})
	if _, _, err := api.AppendStream(slackemu.ChannelGen, ts, slack.MsgOptionMarkdownText(" part 2")); errString(err) != "message_not_in_streaming_state" {
		t.Errorf("append after the lifetime: %v", err)
	}
	if got := emu.SessionStatuses(slackemu.ChannelGen, root.TS); !cmp.Equal(got, []string{"processing", "active"}) {
		t.Errorf("statuses: %v", got)
	}
	// Recovery: chat.update on the same ts.
	if _, _, _, err := api.UpdateMessage(slackemu.ChannelGen, ts, slack.MsgOptionText("part 1 part 2", false)); err != nil {
		t.Errorf("update after expiry: %v", err)
	}

	// Slack's Stop: agent_session_stopped with the stopped streams, raw as
	// Slack sends it; appends then fail stopped_by_user.
	sock := startSocket(t, emu, true)
	_, ts2, err := api.StartStream(slackemu.ChannelGen, append(recipients(), slack.MsgOptionTS(root.TS), slack.MsgOptionMarkdownText("again"))...)
	if err != nil {
		t.Fatal(err)
	}
	st := emu.StopAgentSession(slackemu.TeamID, slackemu.ChannelGen, root.TS, slackemu.UserAlice)
	if !cmp.Equal(st.Streams, []string{ts2}) {
		t.Errorf("stopped streams = %v, want [%s]", st.Streams, ts2)
	}
	ev, rawEv := sock.nextInner(t, "agent_session_stopped")
	raw := struct{ Event map[string]any }{rawEv}
	wantRaw := map[string]any{"type": "agent_session_stopped", "channel": slackemu.ChannelGen, "thread_ts": root.TS, "user": slackemu.UserAlice, "streaming_message_ts": []any{ts2}}
	for k, v := range wantRaw {
		if !cmp.Equal(raw.Event[k], v) {
			t.Errorf("raw event %s = %v, want %v", k, raw.Event[k], v)
		}
	}
	if inner, ok := ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AgentSessionStoppedEvent); !ok || inner.StreamingMessageTimestamps[0] != ts2 {
		t.Errorf("slack-go decoded %T %+v", ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data, inner)
	}
	if _, _, err := api.AppendStream(slackemu.ChannelGen, ts2, slack.MsgOptionMarkdownText("more")); errString(err) != "stopped_by_user" {
		t.Errorf("append after Stop: %v", err)
	}
	if _, _, err := api.StopStream(slackemu.ChannelGen, ts2); errString(err) != "message_not_in_streaming_state" {
		t.Errorf("stop after Stop: %v", err)
	}
	if a, _ := emu.AgentSession(slackemu.ChannelGen, root.TS); a.Status != "processing" {
		t.Errorf("Stop must not change the status; got %s", a.Status)
	}
	// A second Stop with nothing streaming still sends the event, with [].
	if st := emu.StopAgentSession(slackemu.TeamID, slackemu.ChannelGen, root.TS, slackemu.UserAlice); len(st.Streams) != 0 {
		t.Errorf("second stop: %v", st.Streams)
	}
	ev, _ = sock.nextInner(t, "agent_session_stopped")
	if !strings.Contains(string(ev.Request.Payload), `"streaming_message_ts":[]`) {
		t.Errorf("empty list not sent as []: %s", ev.Request.Payload)
	}
}

func TestMessagesTabAndContextEvents(t *testing.T) {
	emu := newEmu(t, slackemu.Options{NoRateLimits: true, AgentView: true})
	sock := startSocket(t, emu, true)
	rawEvent := func() map[string]any {
		ev := sock.next(t, socketmode.EventTypeEventsAPI)
		var p struct {
			Event map[string]any `json:"event"`
		}
		if err := json.Unmarshal(ev.Request.Payload, &p); err != nil {
			t.Fatal(err)
		}
		return p.Event
	}
	emu.OpenMessagesTab(slackemu.TeamID, slackemu.UserAlice, slackemu.ChannelContext(slackemu.TeamID, slackemu.ChannelGen))
	ev := rawEvent()
	ents, _ := ev["context"].(map[string]any)["entities"].([]any)
	if ev["type"] != "app_home_opened" || ev["tab"] != "messages" || ev["channel"] != slackemu.DMAlice || len(ents) != 1 ||
		ents[0].(map[string]any)["value"] != slackemu.ChannelGen || ents[0].(map[string]any)["type"] != "slack#/types/channel_id" {
		t.Errorf("messages tab event = %v", ev)
	}
	emu.ChangeAppContext(slackemu.TeamID, slackemu.UserAlice, slackemu.ChannelContext(slackemu.TeamID, slackemu.ChannelRandom))
	ev = rawEvent()
	if ev["type"] != "app_context_changed" || ev["user"] != slackemu.UserAlice || !strings.Contains(mustJSON(t, ev["context"]), slackemu.ChannelRandom) {
		t.Errorf("context changed = %v", ev)
	}
	emu.ChangeAppContext(slackemu.TeamID, slackemu.UserAlice)
	if ev = rawEvent(); mustJSON(t, ev["context"]) != "{}" {
		t.Errorf("empty context = %v", ev["context"])
	}
	msg := emu.Message(slackemu.TeamID, slackemu.DMAlice, slackemu.UserAlice, "first question", "")
	rawEvent()
	emu.RetitleAgentSession(slackemu.TeamID, slackemu.DMAlice, msg.TS, slackemu.UserAlice, "Scuba")
	if ev = rawEvent(); ev["type"] != "agent_session_title_changed" || ev["title"] != "Scuba" || ev["team_id"] != slackemu.TeamID || ev["previous_title"] != nil {
		t.Errorf("first retitle = %v", ev)
	}
	emu.RetitleAgentSession(slackemu.TeamID, slackemu.DMAlice, msg.TS, slackemu.UserAlice, "Bora Bora")
	if ev = rawEvent(); ev["previous_title"] != "Scuba" {
		t.Errorf("second retitle = %v", ev)
	}
}

// nextInner returns the next events_api envelope whose inner event has
// type typ, with that event as raw JSON.
func (c *sockClient) nextInner(t *testing.T, typ string) (socketmode.Event, map[string]any) {
	t.Helper()
	for {
		ev := c.next(t, socketmode.EventTypeEventsAPI)
		var p struct {
			Event map[string]any `json:"event"`
		}
		if err := json.Unmarshal(ev.Request.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.Event["type"] == typ {
			return ev, p.Event
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAgentSessionRateLimit(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api2 := slack.New(slackemu.BotToken, slack.OptionAPIURL(emu.APIURL()))
	root := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "x", "")
	limited := 0
	for range 8 {
		_, err := api2.SetAgentSessionStatus(slack.AgentSessionSetStatusParameters{Status: "processing", ChannelID: slackemu.ChannelGen, ThreadTS: root.TS})
		if _, ok := err.(*slack.RateLimitedError); ok {
			limited++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if limited != 3 {
		t.Errorf("429s = %d, want 3 (Tier 3, burst 5)", limited)
	}
}

// An event type the Slack library does not know reaches the app as
// Slack sends it: slack-go reports a bad message carrying the raw frame,
// whose envelope the app can still ack.
func TestUnknownEventTypeRawOverSocket(t *testing.T) {
	emu := newEmu(t, fastOpts())
	c := startSocket(t, emu, false)
	c.next(t, socketmode.EventTypeHello)
	env, _ := emu.DeliverEvent(slackemu.TeamID, map[string]any{"type": "message_stream_stopped", "channel": slackemu.ChannelGen, "ts": "1700000000.000100", "event_ts": "1700000000.000200"})
	ev := c.next(t, socketmode.EventTypeErrorBadMessage, socketmode.EventTypeEventsAPI)
	t.Logf("slack-go surfaced it as %s", ev.Type)
	var raw []byte
	switch ev.Type {
	case socketmode.EventTypeErrorBadMessage:
		raw = ev.Data.(*socketmode.ErrorBadMessage).Message
	default:
		raw = ev.Request.Payload
	}
	var frame struct {
		EnvelopeID string `json:"envelope_id"`
		Payload    struct {
			Event map[string]any `json:"event"`
		} `json:"payload"`
		Event map[string]any `json:"event"`
	}
	if err := json.Unmarshal(raw, &frame); err != nil {
		t.Fatalf("raw frame: %v: %s", err, raw)
	}
	inner := frame.Payload.Event
	if inner == nil {
		inner = frame.Event
	}
	if inner["type"] != "message_stream_stopped" || inner["ts"] != "1700000000.000100" {
		t.Errorf("raw event = %s", raw)
	}
	if frame.EnvelopeID != "" && frame.EnvelopeID != env {
		t.Errorf("envelope id %s, want %s", frame.EnvelopeID, env)
	}
	c.ack(t, env, nil)
	waitFor(t, emu, "ack", func() bool { e, _ := emu.Envelope(env); return e.Acked })
}

func TestSessionProcessingTimesOut(t *testing.T) {
	emu := newEmu(t, slackemu.Options{NoRateLimits: true, ProcessingTimeout: 100 * time.Millisecond})
	api := botClient(emu)
	root := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "x", "")
	if _, err := api.SetAgentSessionStatus(slack.AgentSessionSetStatusParameters{Status: "processing", ChannelID: slackemu.ChannelGen, ThreadTS: root.TS}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the processing timeout", func() bool {
		a, _ := emu.AgentSession(slackemu.ChannelGen, root.TS)
		return a.Status == "active"
	})
	a, _ := emu.AgentSession(slackemu.ChannelGen, root.TS)
	if last := a.Statuses[len(a.Statuses)-1]; last.Via != "processing_timeout" {
		t.Errorf("last change = %+v", last)
	}
}

func TestAgentSessionsBoundedByJournalLimit(t *testing.T) {
	emu := newEmu(t, slackemu.Options{NoRateLimits: true, JournalLimit: 10, VersionLimit: 4})
	api := botClient(emu)
	var roots []string
	for i := range 30 {
		root := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, fmt.Sprint(i), "")
		roots = append(roots, root.TS)
		for range 6 {
			if _, err := api.SetAgentSessionStatus(slack.AgentSessionSetStatusParameters{Status: "processing", ChannelID: slackemu.ChannelGen, ThreadTS: root.TS}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, ok := emu.AgentSession(slackemu.ChannelGen, roots[0]); ok {
		t.Error("the oldest session was kept past JournalLimit")
	}
	a, ok := emu.AgentSession(slackemu.ChannelGen, roots[29])
	if !ok || len(a.Statuses) != 4 {
		t.Errorf("newest session: %v, %d statuses (VersionLimit 4)", ok, len(a.Statuses))
	}
}

func TestBlocksValidate(t *testing.T) {
	emu := newEmu(t, slackemu.Options{NoRateLimits: true})
	if out := callRaw(t, emu, "blocks.validate", slackemu.BotToken, url.Values{"blocks": {`[{"type":"markdown","text":"| a |\n|---|\n| 1 |"},{"type":"table","rows":[[{"type":"raw_text","text":"a"}]]}]`}}); out["ok"] != true {
		t.Errorf("valid blocks: %v", out)
	}
	out := callRaw(t, emu, "blocks.validate", slackemu.BotToken, url.Values{"blocks": {`[{"type":"divider"},{"type":"context_actions","elements":[{"type":"icon_button","icon":"star","text":{"type":"plain_text","text":"x"}}]}]`}})
	errs, _ := out["errors"].([]any)
	if out["error"] != "invalid_blocks" || len(errs) != 1 || errs[0].(map[string]any)["pointer"] != "/blocks/1" {
		t.Errorf("invalid blocks: %v", out)
	}
	if out := callRaw(t, emu, "blocks.validate", slackemu.BotToken, url.Values{"view": {`{"type":"modal","blocks":[{"type":"divider"}]}`}}); out["ok"] != true {
		t.Errorf("view: %v", out)
	}
}
