package slackapi

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestTypedCalls: Post, Update, Ephemeral and DM reach the emulated Slack
// through the governor with the text escaped by the caller's mrkdwn.Text.
func TestTypedCalls(t *testing.T) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	defer emu.Close()
	m := NewMetrics()
	gov := NewGovernor(nil, DefaultRateLimits(), m, slog.New(slog.DiscardHandler), time.Minute)
	hc := &http.Client{Transport: NewTransport(http.DefaultTransport, gov, m)}
	c := New(gov, Static{API: slack.New(slackemu.BotToken, slack.OptionAPIURL(emu.APIURL()), slack.OptionHTTPClient(hc))}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ts, err := c.Post(ctx, slackemu.TeamID, slackemu.ChannelGen, Msg{Text: mrkdwn.Escape("hi <!channel>")})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, slackemu.TeamID, slackemu.ChannelGen, ts, Msg{Text: mrkdwn.Join([]mrkdwn.Text{mrkdwn.Lit("*done*"), mrkdwn.Escape("<x>")}, mrkdwn.Lit(" "))}); err != nil {
		t.Fatal(err)
	}
	var got string
	for _, msg := range emu.Messages(slackemu.ChannelGen) {
		if msg.TS == ts {
			got = msg.Text
		}
	}
	if want := "*done* &lt;x&gt;"; got != want {
		t.Errorf("updated text %q, want %q", got, want)
	}
	if err := c.Ephemeral(ctx, slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, Msg{Text: mrkdwn.Escape("only <you>"), Thread: ts}); err != nil {
		t.Fatal(err)
	}
	eph := emu.Ephemerals(slackemu.UserAlice)
	if len(eph) != 1 || eph[0].Text != "only &lt;you&gt;" || eph[0].ThreadTS != ts {
		t.Errorf("ephemerals %+v, want one in the thread, escaped", eph)
	}
	if err := c.DM(ctx, slackemu.TeamID, slackemu.UserAlice, Msg{Text: mrkdwn.Lit("hello")}); err != nil {
		t.Fatal(err)
	}
	if u := gov.Ungoverned(); len(u) != 0 {
		t.Errorf("ungoverned calls %v, want none", u)
	}
}
