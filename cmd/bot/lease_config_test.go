package main

import (
	"strings"
	"testing"
	"time"
)

func TestLoadConfigLeaseTTL(t *testing.T) {
	tests := []struct {
		val     string
		want    time.Duration
		wantErr bool
	}{
		{"", 20 * time.Second, false},
		{"5s", 5 * time.Second, false},
		{"500ms", 0, true},
		{"-1s", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.val, func(t *testing.T) {
			env := goodEnv()
			if tt.val != "" {
				env["LEASE_TTL"] = tt.val
			}
			c, err := loadConfig(envFunc(env))
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "LEASE_TTL") {
					t.Fatalf("LEASE_TTL=%q: err = %v, want an error naming LEASE_TTL", tt.val, err)
				}
				return
			}
			if err != nil || c.LeaseTTL != tt.want {
				t.Fatalf("LEASE_TTL=%q: got %v, %v; want %v", tt.val, c.LeaseTTL, err, tt.want)
			}
		})
	}
}
