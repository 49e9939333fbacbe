package slackapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/internal/slackemu"
	"github.com/bobbinbot/bobbin/session"
)

// countingBudget counts the governor's trips to Redis.
type countingBudget struct {
	Budget
	n atomic.Int64
}

func (c *countingBudget) Spend(ctx context.Context, r session.SpendRequest) (session.SpendResult, error) {
	c.n.Add(1)
	return c.Budget.Spend(ctx, r)
}

// BenchmarkGovernorOverhead: the governor's own cost per Web API call on
// the hot path (budget available): "spend" runs Client.Do around a call
// that does nothing; "post" and "post-ungoverned" post a message to the
// emulator through Client.Do and through a plain slack-go client (the
// difference is the governor, the transport's status parsing included).
// redis-trips/op counts budget round trips.
func BenchmarkGovernorOverhead(b *testing.B) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	defer emu.Close()
	store := testStore(b)
	cb := &countingBudget{Budget: store}
	limits, err := ParseRateLimits("*=1000000:100000,chat.postMessage@channel=1000000:100000", DefaultRateLimits())
	if err != nil {
		b.Fatal(err)
	}
	gov := NewGovernor(cb, limits, NewMetrics(), slog.New(slog.DiscardHandler), time.Minute)
	hc := &http.Client{Transport: NewTransport(http.DefaultTransport, gov, NewMetrics())}
	bt := New(gov, Static{API: slack.New(slackemu.BotToken, slack.OptionAPIURL(emu.APIURL()), slack.OptionHTTPClient(hc))}, slog.New(slog.DiscardHandler))
	team := testTeam()
	ctx := context.Background()
	b.Run("spend", func(b *testing.B) {
		cb.n.Store(0)
		for i := 0; b.Loop(); i++ {
			err := bt.Do(ctx, Call{Team: team, Method: ChatUpdate}, func(context.Context, *slack.Client) error { return nil })
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cb.n.Load())/float64(b.N), "redis-trips/op")
	})
	b.Run("post", func(b *testing.B) {
		cb.n.Store(0)
		for i := 0; b.Loop(); i++ {
			err := bt.Do(ctx, Call{Team: slackemu.TeamID, Method: ChatPostMessage, Channel: slackemu.ChannelGen},
				func(ctx context.Context, api *slack.Client) error {
					_, _, err := api.PostMessageContext(ctx, slackemu.ChannelGen, slack.MsgOptionText("bench "+strconv.Itoa(i), false))
					return err
				})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cb.n.Load())/float64(b.N), "redis-trips/op")
	})
	b.Run("post-ungoverned", func(b *testing.B) {
		api := slack.New(slackemu.BotToken, slack.OptionAPIURL(emu.APIURL()))
		for i := 0; b.Loop(); i++ {
			if _, _, err := api.PostMessageContext(ctx, slackemu.ChannelGen, slack.MsgOptionText("bench "+strconv.Itoa(i), false)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
