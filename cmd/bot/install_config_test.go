package main

import (
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/bot/install"
)

// TestLoadConfigInstalls: SLACK_CLIENT_ID, SLACK_CLIENT_SECRET, PUBLIC_URL
// and SECRET_KEY turn installations on and make SLACK_BOT_TOKEN optional;
// each missing piece is named, no value echoed.
func TestLoadConfigInstalls(t *testing.T) {
	base := func() map[string]string {
		e := goodEnv()
		delete(e, "SLACK_BOT_TOKEN")
		return e
	}
	const key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	for _, tt := range []struct {
		name string
		env  map[string]string
		want []string // problems; none means valid
	}{
		{"neither mode", map[string]string{}, []string{"SLACK_BOT_TOKEN is required (or set SLACK_CLIENT_ID"}},
		{"installs only", map[string]string{"SLACK_CLIENT_ID": "111.222", "SLACK_CLIENT_SECRET": "sec-canary",
			"PUBLIC_URL": "https://bobbin.example.com/", "SECRET_KEY": key}, nil},
		{"both modes", map[string]string{"SLACK_BOT_TOKEN": "xoxb-1-2-abc", "SLACK_CLIENT_ID": "111.222",
			"SLACK_CLIENT_SECRET": "sec-canary", "PUBLIC_URL": "https://bobbin.example.com", "SECRET_KEY": key}, nil},
		{"id alone", map[string]string{"SLACK_CLIENT_ID": "111.222"},
			[]string{"SLACK_CLIENT_SECRET is required", "PUBLIC_URL is required", "SECRET_KEY is required"}},
		{"secret alone", map[string]string{"SLACK_BOT_TOKEN": "xoxb-1-2-abc", "SLACK_CLIENT_SECRET": "sec-canary"},
			[]string{"SLACK_CLIENT_SECRET is set without SLACK_CLIENT_ID"}},
		{"bad authorize URL", map[string]string{"SLACK_CLIENT_ID": "111.222", "SLACK_CLIENT_SECRET": "sec-canary",
			"PUBLIC_URL": "https://b.example.com", "SECRET_KEY": key, "SLACK_OAUTH_AUTHORIZE_URL": "javascript:alert(1)"},
			[]string{"SLACK_OAUTH_AUTHORIZE_URL must be"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := base()
			for k, v := range tt.env {
				e[k] = v
			}
			c, err := loadConfig(envFunc(e))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("loadConfig: %v", err)
				}
				o := c.installOptions()
				if o.RedirectURL != "https://bobbin.example.com"+install.RedirectPath || o.ClientID != "111.222" || o.AuthorizeURL != install.DefaultAuthorizeURL {
					t.Errorf("install options = %+v", o)
				}
				return
			}
			if err == nil {
				t.Fatal("loadConfig accepted it")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "canary") {
				t.Errorf("error echoes a value: %v", err)
			}
		})
	}
	if o := (config{}).installOptions(); o.ClientID != "" {
		t.Errorf("installations on without SLACK_CLIENT_ID: %+v", o)
	}
}
