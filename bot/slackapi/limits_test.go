package slackapi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRateLimits(t *testing.T) {
	base := DefaultRateLimits()
	tests := []struct {
		in   string
		want map[string]RateLimit // the entries to check
		err  bool
	}{
		{in: "", want: map[string]RateLimit{"chat.update": tier3}},
		{in: "chat.update=50", want: map[string]RateLimit{"chat.update": {PerMinute: 50, Burst: 5}}},
		{in: " chat.update = 20:2 ", want: map[string]RateLimit{"chat.update": {PerMinute: 20, Burst: 2}}},
		{in: "reactions.add=off", want: map[string]RateLimit{"reactions.add": {PerMinute: 45, Burst: 5, Off: true}}},
		{in: "chat.postMessage@channel=30:2", want: map[string]RateLimit{
			"chat.postMessage": {PerMinute: 540, Burst: 30, ChannelPerMinute: 30, ChannelBurst: 2}}},
		{in: "chat.postMessage@channel=off", want: map[string]RateLimit{"chat.postMessage": {PerMinute: 540, Burst: 30}}},
		// An unlisted method starts from "*".
		{in: "*=10:1,files.upload=5", want: map[string]RateLimit{"files.upload": {PerMinute: 5, Burst: 1}, "users.info": {PerMinute: 10, Burst: 1}}},
		{in: "*=off,chat.update=45:5", want: map[string]RateLimit{"chat.update": {PerMinute: 45, Burst: 5}, "users.info": {PerMinute: 90, Burst: 10, Off: true}, "*": {PerMinute: 45, Burst: 5, Off: true}}},
		{in: "chat.update", err: true},
		{in: "chat.update=", err: true},
		{in: "chat.update=0", err: true},
		{in: "chat.update=10:0", err: true},
		{in: "chat.update=ten", err: true},
		{in: "update=10", err: true},
		{in: "chat.update@user=10", err: true},
	}
	for _, tt := range tests {
		got, err := ParseRateLimits(tt.in, base)
		if (err != nil) != tt.err {
			t.Errorf("ParseRateLimits(%q): error %v, want error %v", tt.in, err, tt.err)
			continue
		}
		for m, want := range tt.want {
			if diff := cmp.Diff(want, got[m]); diff != "" {
				t.Errorf("ParseRateLimits(%q)[%s] (-want +got):\n%s", tt.in, m, diff)
			}
		}
	}
	if base["chat.update"] != tier3 {
		t.Error("ParseRateLimits changed its base")
	}
}
