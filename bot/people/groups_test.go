package people

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/bot/internal/flight"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

func TestMembers(t *testing.T) {
	emu := newEmu(t)
	store := &memStore{}
	d := newDir(emu, store)
	ctx := context.Background()
	g := emu.AddUsergroup(slackemu.Usergroup{Team: slackemu.TeamID, Handle: "oncall", Name: "On call", Users: []string{slackemu.UserAlice, slackemu.UserBob}})

	// Concurrent callers share one Slack call, and its answer is cached
	// for the other replicas.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			got, err := d.Members(ctx, slackemu.TeamID, g, false)
			if err != nil || !slices.Equal(got, []string{slackemu.UserAlice, slackemu.UserBob}) {
				t.Errorf("Members = %v, %v", got, err)
			}
		})
	}
	wg.Wait()
	calls := len(emu.Calls("usergroups.users.list"))
	if calls < 1 || calls > 8 {
		t.Fatalf("usergroups.users.list called %d times", calls)
	}
	if store.ttls[slackemu.TeamID+"/"+g] != DefaultUsergroupCacheTTL {
		t.Errorf("cached for %v, want %v", store.ttls[slackemu.TeamID+"/"+g], DefaultUsergroupCacheTTL)
	}
	// The cache answers; fresh asks Slack.
	if err := emu.SetUsergroupMembers(g, slackemu.UserAlice); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Members(ctx, slackemu.TeamID, g, false); len(got) != 2 {
		t.Errorf("cached Members = %v, want the cached two", got)
	}
	if got, err := d.Members(ctx, slackemu.TeamID, g, true); err != nil || !slices.Equal(got, []string{slackemu.UserAlice}) {
		t.Errorf("fresh Members = %v, %v", got, err)
	}
	if n := len(emu.Calls("usergroups.users.list")); n != calls+1 {
		t.Errorf("usergroups.users.list called %d times, want %d", n, calls+1)
	}

	// A missing group is cached as empty and reported.
	if got, err := d.Members(ctx, slackemu.TeamID, "SNONE", true); !errors.Is(err, ErrNoSuchGroup) || got == nil || len(got) != 0 {
		t.Errorf("missing group: %v, %v", got, err)
	}
	if got, ok, _ := store.CachedUsergroup(ctx, slackemu.TeamID, "SNONE"); !ok || len(got) != 0 {
		t.Errorf("missing group cached as %v, %v", got, ok)
	}
	// So is a workspace without user groups.
	emu.SetFreePlan(slackemu.TeamID, true)
	if _, err := d.Members(ctx, slackemu.TeamID, g, true); !errors.Is(err, ErrGroupsNeedPlan) {
		t.Errorf("free plan: %v", err)
	}
}

// TestMembersSingleFlight: callers waiting on another's call stop at
// their own deadline.
func TestMembersSingleFlight(t *testing.T) {
	emu := newEmu(t)
	d := newDir(emu, &memStore{})
	g := emu.AddUsergroup(slackemu.Usergroup{Team: slackemu.TeamID, Handle: "x", Users: []string{slackemu.UserAlice}})
	release := make(chan struct{})
	started := make(chan struct{})
	go func() {
		_, _ = flight.Do(context.Background(), &d.flight, "g:"+slackemu.TeamID+"/"+g, time.Minute, func(context.Context) ([]string, error) {
			close(started)
			<-release
			return []string{"U0"}, nil
		})
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := d.Members(ctx, slackemu.TeamID, g, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting past the deadline: %v", err)
	}
	close(release)
}
