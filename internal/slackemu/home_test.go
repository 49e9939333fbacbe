package slackemu_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

func homeView(blocks ...slack.Block) slack.HomeTabViewRequest {
	return slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: blocks}, CallbackID: "home"}
}

func TestAppHomeWithSlackGo(t *testing.T) {
	emu := newEmu(t, fastOpts())
	api := botClient(emu)
	c := startSocket(t, emu, false)
	c.next(t, socketmode.EventTypeHello)

	// Before any publish: app_home_opened without a view.
	emu.OpenHome(slackemu.TeamID, slackemu.UserAlice, "")
	ev := c.next(t, socketmode.EventTypeEventsAPI)
	opened := ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AppHomeOpenedEvent)
	if opened.Tab != "home" || opened.User != slackemu.UserAlice || opened.Channel != slackemu.DMAlice || opened.View != nil {
		t.Errorf("first app_home_opened = %+v", opened)
	}
	c.ack(t, ev.Request.EnvelopeID, nil)

	connect := slack.NewButtonBlockElement("connect:linear", "linear", slack.NewTextBlockObject(slack.PlainTextType, "Connect", false, false))
	connect.URL = "https://auth.example.com/authorize?state=abc"
	disconnect := slack.NewButtonBlockElement("disconnect:github", "github", slack.NewTextBlockObject(slack.PlainTextType, "Disconnect", false, false))
	section := slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*Your connections*", false, false), nil, nil)
	vr, err := api.PublishView(slackemu.UserAlice, homeView(section, slack.NewActionBlock("conn", connect, disconnect)), "")
	if err != nil {
		t.Fatal(err)
	}
	if vr.Type != slack.VTHomeTab || vr.Hash == "" || vr.ID == "" {
		t.Fatalf("published view = %+v", vr.View)
	}
	hv, ok := emu.HomeView(slackemu.TeamID, slackemu.UserAlice)
	if !ok || hv.ID != vr.ID || !strings.Contains(string(hv.Blocks), "Your connections") {
		t.Fatalf("HomeView = %+v, %v", hv, ok)
	}
	// A stale hash loses the race; the current one wins.
	if _, err := api.PublishView(slackemu.UserAlice, homeView(section), "1.stale"); errString(err) != "hash_conflict" {
		t.Errorf("stale hash: %v", err)
	}
	vr2, err := api.PublishView(slackemu.UserAlice, homeView(section, slack.NewActionBlock("conn", connect, disconnect)), vr.Hash)
	if err != nil || vr2.ID != vr.ID || vr2.Hash == vr.Hash {
		t.Errorf("republish = %+v, %v", vr2, err)
	}

	// Later visits carry the view.
	emu.OpenHome(slackemu.TeamID, slackemu.UserAlice, "home")
	ev = c.next(t, socketmode.EventTypeEventsAPI)
	opened = ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AppHomeOpenedEvent)
	if opened.View == nil || opened.View.ID != vr.ID || opened.View.Type != slack.VTHomeTab || opened.View.Hash != vr2.Hash {
		t.Errorf("app_home_opened view = %+v", opened.View)
	}
	c.ack(t, ev.Request.EnvelopeID, nil)

	// Clicks in the home view: container.type "view", the view attached.
	in, err := emu.ClickHome(slackemu.TeamID, slackemu.UserAlice, "disconnect:github", "")
	if err != nil {
		t.Fatal(err)
	}
	ev = c.next(t, socketmode.EventTypeInteractive)
	cb := ev.Data.(slack.InteractionCallback)
	if cb.Type != slack.InteractionTypeBlockActions || cb.Container.Type != "view" || cb.Container.ViewID != vr.ID || cb.View.ID != vr.ID ||
		cb.View.Type != slack.VTHomeTab || cb.ResponseURL != "" || cb.ActionCallback.BlockActions[0].Value != "github" || cb.User.ID != slackemu.UserAlice {
		t.Errorf("home block_actions = %+v", cb)
	}
	c.ack(t, ev.Request.EnvelopeID, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := in.Wait(ctx); err != nil {
		t.Errorf("acked home click: %v", err)
	}
	// A URL button opens its link and still sends block_actions to ack.
	in, err = emu.ClickHome(slackemu.TeamID, slackemu.UserAlice, "connect:linear", "")
	if err != nil || in.URL != connect.URL {
		t.Fatalf("URL button: %+v, %v", in, err)
	}
	ev = c.next(t, socketmode.EventTypeInteractive)
	c.ack(t, ev.Request.EnvelopeID, nil)
	if _, err := in.Wait(ctx); err != nil {
		t.Errorf("URL button ack: %v", err)
	}
	if _, err := emu.ClickHome(slackemu.TeamID, slackemu.UserBob, "connect:linear", ""); err == nil {
		t.Error("click in a home view bob never got: no error")
	}
}

func TestViewsPublishErrors(t *testing.T) {
	emu := newEmu(t, slackemu.Options{})
	api := botClient(emu)
	var many []slack.Block
	for range 101 {
		many = append(many, slack.NewDividerBlock())
	}
	huge := strings.Repeat("x", 2900)
	var big []slack.Block
	for range 99 {
		big = append(big, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, huge, false, false), nil, nil))
	}
	for _, tc := range []struct {
		name string
		user string
		view slack.HomeTabViewRequest
		want string
	}{
		{"100 blocks", slackemu.UserAlice, homeView(many[:100]...), ""},
		{"101 blocks", slackemu.UserAlice, homeView(many...), "invalid_blocks"},
		{"over 250 kB", slackemu.UserAlice, homeView(big...), "view_too_large"},
		{"not a home view", slackemu.UserAlice, slack.HomeTabViewRequest{Type: slack.VTModal}, "invalid_arguments"},
		{"other workspace's user", slackemu.UserT2, homeView(), "user_not_found"},
	} {
		_, err := api.PublishView(tc.user, tc.view, "")
		if got := errString(err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	emu.SetHomeTabEnabled(false)
	if _, err := api.PublishView(slackemu.UserAlice, homeView(), ""); errString(err) != "not_enabled" {
		t.Errorf("home tab off: %v", err)
	}
	emu.SetHomeTabEnabled(true)
	for i, u := range []string{slackemu.UserAlice, slackemu.UserBob} {
		v := homeView()
		v.ExternalID = "same"
		_, err := api.PublishView(u, v, "")
		if want := map[int]string{1: "duplicate_external_id"}[i]; errString(err) != want {
			t.Errorf("external_id publish %d: %v", i, err)
		}
	}
}

func TestMessageShortcut(t *testing.T) {
	opts := timeoutOpts()
	opts.Shortcuts = []slackemu.Shortcut{{Name: "Ask Bobbin", Type: "message", CallbackID: "ask_bobbin"}, {Name: "New", Type: "global", CallbackID: "new_thread"}}
	emu := newEmu(t, opts)
	c := startSocket(t, emu, false)
	c.next(t, socketmode.EventTypeHello)
	parent, _ := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserBob, Text: "deploy failed", Silent: true})
	reply, _ := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserBob, Text: "error 137", ThreadTS: parent.TS, Silent: true})

	in, err := emu.MessageShortcut(slackemu.TeamID, slackemu.UserAlice, slackemu.ChannelGen, reply.TS, "ask_bobbin")
	if err != nil {
		t.Fatal(err)
	}
	ev := c.next(t, socketmode.EventTypeInteractive)
	cb := ev.Data.(slack.InteractionCallback)
	if cb.Type != slack.InteractionTypeMessageAction || cb.CallbackID != "ask_bobbin" || cb.TriggerID == "" || cb.ResponseURL == "" ||
		cb.Message.Timestamp != reply.TS || cb.Message.ThreadTimestamp != parent.TS || cb.Message.Text != "error 137" ||
		cb.Channel.ID != slackemu.ChannelGen || cb.Team.ID != slackemu.TeamID || cb.User.ID != slackemu.UserAlice || cb.MessageTs != reply.TS {
		t.Errorf("message_action = %+v", cb)
	}
	c.ack(t, ev.Request.EnvelopeID, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := in.Wait(ctx); err != nil {
		t.Errorf("acked shortcut: %v", err)
	}
	// The trigger opens a modal.
	if _, err := botClient(emu).OpenView(cb.TriggerID, modal("Ask Bobbin")); err != nil {
		t.Errorf("views.open from the shortcut: %v", err)
	}

	// Unacked within the deadline: the person sees an error.
	in, err = emu.MessageShortcut(slackemu.TeamID, slackemu.UserAlice, slackemu.ChannelGen, parent.TS, "ask_bobbin")
	if err != nil {
		t.Fatal(err)
	}
	c.next(t, socketmode.EventTypeInteractive)
	if _, err := in.Wait(ctx); err == nil {
		t.Error("unacked shortcut: no failure")
	}

	for _, tc := range []struct{ name, user, callback string }{
		{"external person", slackemu.UserStranger, "ask_bobbin"},
		{"unconfigured callback", slackemu.UserAlice, "nope"},
		{"global id as message shortcut", slackemu.UserAlice, "new_thread"},
	} {
		if _, err := emu.MessageShortcut(slackemu.TeamID, tc.user, slackemu.ChannelGen, parent.TS, tc.callback); err == nil {
			t.Errorf("%s: invoked", tc.name)
		}
	}
	if _, err := emu.GlobalShortcut(slackemu.TeamID, slackemu.UserAlice, "new_thread"); err != nil {
		t.Fatal(err)
	}
	ev = c.next(t, socketmode.EventTypeInteractive)
	if cb := ev.Data.(slack.InteractionCallback); cb.Type != slack.InteractionTypeShortcut || cb.CallbackID != "new_thread" || cb.ResponseURL != "" {
		t.Errorf("shortcut = %+v", cb)
	}
	c.ack(t, ev.Request.EnvelopeID, nil)
	// Not installed in a workspace: nobody there can use it.
	if err := emu.Uninstall(slackemu.TeamID2); err != nil {
		t.Fatal(err)
	}
	if _, err := emu.GlobalShortcut(slackemu.TeamID2, slackemu.UserT2, "new_thread"); err == nil {
		t.Error("shortcut in a workspace without the app: invoked")
	}
}

func TestURLButtonInMessageNeedsAck(t *testing.T) {
	emu := newEmu(t, timeoutOpts())
	api := botClient(emu)
	c := startSocket(t, emu, false)
	c.next(t, socketmode.EventTypeHello)
	link := slack.NewButtonBlockElement("link:connect", "", slack.NewTextBlockObject(slack.PlainTextType, "Connect", false, false))
	link.URL = "https://auth.example.com/authorize?state=s"
	_, ts, err := api.PostMessage(slackemu.ChannelGen, slack.MsgOptionText("connect", false), slack.MsgOptionBlocks(slack.NewActionBlock("b", link)))
	if err != nil {
		t.Fatal(err)
	}
	in, err := emu.Click(slackemu.TeamID, slackemu.UserAlice, slackemu.ChannelGen, ts, "link:connect", "")
	if err != nil || in.URL != link.URL {
		t.Fatalf("Click = %+v, %v", in, err)
	}
	ev := c.next(t, socketmode.EventTypeInteractive)
	if cb := ev.Data.(slack.InteractionCallback); cb.ActionCallback.BlockActions[0].ActionID != "link:connect" {
		t.Errorf("block_actions = %+v", cb.ActionCallback)
	}
	// Not acked: Slack counts it as a failure the person may see.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := in.Wait(ctx); err == nil {
		t.Error("unacked URL button: no failure")
	}
}
