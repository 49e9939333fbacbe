package people

import (
	"context"
	"sync"
	"testing"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestNames: names are looked up once (concurrent lookups share the call)
// and fall back to the id when Slack cannot tell.
func TestNames(t *testing.T) {
	emu := newEmu(t)
	d := newDir(emu, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if n := d.ChannelName(ctx, slackemu.TeamID, slackemu.ChannelGen); n == "" || n == slackemu.ChannelGen {
				t.Errorf("ChannelName = %q", n)
			}
		})
	}
	wg.Wait()
	if n := d.ChannelName(ctx, slackemu.TeamID, slackemu.ChannelGen); n == slackemu.ChannelGen {
		t.Errorf("cached ChannelName = %q", n)
	}
	if n := len(emu.Calls("conversations.info")); n < 1 || n > 4 {
		t.Errorf("conversations.info called %d times", n)
	}
	calls := len(emu.Calls("conversations.info"))
	d.ChannelName(ctx, slackemu.TeamID, slackemu.ChannelGen)
	if n := len(emu.Calls("conversations.info")); n != calls {
		t.Errorf("a cached name asked Slack again")
	}
	if n := d.TeamName(ctx, slackemu.TeamID); n == "" || n == slackemu.TeamID {
		t.Errorf("TeamName = %q", n)
	}
	if n := d.ChannelName(ctx, slackemu.TeamID, "CNOPE"); n != "CNOPE" {
		t.Errorf("unknown channel: %q, want its id", n)
	}
	if n := d.Name(ctx, slackemu.TeamID, "UNOBODY"); n != "" {
		t.Errorf("unknown person: %q, want \"\"", n)
	}
	if n := d.Name(ctx, slackemu.TeamID, ""); n != "" {
		t.Errorf("no person: %q", n)
	}
}
