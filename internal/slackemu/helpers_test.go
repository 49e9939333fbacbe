package slackemu_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/bobbinbot/bobbin/internal/importcheck"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

func TestImports(t *testing.T) {
	importcheck.Forbid(t, ".", importcheck.Module, importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}

// newEmu starts an emulator closed at the end of the test.
func newEmu(t *testing.T, opts slackemu.Options) *slackemu.Server {
	t.Helper()
	emu := slackemu.New(opts)
	t.Cleanup(emu.Close)
	return emu
}

// botClient is the real slack-go client pointed at the emulator.
func botClient(emu *slackemu.Server) *slack.Client {
	return slack.New(slackemu.BotToken, slack.OptionAppLevelToken(slackemu.AppToken), slack.OptionAPIURL(emu.APIURL()))
}

// waitFor polls cond with a generous deadline.
func waitFor(t *testing.T, emu *slackemu.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := emu.WaitFor(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// eventually polls cond every 20 ms (for conditions that make Web API
// calls, which WaitFor would repeat at every state change) with a
// generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: gave up after 20s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sockClient is a running socketmode client whose events a test reads.
type sockClient struct {
	sm     *socketmode.Client
	events chan socketmode.Event
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startSocket runs a socketmode client against emu until the test ends.
// autoAck acks every envelope (without payload) as it arrives; otherwise
// the test acks.
func startSocket(t *testing.T, emu *slackemu.Server, autoAck bool, opts ...socketmode.Option) *sockClient {
	t.Helper()
	sm := socketmode.New(botClient(emu), opts...)
	ctx, cancel := context.WithCancel(context.Background())
	c := &sockClient{sm: sm, events: make(chan socketmode.Event, 1024), cancel: cancel}
	c.wg.Go(func() { _ = sm.RunContext(ctx) })
	c.wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-sm.Events:
				if autoAck && ev.Request != nil && ev.Request.EnvelopeID != "" {
					actx, acancel := context.WithTimeout(ctx, 5*time.Second)
					_ = sm.AckCtx(actx, ev.Request.EnvelopeID, nil)
					acancel()
				}
				select {
				case c.events <- ev:
				default:
				}
			}
		}
	})
	t.Cleanup(c.stop)
	return c
}

func (c *sockClient) stop() {
	c.cancel()
	c.wg.Wait()
}

// next returns the next event of one of the given types (all when none).
func (c *sockClient) next(t *testing.T, types ...socketmode.EventType) socketmode.Event {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-c.events:
			if len(types) == 0 {
				return ev
			}
			for _, ty := range types {
				if ev.Type == ty {
					return ev
				}
			}
		case <-deadline:
			t.Fatalf("no %v event within 20s", types)
		}
	}
}

func (c *sockClient) ack(t *testing.T, envelopeID string, payload any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.sm.AckCtx(ctx, envelopeID, payload); err != nil {
		t.Fatalf("AckCtx(%s): %v", envelopeID, err)
	}
}
